"""One translator per platform event kind: what the inbound bridge asks of each event.

The bridge (:mod:`gensokyo_idmap.bridge.inbound`) works a batch at a time: it asks every
event whom it names and resolves them all together, builds every message's content and
looks its quotes up together, stores every real id together, records where every channel
lives, and only then builds the OneBot events. Each of those steps asks the event's
translator for its part (:data:`TRANSLATORS`, by the event's class), so the steps never
test an event's type, and a new kind of event is one :class:`Translator` and one row of the
table (``tests/bridge/test_translators.py`` fails while a kind of
:data:`~gensokyo_idmap.qq.events.QQEvent` has none). Every method of a translator defaults
to "nothing": the lifecycle and unknown events are the translator that overrides none.

Pure: a translator reads its event and :class:`Scope` (the serving bot's settings, the
bridge's cache of msgid contexts, its logger) and returns values; resolving, storing and
sending stay with the bridge. The guild side is shown the way Gensokyo shows it
(:mod:`gensokyo_idmap.bridge.guild_inbound`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, Literal, TypeVar

from gensokyo_idmap.bridge import guild_inbound as guild
from gensokyo_idmap.bridge.chat import ChatKind
from gensokyo_idmap.bridge.guilds import ConfigEntry, channel_entries, dm_entries
from gensokyo_idmap.bridge.members import MemberProfile, group_profile, group_role
from gensokyo_idmap.bridge.mention_segments import at_segment, content_segments, is_at
from gensokyo_idmap.identity import IdentityKey, OpenId
from gensokyo_idmap.onebot import events as ob
from gensokyo_idmap.onebot.message import Segment, segments_to_cq_within
from gensokyo_idmap.qq.events import (
    Attachment,
    C2CMessage,
    ChannelMessage,
    DirectMessage,
    FriendEvent,
    GroupMemberEvent,
    GroupMessage,
    GroupRobotEvent,
    GuildMemberEvent,
    GuildMessageDelete,
    Interaction,
    QQEvent,
    Ready,
    Resumed,
    UnknownEvent,
)
from gensokyo_idmap.runtime.msgid import MAX_CONTENT_BYTES, MsgContext

__all__ = ["REPLYABLE_EVENTS", "TRANSLATORS", "Scope", "Translator", "attachment_segment"]

E = TypeVar("E", bound=QQEvent)

#: Non-message events whose envelope id the platform accepts as a send's ``event_id``
#: (rule 5 of the inbound module), and the kind of chat that send goes to.
REPLYABLE_EVENTS: Final = {
    "GROUP_ADD_ROBOT": "group", "GROUP_MSG_RECEIVE": "group",
    "FRIEND_ADD": "c2c", "C2C_MSG_RECEIVE": "c2c",
}
_NONE: Final[tuple[ConfigEntry, ...]] = ()
#: A member as an event names them: (the chat's vUIN, their vUIN, their profile).
Named = tuple[int, int, MemberProfile]


def attachment_segment(attachment: Attachment) -> Segment:
    """An attachment as the OneBot segment a framework expects for its kind."""
    kind = attachment.content_type.lower()
    if kind.startswith("image/"):
        segment_type = "image"
    elif kind in ("voice", "audio") or kind.startswith("audio/"):
        segment_type = "record"
    elif kind.startswith("video/"):
        segment_type = "video"
    else:
        segment_type = "file"
    data = [("file", attachment.url), ("url", attachment.url)]
    if attachment.filename:
        data.append(("name", attachment.filename))
    return Segment(segment_type, tuple(data))


@dataclass(frozen=True, slots=True)
class Scope:
    """What a translator reads besides its event: the serving bot's settings, the bridge's
    msgid context of a chat (``context(kind, target, of_event)``: built once per chat, the
    same chats come back event after event) and the bridge's logger."""

    app_id: str
    self_id: int
    message_format: ob.MessageFormat
    extensions: bool
    link_union_openid: bool
    context: Callable[[ChatKind, str, bool], MsgContext]
    log: Any

    def person(self, openid: OpenId, union: IdentityKey | None) -> list[IdentityKey]:
        """The identity set of a message's author: with their ``union_openid`` when
        ``link_union_openid`` is on (rule 2 of the inbound module)."""
        if union is not None and self.link_union_openid:
            return [openid, union]
        return [openid]

    def notice(self, notice_type: str, when: int, **fields: Any) -> dict[str, Any]:
        """An extension notice (no v11 equivalent): documented in the README."""
        return {"time": when, "self_id": self.self_id, "post_type": "notice",
                "notice_type": notice_type, **fields}

    def extensions_of(self, message_type: str, user: OpenId,
                      group: OpenId | None) -> dict[str, Any] | None:
        """The Go daemon's extra fields, when ``onebot.extensions`` is on."""
        if not self.extensions:
            return None
        extra: dict[str, Any] = {
            "real_message_type": message_type,
            "real_user_id": user.openid,
            "avatar": f"https://q.qlogo.cn/qqapp/{self.app_id}/{user.openid}/640",
        }
        if group is not None:
            extra["real_group_id"] = group.openid
        return extra


