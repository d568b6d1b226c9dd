"""Guild-side platform events → OneBot events, the way the Go daemon (Gensokyo) shows them.

Gensokyo, in its default ``global_channel_to_group`` mode, shows a guild channel as a
group: ``message_type`` ``group``, ``group_id`` the number of the channel id, ``user_id``
the number of the author's guild user id. go-cqhttp had a ``message_type`` ``guild`` of
its own with string ids, which most frameworks ignore; this bridge does what Gensokyo does,
so a bot written for groups answers in channels unchanged. The channel's guild stays
available: every channel event also carries ``guild_id`` and ``channel_id`` as the
platform's own ids (text), as go-cqhttp's guild events did. A guild DM is a private
message (``sub_type`` ``friend``) and only that, as Gensokyo sends it: a ``guild_id`` beside
it makes a framework take it for a guild's (Koishi does), so the DM session's ids are
extension fields (``onebot.extensions``) only.

Recalls become ``group_recall`` / ``friend_recall``; guild member changes become
``group_increase`` / ``group_decrease`` of the guild's own number (``group_id`` the vUIN of
the guild id, with ``guild_id`` as text). Pure, one builder per kind: the kind's translator
(:mod:`gensokyo_idmap.bridge.translators`) hands it the vUINs the bridge resolved, the
virtual id it stored and, for a message, its segments (:func:`guild_segments`, with a
quote's ``reply`` first).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from gensokyo_idmap.bridge.members import MemberProfile, guild_profile
from gensokyo_idmap.bridge.mention_segments import content_segments
from gensokyo_idmap.identity import RawId
from gensokyo_idmap.onebot import events as ob
from gensokyo_idmap.onebot.message import Segment
from gensokyo_idmap.qq.events import (
    Attachment,
    ChannelMessage,
    DirectMessage,
    GuildMember,
    GuildMemberEvent,
    GuildMessageDelete,
)

__all__ = ["author_profile", "channel_message", "direct_message", "guild_segments",
           "member_change", "recall"]

def guild_segments(content: str, attachments: Sequence[Attachment],
                   mentions: Sequence[GuildMember], vuins: Mapping[str, int], self_id: int,
                   attachment_segment: Callable[[Attachment], Segment], *,
                   everyone: bool = False) -> list[Segment]:
    """The content as segments (:func:`~gensokyo_idmap.bridge.mention_segments.content_segments`):
    ``<@!id>`` of the bot (a mention of a bot user) becomes ``at`` of ``self_id``, of a
    user with a vUIN ``at`` of that vUIN, everyone's (``@everyone`` with ``everyone``)
    ``at`` of ``all``, anything else stays text; the platform's ``&lt;`` / ``&gt;`` /
    ``&amp;`` are undone."""
    ats = {**vuins, **{m.user.value: self_id for m in mentions if m.bot}}
    segments = content_segments(content, ats, everyone=everyone, unescape=True)
    segments.extend(attachment_segment(a) for a in attachments)
    return segments


def author_profile(member: GuildMember) -> MemberProfile:
    """A channel message's author as ``sender`` shows them (:mod:`.members`)."""
    return guild_profile(member.username, member.nick, member.roles)


def _by_key(event: ChannelMessage | GuildMessageDelete | GuildMemberEvent,
            vuins: Sequence[int]) -> dict[str, int]:
    """The vUIN of each identity key of ``event`` (``vuins`` in ``identities()`` order)."""
    return dict(zip((key.key for key in event.identities()), vuins, strict=True))


