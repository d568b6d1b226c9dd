"""Guild-side platform events → OneBot events, the way the Go daemon (Gensokyo) shows them.

Gensokyo, in its default ``global_channel_to_group`` mode, shows a guild channel as a
group: ``message_type`` ``group``, ``group_id`` the number of the channel id, ``user_id``
the number of the author's guild user id. go-cqhttp had a ``message_type`` ``guild`` of
its own with string ids, which most frameworks ignore; this bridge does what Gensokyo does,
so a bot written for groups answers in channels unchanged. The channel's guild stays
available: every channel event also carries ``guild_id`` and ``channel_id`` as the
platform's own ids (text), as go-cqhttp's guild events did. A guild DM is a private
message (``sub_type`` ``friend``) with the DM session's ``guild_id`` / ``channel_id``.

Recalls become ``group_recall`` / ``friend_recall``; guild member changes become
``group_increase`` / ``group_decrease`` of the guild's own number (``group_id`` the vUIN of
the guild id, with ``guild_id`` as text). Pure: ids are resolved and stored by the caller
(:mod:`gensokyo_idmap.bridge.inbound`).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal

from gensokyo_idmap.bridge.guilds import ConfigEntry, channel_entries, dm_entries
from gensokyo_idmap.identity import IdentityKey, RawId
from gensokyo_idmap.onebot import events as ob
from gensokyo_idmap.onebot.message import Segment
from gensokyo_idmap.qq.events import (
    Attachment,
    ChannelMessage,
    DirectMessage,
    GuildMember,
    GuildMemberEvent,
    GuildMessageDelete,
    QQEvent,
)
from gensokyo_idmap.runtime.msgid import MsgContext

__all__ = ["GUILD_EVENTS", "GuildEvent", "config_entries", "guild_msgid", "guild_onebot",
           "guild_people", "guild_segments"]

GuildEvent = ChannelMessage | DirectMessage | GuildMessageDelete | GuildMemberEvent
GUILD_EVENTS: Final = (ChannelMessage, DirectMessage, GuildMessageDelete, GuildMemberEvent)
#: ``<@!id>`` / ``<@id>``: a user mention as the platform writes it in ``content``.
_MENTION: Final = re.compile(r"<@!?([0-9A-Za-z_\-]+)>")


def guild_people(event: GuildEvent) -> list[list[IdentityKey]]:
    """Whom the event names, one identity each, in the order :func:`guild_onebot` reads
    their vUINs."""
    return [[key] for key in event.identities()]


def guild_msgid(event: GuildEvent, app_id: str,
                people: Sequence[int]) -> tuple[str, MsgContext] | None:
    """The real id the event puts in the message-id map: a message under its chat (so a
    reply can answer it) with its author (``people`` in :func:`guild_people`'s order, so
    ``get_msg`` names who wrote it); a recalled message only under its id (it must never be
    answered; an id already known keeps its own record)."""
    if isinstance(event, ChannelMessage):
        return event.message_id, MsgContext(
            app_id, "channel", event.channel.value, "in").about(people[1], None)
    if isinstance(event, DirectMessage):
        return event.message_id, MsgContext(
            app_id, "dms", event.dm_guild.value, "in").about(people[0], None)
    if isinstance(event, GuildMessageDelete):
        return event.deleted_id, MsgContext()
    return None


def guild_segments(content: str, attachments: Sequence[Attachment],
                   mentions: Sequence[GuildMember], vuins: Mapping[str, int], self_id: int,
                   attachment_segment: Callable[[Attachment], Segment]) -> list[Segment]:
    """The content as segments: ``<@!id>`` of the bot (a mention of a bot user) becomes
    ``at`` of ``self_id``, of a user with a vUIN ``at`` of that vUIN, anything else stays
    text; the platform's ``&lt;`` / ``&gt;`` / ``&amp;`` are undone."""
    bots = {m.user.value for m in mentions if m.bot}
    segments: list[Segment] = []
    at = 0
    for found in _MENTION.finditer(content):
        user = found.group(1)
        qq = self_id if user in bots else vuins.get(user)
        if qq is None:
            continue
        if found.start() > at:
            segments.append(Segment.text(html.unescape(content[at:found.start()])))
        segments.append(Segment("at", (("qq", str(qq)),)))
        at = found.end()
    if at < len(content):
        segments.append(Segment.text(html.unescape(content[at:])))
    segments.extend(attachment_segment(a) for a in attachments)
    return segments