class Translator(Generic[E]):
    """How the bridge translates one kind of event, one method per step of a batch; each
    defaults to "nothing" (names nobody, has no content, stores no id, goes nowhere).

    ``vuins`` are those of :meth:`people`, in its order."""

    __slots__ = ()

    def people(self, event: E, scope: Scope) -> list[list[IdentityKey]]:
        """Whom ``event`` names, each as the identity set of one vUIN."""
        return []

    def content(self, event: E, vuins: Sequence[int], scope: Scope) -> list[Segment] | None:
        """A message's OneBot content (None: the event is no message)."""
        return None

    def quoted(self, event: E) -> tuple[ChatKind, str, str] | None:
        """The chat (kind, target) and ``msg_idx`` of the message ``event`` quotes, if any
        (rule 8 of the inbound module)."""
        return None

    def referenced(self, event: E) -> tuple[ChatKind, str, str] | None:
        """The chat (kind, target) and platform message id of the message ``event`` quotes
        by its id (a guild message's ``message_reference``), if any (rule 8)."""
        return None

    def real_id(self, event: E, vuins: Sequence[int], content: Sequence[Segment] | None,
                scope: Scope) -> tuple[str, MsgContext] | None:
        """The real id ``event`` puts in the msgid map and its context, if any; ``content``
        that of :meth:`content`, with its quote."""
        return None

    def config_entries(self, event: E, vuins: Sequence[int]) -> Sequence[ConfigEntry]:
        """The legacy config entries ``event`` tells (:mod:`gensokyo_idmap.bridge.guilds`)."""
        return _NONE

    def members(self, event: E, vuins: Sequence[int]) -> Sequence[Named]:
        """The chat members ``event`` names with their name and role
        (:mod:`gensokyo_idmap.bridge.members`): a message's author."""
        return ()

    def onebot(self, event: E, vuins: Sequence[int], virtual_id: int, now: int,
               content: list[Segment] | None, scope: Scope) -> list[dict[str, Any]]:
        """The OneBot events of ``event``; ``virtual_id`` that of :meth:`real_id` (0: none),
        ``now`` the bridge's clock."""
        scope.log.info("[message] not forwarded", type=event.event_type)
        return []


def _event_id(event: QQEvent, kind: ChatKind, target: OpenId,
              scope: Scope) -> tuple[str, MsgContext] | None:
    """A reply-able event's own id under its chat, so a send there can answer it (rule 5)."""
    if event.event_id is None:
        return None
    return event.event_id, scope.context(kind, target.openid, True)


def _kept(content: Sequence[Segment] | None) -> str:
    """A message's content as the msgid map keeps it: CQ text cut to the map's bound."""
    return segments_to_cq_within(content or (), MAX_CONTENT_BYTES)


# --------------------------------------------------------------------------- groups and C2C

M = TypeVar("M", GroupMessage, C2CMessage)


