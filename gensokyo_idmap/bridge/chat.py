"""One chat of one AppID: a group or a C2C conversation, as the bridge keeps it.

A :class:`Chat` is what the bridge knows of a conversation, the way a portal object owns one
room in a Matrix bridge: the scene its ``last_seen`` entries are kept under
(:func:`~gensokyo_idmap.identity.chat_scene`, the one spelling, which the graph side reads
too), the msgid-map context of its messages and of its reply-able events, and how long a
message of it can be replied to (:mod:`gensokyo_idmap.runtime.replies`). Nothing here keeps
state: a Chat is a value, equal to any other naming the same conversation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.identity import QQ_PLATFORM, chat_scene, parse_scene
from gensokyo_idmap.runtime.msgid import EVENT_KINDS, MsgContext
from gensokyo_idmap.runtime.replies import REPLY_WINDOW_SECONDS

__all__ = ["CHAT_KINDS", "GROUP_CHAT_KINDS", "GUILD_CHAT_KINDS", "Chat", "ChatKind", "Direction"]

ChatKind = Literal["group", "c2c", "channel", "dms"]
Direction = Literal["in", "out"]
#: The kinds of chat the platform delivers messages of and takes passive replies in: groups
#: and C2C (named by OpenIDs), guild channels (by channel id) and guild direct-message
#: sessions (by the session's guild id).
CHAT_KINDS: Final[tuple[ChatKind, ...]] = ("group", "c2c", "channel", "dms")
#: The guild-side kinds: their targets are platform ids (``raw:`` keys), not OpenIDs.
GUILD_CHAT_KINDS: Final[frozenset[str]] = frozenset({"channel", "dms"})
#: The kinds with members, shown to frameworks as groups: an ``at`` names one of them.
GROUP_CHAT_KINDS: Final[frozenset[str]] = frozenset({"group", "channel"})


@dataclass(frozen=True, slots=True)
class Chat:
    """A group (``openid``: its group OpenID), a C2C chat (the user's OpenID), a guild
    channel (its channel id) or a guild DM session (its guild id) of ``app_id`` on
    ``platform``."""

    app_id: str
    kind: ChatKind
    openid: str
    platform: str = QQ_PLATFORM

    def __post_init__(self) -> None:
        if self.kind not in CHAT_KINDS:
            raise BadInputError("chat kind", self.kind,
                                f"a chat is one of {', '.join(CHAT_KINDS)}")
        if not self.openid:
            raise BadInputError("chat openid", self.openid, "a chat needs its OpenID")

    @classmethod
    def of_scene(cls, scene: str) -> Chat:
        """The chat a ``last_seen`` scene names; a :class:`BadInputError` naming the scene
        when it is not the scene of a group or C2C chat."""
        platform, app_id, kind, openid = parse_scene(scene)
        if kind not in CHAT_KINDS:
            raise BadInputError("scene", scene, f"the chat kind {kind!r} is not one of "
                                                f"{', '.join(CHAT_KINDS)}")
        return cls(app_id, kind, openid, platform)

    @staticmethod
    def kind_prefix(app_id: str, kind: ChatKind, platform: str = QQ_PLATFORM) -> str:
        """The start of the scene of every chat of this kind and AppID (``QQ:<app>:c2c:``)."""
        return chat_scene(app_id, kind, "", platform)

    @property
    def scene(self) -> str:
        """The ``last_seen`` scene of this chat (as inbound events name it)."""
        return chat_scene(self.app_id, self.kind, self.openid, self.platform)

    @property
    def event_kind(self) -> str:
        """The msgid-map chat kind of this chat's reply-able non-message events."""
        return EVENT_KINDS[self.kind]

    @property
    def reply_window(self) -> float:
        """How long a message received in this chat can be replied to, in seconds."""
        return REPLY_WINDOW_SECONDS[self.kind]

    def context(self, direction: Direction) -> MsgContext:
        """The msgid-map context of a message of this chat."""
        return MsgContext(self.app_id, self.kind, self.openid, direction)

    def event_context(self) -> MsgContext:
        """The msgid-map context of a reply-able event received in this chat."""
        return MsgContext(self.app_id, self.event_kind, self.openid, "in")

    def holds(self, chat_kind: str) -> bool:
        """Whether a msgid record of ``chat_kind`` belongs to a chat of this kind (its
        messages or its events)."""
        return chat_kind in (self.kind, self.event_kind)