def config_entries(event: QQEvent, vuins: Sequence[int]) -> list[ConfigEntry]:
    """The legacy config entries the event tells (:mod:`gensokyo_idmap.bridge.guilds`)."""
    if isinstance(event, ChannelMessage):
        return channel_entries(event.channel.value, vuins[0], event.guild.value)
    if isinstance(event, DirectMessage):
        return dm_entries(event.author.user.value, vuins[0], event.channel.value,
                          event.dm_guild.value)
    return []


def _sender(member: GuildMember) -> dict[str, str]:
    return {"nickname": member.nick or member.username, "card": member.nick}


def guild_onebot(event: GuildEvent, vuins: Sequence[int], virtual_id: int, now: int,
                 self_id: int, fmt: ob.MessageFormat, extensions: bool,
                 attachment_segment: Callable[[Attachment], Segment]) -> list[dict[str, Any]]:
    """The OneBot events of one guild-side event (``vuins`` in :func:`guild_people`
    order)."""
    by_key = dict(zip((key.key for key in event.identities()), vuins, strict=True))

    def vuin(key: RawId) -> int:
        return by_key[key.key]

    if isinstance(event, ChannelMessage):
        users = {k[len("raw:"):]: v for k, v in by_key.items()}
        message = ob.group_message(
            self_id=self_id, time=now, message_id=virtual_id, group_id=vuin(event.channel),
            user_id=vuin(event.author.user), fmt=fmt,
            nickname=event.author.nick or event.author.username,
            segments=guild_segments(event.content, event.attachments, event.mentions, users,
                                    self_id, attachment_segment),
            extra={"guild_id": event.guild.value, "channel_id": event.channel.value,
                   **_extensions(extensions, "guild", event.author, event.channel)})
        message["sender"] = {**message["sender"], **_sender(event.author)}
        return [message]
    if isinstance(event, DirectMessage):
        message = ob.private_message(
            self_id=self_id, time=now, message_id=virtual_id,
            user_id=vuin(event.author.user), fmt=fmt,
            nickname=event.author.nick or event.author.username,
            segments=guild_segments(event.content, event.attachments, (), {}, self_id,
                                    attachment_segment),
            extra={"guild_id": event.dm_guild.value, "channel_id": event.channel.value,
                   **({"src_guild_id": event.source_guild} if event.source_guild else {}),
                   **_extensions(extensions, "guild_private", event.author, None)})
        return [message]
    if isinstance(event, GuildMessageDelete):
        author = vuin(event.author)
        operator = vuin(event.operator) if event.operator is not None else author
        if event.direct:
            return [ob.friend_recall(self_id=self_id, time=now, user_id=author,
                                     message_id=virtual_id)
                    | {"guild_id": event.guild.value, "channel_id": event.channel.value}]
        return [ob.group_recall(self_id=self_id, time=now, group_id=vuin(event.channel),
                                user_id=author, operator_id=operator, message_id=virtual_id)
                | {"guild_id": event.guild.value, "channel_id": event.channel.value}]
    member = vuin(event.member.user)
    operator = vuin(event.operator) if event.operator is not None else member
    extra = {"guild_id": event.guild.value}
    if event.event_type == "GUILD_MEMBER_ADD":
        return [ob.group_increase(self_id=self_id, time=now, group_id=vuin(event.guild),
                                  user_id=member, operator_id=operator) | extra]
    left: Literal["leave", "kick"] = "leave" if operator == member else "kick"
    return [ob.group_decrease(self_id=self_id, time=now, group_id=vuin(event.guild),
                              user_id=member, operator_id=operator, sub_type=left) | extra]


def _extensions(on: bool, message_type: str, author: GuildMember,
                channel: RawId | None) -> dict[str, Any]:
    """The Go daemon's extra fields (``onebot.extensions``): the platform's own ids."""
    if not on:
        return {}
    extra: dict[str, Any] = {"real_message_type": message_type,
                             "real_user_id": author.user.value, "avatar": author.avatar}
    if channel is not None:
        extra["real_group_id"] = channel.value
    return extra