class _ChatMessage(Translator[M]):
    """A group or C2C message: content, quote and real id read the same way."""

    __slots__ = ()
    #: where the author's vUIN is among those of :meth:`people`
    author_at = 0

    def chat(self, event: M) -> tuple[ChatKind, OpenId]:
        raise NotImplementedError

    def at_self(self, event: M) -> bool:
        return False

    def text(self, event: M, vuins: Sequence[int], scope: Scope) -> list[Segment]:
        """The content's text as segments."""
        return [Segment.text(event.content)] if event.content else []

    def content(self, event: M, vuins: Sequence[int], scope: Scope) -> list[Segment]:
        segments = self.text(event, vuins, scope)
        if self.at_self(event) and not any(is_at(s, scope.self_id) for s in segments):
            # The platform strips the @bot (content then starts with a space); put it back
            # as an at segment so frameworks see a message addressed to them.
            segments.insert(0, at_segment(scope.self_id))
        segments.extend(attachment_segment(a) for a in event.attachments)
        return segments

    def quoted(self, event: M) -> tuple[ChatKind, str, str] | None:
        if event.quoted_idx is None:
            return None
        kind, target = self.chat(event)
        return kind, target.openid, event.quoted_idx

    def real_id(self, event: M, vuins: Sequence[int], content: Sequence[Segment] | None,
                scope: Scope) -> tuple[str, MsgContext]:
        """With its author (the last vUIN) and content (cut to the map's bound), and under
        its ``msg_idx`` (rule 3 of the inbound module)."""
        kind, target = self.chat(event)
        return event.message_id, scope.context(kind, target.openid, False).about(
            vuins[self.author_at], _kept(content), event.msg_idx)


class _GroupMessage(_ChatMessage[GroupMessage]):
    """A group message: the group, its author, then each member it mentions (the bot and
    the author aside), whose ``at`` segments name their vUINs."""

    __slots__ = ()
    author_at = 1

    def chat(self, event: GroupMessage) -> tuple[ChatKind, OpenId]:
        return "group", event.group

    def at_self(self, event: GroupMessage) -> bool:
        return event.event_type == "GROUP_AT_MESSAGE_CREATE" or event.mentioned_bot

    def people(self, event: GroupMessage, scope: Scope) -> list[list[IdentityKey]]:
        mentioned: list[list[IdentityKey]] = [[m] for m in event.mentioned_members()]
        return [[event.group], scope.person(event.author, event.author_union), *mentioned]

    def text(self, event: GroupMessage, vuins: Sequence[int],
             scope: Scope) -> list[Segment]:
        """The content with each mention as an ``at`` (the markup's id → its vUIN; the
        bot's → ``self_id``); a member or everyone ``mentions[]`` names but the content
        does not show is an ``at`` after the text."""
        members = event.mentioned_members()
        number = dict(zip(members, vuins[2:], strict=True))
        number[event.author] = vuins[1]
        ats: dict[str, int] = {}
        for mention in event.mentions:
            qq = scope.self_id if mention.is_you else number[mention.member]
            ats[mention.markup_id] = ats[mention.member.openid] = qq
        segments = content_segments(event.content, ats, everyone=event.mentions_everyone)
        shown = {dict(s.data)["qq"] for s in segments if s.type == "at"}
        segments += [at_segment(qq) for qq in dict.fromkeys(number[m] for m in members)
                     if str(qq) not in shown]
        if event.mentions_everyone and "all" not in shown:
            segments.append(at_segment("all"))
        return segments

    def members(self, event: GroupMessage, vuins: Sequence[int]) -> Sequence[Named]:
        return ((vuins[0], vuins[1], group_profile(event.author_name, event.author_role)),)

    def onebot(self, event: GroupMessage, vuins: Sequence[int], virtual_id: int, now: int,
               content: list[Segment] | None, scope: Scope) -> list[dict[str, Any]]:
        group_vuin, user_vuin = vuins[:2]
        scope.log.info("[message] group mapped", group=group_vuin, user=user_vuin,
                       message_id=virtual_id)
        return [ob.group_message(
            self_id=scope.self_id, time=now, message_id=virtual_id, group_id=group_vuin,
            user_id=user_vuin, fmt=scope.message_format,
            nickname=event.author_name, role=group_role(event.author_role),
            extra=scope.extensions_of("group", event.author, event.group),
            segments=content or [])]