def channel_message(event: ChannelMessage, vuins: Sequence[int], virtual_id: int, now: int,
                    self_id: int, fmt: ob.MessageFormat, extensions: bool,
                    segments: list[Segment]) -> dict[str, Any]:
    """A channel message as a group message of the channel, its guild beside it
    (``vuins`` in ``event.identities()`` order: channel, author, the users it mentions;
    ``segments``: its content, :func:`guild_segments` with the quote first)."""
    by_key = _by_key(event, vuins)
    sender = author_profile(event.author)
    return ob.group_message(
        self_id=self_id, time=now, message_id=virtual_id, group_id=by_key[event.channel.key],
        user_id=by_key[event.author.user.key], fmt=fmt,
        nickname=sender.nickname, card=sender.card, role=sender.role, segments=segments,
        extra={"guild_id": event.guild.value, "channel_id": event.channel.value,
               **_extensions(extensions, "guild", event.author, event.channel)})


def direct_message(event: DirectMessage, vuins: Sequence[int], virtual_id: int, now: int,
                   self_id: int, fmt: ob.MessageFormat, extensions: bool,
                   segments: list[Segment]) -> dict[str, Any]:
    """A guild DM as a private message (``vuins``: the author's): no ``guild_id`` /
    ``channel_id`` beside it, which would make a framework file it as a guild's (Koishi
    does); the DM session's ids are extension fields (:func:`_dm_session`)."""
    [author] = vuins
    extra = _extensions(extensions, "guild_private", event.author, None)
    if extensions:
        extra |= _dm_session(event.dm_guild, event.channel, event.source_guild)
    return ob.private_message(
        self_id=self_id, time=now, message_id=virtual_id, user_id=author, fmt=fmt,
        nickname=event.author.nick or event.author.username, segments=segments,
        extra=extra or None)


def recall(event: GuildMessageDelete, vuins: Sequence[int], virtual_id: int, now: int,
           self_id: int, extensions: bool = False) -> dict[str, Any]:
    """A recall as ``friend_recall`` (a DM's: private, its session's ids only as extension
    fields) or ``group_recall`` (a channel's, its guild beside it), naming the recalled
    message's virtual id (``vuins`` in ``event.identities()`` order)."""
    by_key = _by_key(event, vuins)
    author = by_key[event.author.key]
    operator = by_key[event.operator.key] if event.operator is not None else author
    if event.direct:
        private = ob.friend_recall(self_id=self_id, time=now, user_id=author,
                                   message_id=virtual_id)
        return (private | _dm_session(event.guild, event.channel)) if extensions else private
    where = {"guild_id": event.guild.value, "channel_id": event.channel.value}
    return ob.group_recall(self_id=self_id, time=now, group_id=by_key[event.channel.key],
                           user_id=author, operator_id=operator, message_id=virtual_id) | where


def member_change(event: GuildMemberEvent, vuins: Sequence[int], now: int,
                  self_id: int) -> dict[str, Any]:
    """A guild member's arrival or departure as a group increase / decrease of the guild
    (``vuins`` in ``event.identities()`` order); its operator is the member when none is
    named."""
    by_key = _by_key(event, vuins)
    member = by_key[event.member.user.key]
    operator = by_key[event.operator.key] if event.operator is not None else member
    extra = {"guild_id": event.guild.value}
    if event.event_type == "GUILD_MEMBER_ADD":
        return ob.group_increase(self_id=self_id, time=now, group_id=by_key[event.guild.key],
                                 user_id=member, operator_id=operator) | extra
    left: Literal["leave", "kick"] = "leave" if operator == member else "kick"
    return ob.group_decrease(self_id=self_id, time=now, group_id=by_key[event.guild.key],
                             user_id=member, operator_id=operator, sub_type=left) | extra


def _dm_session(guild: RawId, channel: RawId, source_guild: str | None = None
                ) -> dict[str, str]:
    """A guild DM session's platform ids as extension fields (``onebot.extensions``):
    ``real_guild_id`` (where replies go), ``real_channel_id`` and ``src_guild_id`` (the
    guild the DM was opened from)."""
    ids = {"real_guild_id": guild.value, "real_channel_id": channel.value}
    return (ids | {"src_guild_id": source_guild}) if source_guild else ids


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
