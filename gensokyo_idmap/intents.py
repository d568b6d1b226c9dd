"""The QQ gateway's intents by name (pure): ``qq.intents`` may list names instead of a number.

The names and bits are the platform's (its event-subscription documentation, and the
official Go SDK's ``dto/websocket_intent.go``). An intent the bot is not permitted makes the
gateway close the connection (4013/4014), so only what the bot needs should be listed:
public guild bots take ``PUBLIC_GUILD_MESSAGES`` (@-messages in channels), private ones
``GUILD_MESSAGES`` (every channel message); ``DIRECT_MESSAGE`` is channel DMs,
``GUILD_MEMBERS`` members joining and leaving, ``GROUP_AND_C2C_EVENT`` groups and C2C.

Which OneBot events a subscribed event becomes is the bridge's business; an event it does
not translate is logged and dropped, never an error.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from gensokyo_idmap.errors import BadInputError

__all__ = ["GENSOKYO_HANDLERS", "INTENTS", "intents_value"]

INTENTS: Final[dict[str, int]] = {
    "GUILDS": 1 << 0,
    "GUILD_MEMBERS": 1 << 1,
    "GUILD_MESSAGES": 1 << 9,
    "GUILD_MESSAGE_REACTIONS": 1 << 10,
    "DIRECT_MESSAGE": 1 << 12,
    "OPEN_FORUMS_EVENT": 1 << 18,
    "AUDIO_OR_LIVE_CHANNEL_MEMBER": 1 << 19,
    "GROUP_AND_C2C_EVENT": 1 << 25,
    "INTERACTION": 1 << 26,
    "MESSAGE_AUDIT": 1 << 27,
    "FORUMS_EVENT": 1 << 28,
    "AUDIO_ACTION": 1 << 29,
    "PUBLIC_GUILD_MESSAGES": 1 << 30,
}

#: The Go daemon's ``text_intent`` handler names → the intent each subscribes (None: a
#: handler of the connection itself, which needs no intent).
GENSOKYO_HANDLERS: Final[dict[str, str | None]] = {
    "ReadyHandler": None,
    "ErrorNotifyHandler": None,
    "ATMessageEventHandler": "PUBLIC_GUILD_MESSAGES",
    "GuildEventHandler": "GUILDS",
    "ChannelEventHandler": "GUILDS",
    "MemberEventHandler": "GUILD_MEMBERS",
    "DirectMessageHandler": "DIRECT_MESSAGE",
    "CreateMessageHandler": "GUILD_MESSAGES",
    "InteractionHandler": "INTERACTION",
    "ThreadEventHandler": "FORUMS_EVENT",
    "GroupATMessageEventHandler": "GROUP_AND_C2C_EVENT",
    "C2CMessageEventHandler": "GROUP_AND_C2C_EVENT",
    "GroupAddRobotEventHandler": "GROUP_AND_C2C_EVENT",
    "GroupDelRobotEventHandler": "GROUP_AND_C2C_EVENT",
    "GroupMsgRejectHandler": "GROUP_AND_C2C_EVENT",
    "GroupMsgReceiveHandler": "GROUP_AND_C2C_EVENT",
}


def intents_value(names: Iterable[object], field: str = "qq.intents") -> int:
    """The bits of ``names`` (any case) OR-ed; an unknown name is refused, naming it and
    the known ones."""
    value = 0
    for name in names:
        bit = INTENTS.get(name.upper()) if isinstance(name, str) else None
        if bit is None:
            raise BadInputError(field, name, f"{name!r} is not an intent name; known: "
                                + ", ".join(INTENTS))
        value |= bit
    return value