class _C2CMessage(_ChatMessage[C2CMessage]):
    __slots__ = ()

    def chat(self, event: C2CMessage) -> tuple[ChatKind, OpenId]:
        return "c2c", event.user

    def people(self, event: C2CMessage, scope: Scope) -> list[list[IdentityKey]]:
        return [scope.person(event.user, event.author_union)]

    def onebot(self, event: C2CMessage, vuins: Sequence[int], virtual_id: int, now: int,
               content: list[Segment] | None, scope: Scope) -> list[dict[str, Any]]:
        [user_vuin] = vuins
        scope.log.info("[message] c2c mapped", user=user_vuin, message_id=virtual_id)
        return [ob.private_message(
            self_id=scope.self_id, time=now, message_id=virtual_id, user_id=user_vuin,
            fmt=scope.message_format, extra=scope.extensions_of("private", event.user, None),
            nickname=event.author_name, segments=content or [])]


class _GroupRobot(Translator[GroupRobotEvent]):
    """The bot added to or removed from a group, or its messages there refused / allowed
    again: a group increase / decrease of the bot itself, else an extension notice."""

    __slots__ = ()

    def people(self, event: GroupRobotEvent, scope: Scope) -> list[list[IdentityKey]]:
        return [[event.group], [event.operator]]

    def real_id(self, event: GroupRobotEvent, vuins: Sequence[int],
                content: Sequence[Segment] | None,
                scope: Scope) -> tuple[str, MsgContext] | None:
        if event.event_type not in REPLYABLE_EVENTS:
            return None
        return _event_id(event, "group", event.group, scope)

    def onebot(self, event: GroupRobotEvent, vuins: Sequence[int], virtual_id: int, now: int,
               content: list[Segment] | None, scope: Scope) -> list[dict[str, Any]]:
        group_vuin, operator_vuin = vuins
        scope.log.info("[message] group robot event mapped", type=event.event_type,
                       group=group_vuin, operator=operator_vuin)
        when = event.timestamp or now
        if event.event_type == "GROUP_ADD_ROBOT":
            return [ob.group_increase(self_id=scope.self_id, time=when, group_id=group_vuin,
                                      user_id=scope.self_id, operator_id=operator_vuin,
                                      sub_type="invite")]
        if event.event_type == "GROUP_DEL_ROBOT":
            return [ob.group_decrease(self_id=scope.self_id, time=when, group_id=group_vuin,
                                      user_id=scope.self_id, operator_id=operator_vuin,
                                      sub_type="kick_me")]
        return [scope.notice(event.event_type.lower(), when, group_id=group_vuin,
                             operator_id=operator_vuin)]


class _GroupMember(Translator[GroupMemberEvent]):
    """A member joined or left a group: its operator is the member when none is named."""

    __slots__ = ()

    def people(self, event: GroupMemberEvent, scope: Scope) -> list[list[IdentityKey]]:
        people: list[list[IdentityKey]] = [[event.group], [event.member]]
        return people if event.operator is None else [*people, [event.operator]]

    def onebot(self, event: GroupMemberEvent, vuins: Sequence[int], virtual_id: int,
               now: int, content: list[Segment] | None,
               scope: Scope) -> list[dict[str, Any]]:
        group_vuin, member_vuin, *operator = vuins
        operator_vuin = operator[0] if operator else member_vuin
        scope.log.info("[message] group_member mapped", type=event.event_type,
                       group=group_vuin, user=member_vuin)
        when = event.timestamp or now
        if event.event_type == "GROUP_MEMBER_ADD":
            return [ob.group_increase(self_id=scope.self_id, time=when, group_id=group_vuin,
                                      user_id=member_vuin, operator_id=operator_vuin)]
        left: Literal["leave", "kick"] = "leave" if operator_vuin == member_vuin else "kick"
        return [ob.group_decrease(self_id=scope.self_id, time=when, group_id=group_vuin,
                                  user_id=member_vuin, operator_id=operator_vuin,
                                  sub_type=left)]


class _Friend(Translator[FriendEvent]):
    """A user added or removed the bot, or refused / allowed its messages again."""

    __slots__ = ()

    def people(self, event: FriendEvent, scope: Scope) -> list[list[IdentityKey]]:
        return [[event.user]]

    def real_id(self, event: FriendEvent, vuins: Sequence[int],
                content: Sequence[Segment] | None,
                scope: Scope) -> tuple[str, MsgContext] | None:
        if event.event_type not in REPLYABLE_EVENTS:
            return None
        return _event_id(event, "c2c", event.user, scope)

    def onebot(self, event: FriendEvent, vuins: Sequence[int], virtual_id: int, now: int,
               content: list[Segment] | None, scope: Scope) -> list[dict[str, Any]]:
        [user_vuin] = vuins
        scope.log.info("[message] friend mapped", type=event.event_type, user=user_vuin)
        when = event.timestamp or now
        if event.event_type == "FRIEND_ADD":
            return [ob.friend_add(self_id=scope.self_id, time=when, user_id=user_vuin)]
        return [scope.notice(event.event_type.lower(), when, user_id=user_vuin)]


class _Interaction(Translator[Interaction]):
    """A button or quick menu pressed: an extension notice; its id answers in its group or
    C2C chat (the pipeline acknowledges it to the platform)."""

    __slots__ = ()

    def people(self, event: Interaction, scope: Scope) -> list[list[IdentityKey]]:
        return [[key] for key in (event.group, event.group_member or event.user)
                if key is not None]

    def real_id(self, event: Interaction, vuins: Sequence[int],
                content: Sequence[Segment] | None,
                scope: Scope) -> tuple[str, MsgContext] | None:
        if event.group is not None:
            return _event_id(event, "group", event.group, scope)
        if event.user is not None:
            return _event_id(event, "c2c", event.user, scope)
        return None

    def onebot(self, event: Interaction, vuins: Sequence[int], virtual_id: int, now: int,
               content: list[Segment] | None, scope: Scope) -> list[dict[str, Any]]:
        found = iter(vuins)
        ids: dict[str, int] = {}
        if event.group is not None:
            ids["group_id"] = next(found)
        if (event.group_member or event.user) is not None:
            ids["user_id"] = next(found)
        return [scope.notice("interaction", now, interaction_id=event.interaction_id,
                             button_data=event.button_data, button_id=event.button_id,
                             **ids)]


# --------------------------------------------------------------------------- the guild side

G = TypeVar("G", ChannelMessage, DirectMessage, GuildMessageDelete, GuildMemberEvent)


class _GuildEvent(Translator[G]):
    """A guild-side event names ``raw:`` ids, one identity each, in the order of its
    ``identities()`` (which the builders of :mod:`~gensokyo_idmap.bridge.guild_inbound`
    read)."""

    __slots__ = ()

    def people(self, event: G, scope: Scope) -> list[list[IdentityKey]]:
        return [[key] for key in event.identities()]

    def onebot(self, event: G, vuins: Sequence[int], virtual_id: int, now: int,
               content: list[Segment] | None, scope: Scope) -> list[dict[str, Any]]:
        scope.log.info("[message] guild mapped", type=event.event_type, vuins=vuins,
                       message_id=virtual_id)
        return [self.shown(event, vuins, virtual_id, now, content or [], scope)]

    def shown(self, event: G, vuins: Sequence[int], virtual_id: int, now: int,
              content: list[Segment], scope: Scope) -> dict[str, Any]:
        raise NotImplementedError


class _ChannelMessage(_GuildEvent[ChannelMessage]):
    """A channel message: a group message of the channel (its id under the channel, with
    its author and content, so a reply answers it and ``get_msg`` shows it); a
    ``message_reference`` names the message it quotes."""

    __slots__ = ()

    def content(self, event: ChannelMessage, vuins: Sequence[int],
                scope: Scope) -> list[Segment]:
        users = {key.key[len("raw:"):]: vuin
                 for key, vuin in zip(event.identities(), vuins, strict=True)}
        return guild.guild_segments(event.content, event.attachments, event.mentions, users,
                                    scope.self_id, attachment_segment,
                                    everyone=event.mentions_everyone)

    def referenced(self, event: ChannelMessage) -> tuple[ChatKind, str, str] | None:
        if event.quoted_id is None:
            return None
        return "channel", event.channel.value, event.quoted_id

    def real_id(self, event: ChannelMessage, vuins: Sequence[int],
                content: Sequence[Segment] | None, scope: Scope) -> tuple[str, MsgContext]:
        return event.message_id, scope.context("channel", event.channel.value, False).about(
            vuins[1], _kept(content))

    def config_entries(self, event: ChannelMessage,
                       vuins: Sequence[int]) -> Sequence[ConfigEntry]:
        return channel_entries(event.channel.value, vuins[0], event.guild.value)

    def members(self, event: ChannelMessage, vuins: Sequence[int]) -> Sequence[Named]:
        return ((vuins[0], vuins[1], guild.author_profile(event.author)),)

    def shown(self, event: ChannelMessage, vuins: Sequence[int], virtual_id: int, now: int,
              content: list[Segment], scope: Scope) -> dict[str, Any]:
        return guild.channel_message(event, vuins, virtual_id, now, scope.self_id,
                                     scope.message_format, scope.extensions, content)


class _DirectMessage(_GuildEvent[DirectMessage]):
    """A guild DM: a private message (its id under the DM session, with its author and
    content); a ``message_reference`` names the message it quotes."""

    __slots__ = ()

    def content(self, event: DirectMessage, vuins: Sequence[int],
                scope: Scope) -> list[Segment]:
        return guild.guild_segments(event.content, event.attachments, (), {}, scope.self_id,
                                    attachment_segment)

    def referenced(self, event: DirectMessage) -> tuple[ChatKind, str, str] | None:
        if event.quoted_id is None:
            return None
        return "dms", event.dm_guild.value, event.quoted_id

    def real_id(self, event: DirectMessage, vuins: Sequence[int],
                content: Sequence[Segment] | None, scope: Scope) -> tuple[str, MsgContext]:
        return event.message_id, scope.context("dms", event.dm_guild.value, False).about(
            vuins[0], _kept(content))

    def config_entries(self, event: DirectMessage,
                       vuins: Sequence[int]) -> Sequence[ConfigEntry]:
        return dm_entries(event.author.user.value, vuins[0], event.channel.value,
                          event.dm_guild.value)

    def shown(self, event: DirectMessage, vuins: Sequence[int], virtual_id: int, now: int,
              content: list[Segment], scope: Scope) -> dict[str, Any]:
        return guild.direct_message(event, vuins, virtual_id, now, scope.self_id,
                                    scope.message_format, scope.extensions, content)


class _Recall(_GuildEvent[GuildMessageDelete]):
    """A recall: the recalled message's id only under its id (it must never be answered;
    an id already known keeps its own record), so the recall names its virtual id."""

    __slots__ = ()

    def real_id(self, event: GuildMessageDelete, vuins: Sequence[int],
                content: Sequence[Segment] | None, scope: Scope) -> tuple[str, MsgContext]:
        return event.deleted_id, MsgContext()

    def shown(self, event: GuildMessageDelete, vuins: Sequence[int], virtual_id: int,
              now: int, content: list[Segment], scope: Scope) -> dict[str, Any]:
        return guild.recall(event, vuins, virtual_id, now, scope.self_id, scope.extensions)


class _GuildMember(_GuildEvent[GuildMemberEvent]):
    """A guild member joined or left: a group increase / decrease of the guild."""

    __slots__ = ()

    def shown(self, event: GuildMemberEvent, vuins: Sequence[int], virtual_id: int,
              now: int, content: list[Segment], scope: Scope) -> dict[str, Any]:
        return guild.member_change(event, vuins, now, scope.self_id)


class _Untranslated(Translator[Ready | Resumed | UnknownEvent]):
    """The gateway's lifecycle events and event types nobody knows: logged, never sent
    (rule 4 of the inbound module)."""

    __slots__ = ()


_UNTRANSLATED: Final = _Untranslated()

#: The translator of each kind of platform event, by its class: exactly one per kind of
#: :data:`~gensokyo_idmap.qq.events.QQEvent`.
TRANSLATORS: Final[Mapping[type[QQEvent], Translator[Any]]] = {
    GroupMessage: _GroupMessage(),
    C2CMessage: _C2CMessage(),
    GroupRobotEvent: _GroupRobot(),
    GroupMemberEvent: _GroupMember(),
    FriendEvent: _Friend(),
    Interaction: _Interaction(),
    ChannelMessage: _ChannelMessage(),
    DirectMessage: _DirectMessage(),
    GuildMessageDelete: _Recall(),
    GuildMemberEvent: _GuildMember(),
    Ready: _UNTRANSLATED,
    Resumed: _UNTRANSLATED,
    UnknownEvent: _UNTRANSLATED,
}
