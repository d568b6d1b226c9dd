"""QQ platform frames and events as typed values (reference §2.2 and §4), pure: no I/O.

In the spirit of h11 / wsproto: bytes (or text, or an already decoded object) go in, frozen
dataclasses come out, and nothing here reads a socket, a clock or a store.

- :func:`parse_envelope` reads one frame ``{"op", "d", "s", "t", "id"}`` as sent by the
  gateway or posted to the webhook.
- :func:`parse_dispatch` turns an op 0 envelope into one :data:`QQEvent`. Event types this
  module does not know become :class:`UnknownEvent` (never an exception), so a new platform
  event is logged and counted upstream instead of breaking anything.

Every id the event carries becomes a typed key: OpenIDs are per AppID, so they are
:class:`~gensokyo_idmap.identity.OpenId` of the serving AppID, whatever their role (group,
member, C2C user, operator); ``author.union_openid`` becomes a
:class:`~gensokyo_idmap.identity.UnionId`. ``event.identities()`` lists them for the identity
graph and ``event.scene`` names the chat for ``last_seen`` (``QQ:<app>:group:<group_openid>``,
``QQ:<app>:c2c:<user_openid>``).

Guild-side ids (channels, guilds, guild users: ``AT_MESSAGE_CREATE``, ``MESSAGE_CREATE``,
``DIRECT_MESSAGE_CREATE``, their deletes, ``GUILD_MEMBER_*``) are not OpenIDs: the platform
gives every bot the same ones, and the old daemon stored them verbatim, so they become
:class:`~gensokyo_idmap.identity.RawId` (``raw:<id>``), which keeps the numbers migrated
from an old ``idmap.db``. Their scenes are ``QQ:<app>:channel:<channel_id>`` and
``QQ:<app>:dms:<dm guild_id>``.

Rejections raise :class:`~gensokyo_idmap.errors.BadInputError` naming the path of the field
(``d.group_openid``, ``d.author.member_openid``, ``d.attachments[0].url`` …). Fields the
reference marks UNCONFIRMED are read leniently: absent or ``null`` is fine, and a value of
the wrong kind is ignored rather than rejected where nothing depends on it (``mentions``).

Text no encoder takes (a lone surrogate, ``"\\ud83d"``, in any string of the frame, or
bytes that are not UTF-8) is repaired as the frame is read (U+FFFD,
:func:`gensokyo_idmap.jsonio.loads_repaired`), and :func:`parse_dispatch` logs it once per
event (``[qq] event text repaired``): a signed event that could be sent to no framework
would otherwise be refused or retried for ever, and hold up every event behind it. Webhook
and gateway both read frames here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias, TypeGuard

import structlog

from gensokyo_idmap import jsonio
from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.identity import (
    MAX_OPENID_LEN,
    IdentityKey,
    OpenId,
    RawId,
    UnionId,
    chat_scene,
    check_app_id,
)
from gensokyo_idmap.qq.mentions import mentioned_users
from gensokyo_idmap.recent_cache import RecentCache

__all__ = [
    "DISPATCH",
    "Attachment",
    "C2CMessage",
    "ChannelMessage",
    "DirectMessage",
    "Envelope",
    "FriendEvent",
    "GroupMemberEvent",
    "GroupMention",
    "GroupMessage",
    "GroupRobotEvent",
    "GuildMember",
    "GuildMemberEvent",
    "GuildMessageDelete",
    "Interaction",
    "QQEvent",
    "Ready",
    "Resumed",
    "UnknownEvent",
    "parse_dispatch",
    "parse_envelope",
]

log = structlog.get_logger("gensokyo_idmap.qq.events")

#: The op code of a dispatch frame (an event).
DISPATCH: Final = 0

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
_UINT_TEXT = re.compile(r"[0-9]{1,19}")

_GROUP_MESSAGE_TYPES: Final = frozenset({"GROUP_AT_MESSAGE_CREATE", "GROUP_MESSAGE_CREATE"})
_GROUP_ROBOT_TYPES: Final = frozenset(
    {"GROUP_ADD_ROBOT", "GROUP_DEL_ROBOT", "GROUP_MSG_REJECT", "GROUP_MSG_RECEIVE"}
)
_GROUP_MEMBER_TYPES: Final = frozenset({"GROUP_MEMBER_ADD", "GROUP_MEMBER_REMOVE"})
_FRIEND_TYPES: Final = frozenset({"FRIEND_ADD", "FRIEND_DEL", "C2C_MSG_REJECT", "C2C_MSG_RECEIVE"})
#: Channel (guild) messages: public bots get the @bot ones (intent 1<<30), private bots
#: every one (1<<9).
_CHANNEL_MESSAGE_TYPES: Final = frozenset({"AT_MESSAGE_CREATE", "MESSAGE_CREATE"})
_DELETE_TYPES: Final = frozenset({"PUBLIC_MESSAGE_DELETE", "MESSAGE_DELETE",
                                  "DIRECT_MESSAGE_DELETE"})
_GUILD_MEMBER_TYPES: Final = frozenset({"GUILD_MEMBER_ADD", "GUILD_MEMBER_REMOVE"})
#: Event types with a model of their own (``RESUMED`` has no body worth reading).
_MODELLED_TYPES: Final = (
    _GROUP_MESSAGE_TYPES | _GROUP_ROBOT_TYPES | _GROUP_MEMBER_TYPES | _FRIEND_TYPES
    | _CHANNEL_MESSAGE_TYPES | _DELETE_TYPES | _GUILD_MEMBER_TYPES
    | {"C2C_MESSAGE_CREATE", "DIRECT_MESSAGE_CREATE", "INTERACTION_CREATE", "READY"}
)


# --------------------------------------------------------------------------- envelope


@dataclass(frozen=True, slots=True)
class Envelope:
    """One frame: ``op`` always; ``s`` (seq), ``t`` (event type), ``id`` (event id) on
    dispatches; ``d`` whatever the op carries (kept as decoded); ``repaired``: how many of
    its strings held a lone surrogate, now U+FFFD."""

    op: int
    d: Any = None
    s: int | None = None
    t: str | None = None
    id: str | None = None
    repaired: int = 0


def parse_envelope(raw: bytes | bytearray | str | Mapping[str, Any]) -> Envelope:
    """Read one frame. Bad JSON or a non-object → ``frame``; a missing or non-integer ``op``
    → ``op``; ``s`` / ``t`` / ``id`` of the wrong kind → that field."""
    repaired = 0
    if isinstance(raw, bytes | bytearray | str):
        try:
            obj, repaired = jsonio.loads_repaired(raw)
        except (ValueError, RecursionError) as err:
            # ValueError covers JSONDecodeError, UnicodeDecodeError and over-long integers.
            raise BadInputError("frame", _preview(raw), f"not valid JSON ({err})") from None
    else:
        obj = raw
    if not _is_object(obj):
        raise BadInputError("frame", obj, "a frame must be a JSON object")
    if "op" not in obj:
        raise BadInputError("op", None, "missing")
    op = obj["op"]
    if not _is_int(op):
        raise BadInputError("op", op, "must be an integer")
    s = obj.get("s")
    if s is not None and not _is_int(s):
        raise BadInputError("s", s, "seq must be an integer or null")
    t = obj.get("t")
    if t is not None and not isinstance(t, str):
        raise BadInputError("t", t, "event type must be text or null")
    event_id = obj.get("id")
    if event_id is not None and not isinstance(event_id, str):
        raise BadInputError("id", event_id, "event id must be text or null")
    return Envelope(op=op, d=obj.get("d"), s=s, t=t, id=event_id, repaired=repaired)


def _preview(raw: bytes | bytearray | str) -> str:
    text = raw if isinstance(raw, str) else bytes(raw[:300]).decode("utf-8", "replace")
    return text[:200]


# --------------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file sent with a message. ``url`` always has a scheme (``https://`` is prepended
    when the platform left it out); the ints are ``None`` when not given."""

    content_type: str
    url: str
    filename: str | None = None
    size: int | None = None
    width: int | None = None
    height: int | None = None


def _group_scene(group: OpenId) -> str:
    return chat_scene(group.app_id, "group", group.openid, group.platform)


def _c2c_scene(user: OpenId) -> str:
    return chat_scene(user.app_id, "c2c", user.openid, user.platform)


def channel_scene(app_id: str, channel: RawId) -> str:
    """The ``last_seen`` scene of a guild channel (``QQ:<app>:channel:<channel_id>``)."""
    return chat_scene(app_id, "channel", channel.value)


def dms_scene(app_id: str, dm_guild: RawId) -> str:
    """The scene of a guild direct-message session, named by its own guild id (the one
    ``/dms/{guild_id}/messages`` takes): ``QQ:<app>:dms:<guild_id>``."""
    return chat_scene(app_id, "dms", dm_guild.value)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Event:
    """What every dispatch has: ``t``, the envelope ``id`` (event id) and ``s`` (seq)."""

    event_type: str
    event_id: str | None = None
    seq: int | None = None

    def identities(self) -> tuple[IdentityKey, ...]:
        """The typed identity keys this event carries, for the identity graph."""
        return ()

    @property
    def scene(self) -> str | None:
        """The chat this event happened in, for ``last_seen``; ``None`` when there is none."""
        return None


@dataclass(frozen=True, slots=True)
class GroupMention:
    """A group member a group message @-mentions: a ``mentions[]`` entry of
    ``scope: single`` (``member`` its ``member_openid``, else its ``id``; ``is_you``: the
    bot itself), or a member the content's markup names that no entry lists. ``markup_id``
    is the id the content's markup names them by (the entry's ``id``)."""

    member: OpenId
    markup_id: str
    is_you: bool = False
    bot: bool = False
    username: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMessage(_Event):
    """``GROUP_AT_MESSAGE_CREATE`` or ``GROUP_MESSAGE_CREATE``. ``mentions``: the members
    it @-mentions (:class:`GroupMention`), ``mentions_everyone``: it @-mentions everyone
    (a ``scope: all`` entry)."""

    message_id: str
    group: OpenId
    author: OpenId
    author_union: UnionId | None = None
    content: str = ""
    timestamp: str = ""
    attachments: tuple[Attachment, ...] = ()
    mentioned_bot: bool = False
    #: The message's ``msg_idx`` (what a quote of it names) and that of the message it
    #: quotes, if any (:func:`_msg_idx`, :func:`_quoted_idx`).
    msg_idx: str | None = None
    quoted_idx: str | None = None
    #: ``author.username`` and ``author.member_role`` (``member`` / ``admin`` / ``owner``)
    #: where the platform sends them (:func:`_lenient_name`, :func:`_member_role`).
    author_name: str = ""
    author_role: str | None = None
    mentions: tuple[GroupMention, ...] = ()
    mentions_everyone: bool = False

    def identities(self) -> tuple[IdentityKey, ...]:
        keys: tuple[IdentityKey, ...] = (self.group, self.author)
        if self.author_union is not None:
            keys = (*keys, self.author_union)
        return (*keys, *self.mentioned_members())

    def mentioned_members(self) -> tuple[OpenId, ...]:
        """The members it mentions other than the bot and the author, each once."""
        return tuple(dict.fromkeys(m.member for m in self.mentions
                                   if not m.is_you and m.member != self.author))

    @property
    def scene(self) -> str:
        return _group_scene(self.group)


@dataclass(frozen=True, slots=True, kw_only=True)
class C2CMessage(_Event):
    """``C2C_MESSAGE_CREATE``: a private message to the bot."""

    message_id: str
    user: OpenId
    author_union: UnionId | None = None
    content: str = ""
    timestamp: str = ""
    attachments: tuple[Attachment, ...] = ()
    msg_idx: str | None = None  # as GroupMessage's
    quoted_idx: str | None = None
    author_name: str = ""  # ``author.username``, where the platform sends it

    def identities(self) -> tuple[IdentityKey, ...]:
        return (self.user,) if self.author_union is None else (self.user, self.author_union)

    @property
    def scene(self) -> str:
        return _c2c_scene(self.user)


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupRobotEvent(_Event):
    """``GROUP_ADD_ROBOT`` / ``GROUP_DEL_ROBOT`` / ``GROUP_MSG_REJECT`` / ``GROUP_MSG_RECEIVE``;
    ``timestamp`` in unix seconds."""

    group: OpenId
    operator: OpenId
    timestamp: int | None = None

    def identities(self) -> tuple[IdentityKey, ...]:
        return (self.group, self.operator)

    @property
    def scene(self) -> str:
        return _group_scene(self.group)


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMemberEvent(_Event):
    """``GROUP_MEMBER_ADD`` / ``GROUP_MEMBER_REMOVE`` (not in the documentation; read leniently
    when sent)."""

    group: OpenId
    member: OpenId
    operator: OpenId | None = None
    timestamp: int | None = None

    def identities(self) -> tuple[IdentityKey, ...]:
        keys: tuple[IdentityKey, ...] = (self.group, self.member)
        return keys if self.operator is None else (*keys, self.operator)

    @property
    def scene(self) -> str:
        return _group_scene(self.group)


@dataclass(frozen=True, slots=True, kw_only=True)
class FriendEvent(_Event):
    """``FRIEND_ADD`` / ``FRIEND_DEL`` / ``C2C_MSG_REJECT`` / ``C2C_MSG_RECEIVE``."""

    user: OpenId
    timestamp: int | None = None

    def identities(self) -> tuple[IdentityKey, ...]:
        return (self.user,)

    @property
    def scene(self) -> str:
        return _c2c_scene(self.user)


@dataclass(frozen=True, slots=True, kw_only=True)
class Interaction(_Event):
    """``INTERACTION_CREATE`` (a button or C2C quick menu); acknowledged by
    ``interaction_id``. ``scene_type`` is the wire ``d.scene`` (``c2c|group|guild``), named
    so as not to clash with :attr:`scene`."""

    interaction_id: str
    interaction_type: int | None = None
    scene_type: str | None = None
    chat_type: int | None = None
    group: OpenId | None = None
    group_member: OpenId | None = None
    user: OpenId | None = None
    button_data: str | None = None
    button_id: str | None = None
    timestamp: str = ""

    def identities(self) -> tuple[IdentityKey, ...]:
        return tuple(key for key in (self.group, self.group_member, self.user) if key is not None)

    @property
    def scene(self) -> str | None:
        if self.group is not None:
            return _group_scene(self.group)
        if self.user is not None:
            return _c2c_scene(self.user)
        return None


@dataclass(frozen=True, slots=True)
class GuildMember:
    """A guild user as a channel event names them: ``id`` is the platform's guild user id
    (not an OpenID: the same for every bot), kept as a ``raw:`` key like the old daemon."""

    user: RawId
    username: str = ""
    nick: str = ""
    avatar: str = ""
    bot: bool = False
    #: ``member.roles``: the guild role ids the platform names (:func:`_guild_roles`)
    roles: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelMessage(_Event):
    """``AT_MESSAGE_CREATE`` (public guilds) / ``MESSAGE_CREATE`` (private bots): a message
    in a guild's text channel. ``mentions`` are the users ``<@!id>`` in the content names
    (the bot among them when it was @-mentioned): ``mentions[]``, and the users the
    content's markup names that it does not list; ``mentions_everyone``: the message
    @-mentions everyone (``mention_everyone``). ``app_id``: the serving AppID, for the
    scene (channel ids are the same for every bot, scenes are per AppID)."""

    app_id: str
    message_id: str
    channel: RawId
    guild: RawId
    author: GuildMember
    content: str = ""
    timestamp: str = ""
    attachments: tuple[Attachment, ...] = ()
    mentions: tuple[GuildMember, ...] = ()
    mentions_everyone: bool = False
    #: The id of the message this one quotes (``message_reference.message_id``), if any
    #: (:func:`_referenced_id`).
    quoted_id: str | None = None

    def identities(self) -> tuple[IdentityKey, ...]:
        return (self.channel, self.author.user,
                *dict.fromkeys(m.user for m in self.mentions
                               if not m.bot and m.user != self.author.user))

    @property
    def scene(self) -> str:
        return channel_scene(self.app_id, self.channel)


@dataclass(frozen=True, slots=True, kw_only=True)
class DirectMessage(_Event):
    """``DIRECT_MESSAGE_CREATE``: a guild user's direct message to the bot. ``dm_guild`` is
    the session's own guild id (where replies go: ``/dms/{guild_id}/messages``),
    ``channel`` its channel, ``source_guild`` the guild it was started from."""

    app_id: str
    message_id: str
    dm_guild: RawId
    channel: RawId
    author: GuildMember
    source_guild: str | None = None
    content: str = ""
    timestamp: str = ""
    attachments: tuple[Attachment, ...] = ()
    quoted_id: str | None = None  # as ChannelMessage's

    def identities(self) -> tuple[IdentityKey, ...]:
        return (self.author.user,)

    @property
    def scene(self) -> str:
        return dms_scene(self.app_id, self.dm_guild)


@dataclass(frozen=True, slots=True, kw_only=True)
class GuildMessageDelete(_Event):
    """``PUBLIC_MESSAGE_DELETE`` / ``MESSAGE_DELETE`` / ``DIRECT_MESSAGE_DELETE``: a message
    was recalled; ``operator`` who did it (the author, or an admin). ``deleted_id`` is the
    recalled message's id (not ``message_id``: this event is no message, and de-duplication
    must not take it for the message it names)."""

    app_id: str
    deleted_id: str
    channel: RawId
    guild: RawId
    author: RawId
    operator: RawId | None = None
    direct: bool = False

    def identities(self) -> tuple[IdentityKey, ...]:
        keys: tuple[IdentityKey, ...] = (self.author,) if self.direct else (
            self.channel, self.author)
        return keys if self.operator is None or self.operator == self.author else (
            *keys, self.operator)

    @property
    def scene(self) -> str:
        if self.direct:
            return dms_scene(self.app_id, self.guild)
        return channel_scene(self.app_id, self.channel)


@dataclass(frozen=True, slots=True, kw_only=True)
class GuildMemberEvent(_Event):
    """``GUILD_MEMBER_ADD`` / ``GUILD_MEMBER_REMOVE`` (intent 1<<1); ``operator`` is
    ``op_user_id`` (who added or removed them; the member themselves when they left)."""

    app_id: str
    guild: RawId
    member: GuildMember
    operator: RawId | None = None
    joined_at: str = ""

    def identities(self) -> tuple[IdentityKey, ...]:
        keys: tuple[IdentityKey, ...] = (self.guild, self.member.user)
        return keys if self.operator is None or self.operator == self.member.user else (
            *keys, self.operator)

    @property
    def scene(self) -> str:
        return chat_scene(self.app_id, "guild", self.guild.value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Ready(_Event):
    """``READY``: the gateway session is open; ``session_id`` is what a Resume needs."""

    session_id: str
    user_id: str | None = None
    username: str | None = None
    shard: tuple[int, ...] | None = None
    version: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Resumed(_Event):
    """``RESUMED``: the replay after a Resume is complete."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UnknownEvent(_Event):
    """Any other event type, with its ``d`` as decoded (logged and counted upstream)."""

    d: Any = None


QQEvent: TypeAlias = (
    GroupMessage | C2CMessage | GroupRobotEvent | GroupMemberEvent | FriendEvent
    | Interaction | ChannelMessage | DirectMessage | GuildMessageDelete | GuildMemberEvent
    | Ready | Resumed | UnknownEvent
)


# --------------------------------------------------------------------------- field readers


def _is_object(value: object) -> TypeGuard[Mapping[str, Any]]:
    """A JSON object: a dict as parsed, or any mapping handed in (a plain type check first:
    the ABC check costs several times more, and runs several times per event)."""
    return type(value) is dict or isinstance(value, Mapping)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _absent(value: object) -> bool:
    return value is None or value == ""


def _object(parent: Mapping[str, Any], key: str, path: str, *, required: bool) -> Mapping[str, Any]:
    value = parent.get(key)
    if value is None:
        if required:
            raise BadInputError(path, None, "missing")
        return {}
    if not _is_object(value):
        raise BadInputError(path, value, "must be an object")
    return value


def _text(parent: Mapping[str, Any], key: str, path: str) -> str | None:
    """Optional text: absent or null → ``None``; anything but text → rejected."""
    value = parent.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadInputError(path, value, "must be text")
    return value


def _required_text(parent: Mapping[str, Any], key: str, path: str) -> str:
    value = _text(parent, key, path)
    if not value:
        raise BadInputError(path, value, "missing")
    return value


def _int(parent: Mapping[str, Any], key: str, path: str) -> int | None:
    """Optional non-negative integer, given as a number or as decimal text."""
    value = parent.get(key)
    if value is None or value == "":
        return None
    integral = (_is_int(value)
                or (isinstance(value, float) and value.is_integer())
                or (isinstance(value, str) and _UINT_TEXT.fullmatch(value) is not None))
    if not integral:
        raise BadInputError(path, value, "must be a non-negative integer or decimal text")
    number = int(value)
    if number < 0:
        raise BadInputError(path, value, "must not be negative")
    return number


def _text_timestamp(parent: Mapping[str, Any], key: str, path: str) -> str:
    """A message timestamp (RFC 3339 text) kept as given; a number becomes its text."""
    value = parent.get(key)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if _is_int(value):
        return str(value)
    raise BadInputError(path, value, "must be text (RFC 3339) or a number")


#: OpenID text → the checked OpenId. The same people and groups come back event after
#: event, and checking an OpenID (three patterns) was a tenth of parsing an event. OpenIds
#: are immutable, so sharing one is safe; people not seen lately are forgotten. Keyed by
#: the text alone (its AppID checked on a hit): a (AppID, text) pair per entry cost 56
#: bytes a person, and the same text under two AppIDs only takes turns in the entry.
_OPENIDS: Final[RecentCache[str, OpenId]] = RecentCache(65_536)


def _openid(app_id: str, value: object, path: str) -> OpenId:
    if not isinstance(value, str):
        raise BadInputError(path, value, "OpenID must be text")
    cached = _OPENIDS.young.get(value) or _OPENIDS.get(value)
    if cached is not None and cached.app_id == app_id:
        return cached
    if len(value) > MAX_OPENID_LEN:
        raise BadInputError(path, value, f"OpenID is longer than {MAX_OPENID_LEN} characters")
    try:
        openid = OpenId(app_id=app_id, openid=value)
    except BadInputError as err:
        raise BadInputError(path, value, err.reason) from None
    _OPENIDS.put(value, openid)
    return openid


def _pick_openid(
    app_id: str, parent: Mapping[str, Any], keys: tuple[str, ...], prefix: str
) -> OpenId | None:
    """The first of ``keys`` present (not absent, null or empty) as an OpenID."""
    for key in keys:
        value = parent.get(key)
        if not _absent(value):
            return _openid(app_id, value, prefix + key)
    return None


def _require_openid(
    app_id: str, parent: Mapping[str, Any], keys: tuple[str, ...], prefix: str
) -> OpenId:
    found = _pick_openid(app_id, parent, keys, prefix)
    if found is None:
        others = ", ".join(prefix + key for key in keys[1:])
        reason = f"missing (and no {others} either)" if others else "missing"
        raise BadInputError(prefix + keys[0], None, reason)
    return found


def _union(parent: Mapping[str, Any], key: str, path: str) -> UnionId | None:
    value = parent.get(key)
    if _absent(value):
        return None
    if not isinstance(value, str):
        raise BadInputError(path, value, "union OpenID must be text")
    if len(value) > MAX_OPENID_LEN:
        raise BadInputError(path, value, f"union OpenID is longer than {MAX_OPENID_LEN} characters")
    try:
        return UnionId(value)
    except BadInputError as err:
        raise BadInputError(path, value, err.reason) from None


def _url(value: str) -> str:
    if _SCHEME.match(value):
        return value
    if value.startswith("//"):
        return "https:" + value
    return "https://" + value


def _attachments(d: Mapping[str, Any]) -> tuple[Attachment, ...]:
    items = d.get("attachments")
    if items is None:
        return ()
    if not isinstance(items, list):
        raise BadInputError("d.attachments", items, "must be a list")
    result = []
    for index, item in enumerate(items):
        path = f"d.attachments[{index}]"
        if not _is_object(item):
            raise BadInputError(path, item, "must be an object")
        result.append(Attachment(
            content_type=_text(item, "content_type", f"{path}.content_type") or "",
            url=_url(_required_text(item, "url", f"{path}.url")),
            filename=_text(item, "filename", f"{path}.filename"),
            size=_int(item, "size", f"{path}.size"),
            width=_int(item, "width", f"{path}.width"),
            height=_int(item, "height", f"{path}.height"),
        ))
    return tuple(result)


def _group_mentions(d: Mapping[str, Any], app_id: str,
                    content: str) -> tuple[tuple[GroupMention, ...], bool]:
    """The members a group message mentions, and whether it mentions everyone.

    ``mentions[]`` (UNCONFIRMED shape, read leniently: an entry that is not an object, or
    names no valid OpenID, is no mention) lists ``{"scope": "single", "id",
    "member_openid", "username", "bot", "is_you"}`` per member and ``{"scope": "all",
    "is_you": true, "username"}`` for everyone; ``is_you`` of a ``single`` entry is the
    bot. A member the content's markup names (``<@id>``, ``<qqbot-at-user id>``) that no
    entry lists is mentioned too: ids there are the members' OpenIDs."""
    found: list[GroupMention] = []
    everyone = False
    entries = d.get("mentions")
    for entry in entries if isinstance(entries, list) else ():
        if not _is_object(entry):
            continue
        if entry.get("scope") == "all":
            everyone = True
            continue
        ids = [value for value in (entry.get("member_openid"), entry.get("id"))
               if isinstance(value, str) and value]
        member = _lenient_openid(app_id, ids[0]) if ids else None
        if member is None:
            continue
        username = entry.get("username")
        found.append(GroupMention(member, ids[-1], is_you=entry.get("is_you") is True,
                                  bot=entry.get("bot") is True,
                                  username=username if isinstance(username, str) else ""))
    listed = {m.markup_id for m in found} | {m.member.openid for m in found}
    for user in mentioned_users(content):
        member = None if user in listed else _lenient_openid(app_id, user)
        if member is not None:
            found.append(GroupMention(member, user))
    return tuple(found), everyone


def _lenient_openid(app_id: str, value: str) -> OpenId | None:
    """``value`` as an OpenID of ``app_id``, or None when it is not one."""
    try:
        return _openid(app_id, value, "d.mentions")
    except BadInputError:
        return None


#: ``message_type`` of a message that quotes another (``msg_elements[0]`` is the quoted one).
QUOTE_MESSAGE_TYPE: Final = 103


def _scene_ext(d: Mapping[str, Any], name: str) -> str | None:
    """The value of ``<name>=<value>`` among ``d.message_scene.ext`` (UNCONFIRMED: read
    leniently, anything unexpected is no value)."""
    scene = d.get("message_scene")
    ext = scene.get("ext") if _is_object(scene) else None
    if not isinstance(ext, list):
        return None
    prefix = name + "="
    for item in ext:
        if isinstance(item, str) and item.startswith(prefix) and len(item) > len(prefix):
            return item[len(prefix):]
    return None


def _msg_idx(d: Mapping[str, Any]) -> str | None:
    """A group or C2C message's own ``msg_idx`` (``d.msg_idx``, else ``msg_idx=`` in
    ``message_scene.ext``): the name a later quote of it gives. Lenient (UNCONFIRMED)."""
    value = d.get("msg_idx")
    return value if isinstance(value, str) and value else _scene_ext(d, "msg_idx")


def _quoted_idx(d: Mapping[str, Any]) -> str | None:
    """The ``msg_idx`` of the message this one quotes: ``message_type`` 103 with the quoted
    message as ``msg_elements[0]`` (else ``ref_msg_idx=`` in ``message_scene.ext``); None
    for a message that quotes nothing. Lenient (UNCONFIRMED): a quote whose shape is not
    this is no quote, and the message itself still goes out."""
    if d.get("message_type") != QUOTE_MESSAGE_TYPE:
        return None
    elements = d.get("msg_elements")
    if isinstance(elements, list) and elements and _is_object(elements[0]):
        value = elements[0].get("msg_idx")
        if isinstance(value, str) and value:
            return value
    return _scene_ext(d, "ref_msg_idx")


def _referenced_id(d: Mapping[str, Any]) -> str | None:
    """The id of the message a channel or guild DM message quotes: ``d.message_reference``
    is ``{"message_id": ...}`` (botgo's ``dto.Message.MessageReference``). Lenient: a
    reference of another shape is no quote, and the message itself still goes out."""
    reference = d.get("message_reference")
    value = reference.get("message_id") if _is_object(reference) else None
    return value if isinstance(value, str) and value else None


def _raw(value: object, path: str) -> RawId:
    """A channel-side id (channel, guild, guild user): text or a number, kept as ``raw:``."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        value = str(value)
    if not isinstance(value, str) or not value:
        raise BadInputError(path, value, "must be a non-empty id")
    try:
        return RawId(value)
    except BadInputError as err:
        raise BadInputError(path, value, err.reason) from None


def _guild_user(user: Mapping[str, Any], path: str,
                member: Mapping[str, Any] | None = None) -> GuildMember:
    nick = _text(member, "nick", path + ".member.nick") if member is not None else None
    return GuildMember(
        user=_raw(user.get("id"), path + ".id"),
        username=_text(user, "username", path + ".username") or "",
        nick=nick or "",
        avatar=_text(user, "avatar", path + ".avatar") or "",
        bot=user.get("bot") is True,
        roles=_guild_roles(member),
    )


def _guild_roles(member: Mapping[str, Any] | None) -> tuple[str, ...]:
    """``member.roles``: the member's guild role ids, as text. Lenient: anything that is not
    a list counts as no roles, and an entry that is neither text nor a number is skipped
    (a role only ever grants a OneBot role, so what cannot be read grants none)."""
    roles = member.get("roles") if member is not None else None
    if not isinstance(roles, list):
        return ()
    return tuple(str(role) for role in roles
                 if (isinstance(role, str) and role) or _is_int(role))


#: ``author.member_role`` values of a group message (the platform's own words).
_MEMBER_ROLES: Final = frozenset({"member", "admin", "owner"})


def _member_role(author: Mapping[str, Any]) -> str | None:
    """``author.member_role`` of a group message when it is one the platform documents
    (``member`` / ``admin`` / ``owner``), else None: lenient, an unknown value grants
    nothing."""
    value = author.get("member_role")
    return value if isinstance(value, str) and value in _MEMBER_ROLES else None


def _lenient_name(author: Mapping[str, Any]) -> str:
    """``author.username`` of a group or C2C message: text, else empty (UNCONFIRMED shape:
    a name is shown, never relied on)."""
    value = author.get("username")
    return value if isinstance(value, str) else ""


def _guild_mentions(d: Mapping[str, Any], content: str) -> tuple[GuildMember, ...]:
    """``mentions[]`` (users): entries that are not objects with an id are skipped; then
    the users the content's markup names (``<@!id>``) that no entry lists, by their id
    alone (one that is no valid id is left out: its markup stays text)."""
    mentions = d.get("mentions")
    found = []
    for index, item in enumerate(mentions if isinstance(mentions, list) else ()):
        if _is_object(item) and not _absent(item.get("id")):
            found.append(_guild_user(item, f"d.mentions[{index}]"))
    listed = {m.user.value for m in found}
    for user in mentioned_users(content):
        if user not in listed:
            try:
                found.append(GuildMember(_raw(user, "d.content")))
            except BadInputError:
                continue
    return tuple(found)


def _parse_guild(t: str, d: Mapping[str, Any], app_id: str,
                 common: dict[str, Any]) -> QQEvent:
    """The guild-side events (channels, their DMs, members): ids are ``raw:`` keys."""
    if t in _CHANNEL_MESSAGE_TYPES or t == "DIRECT_MESSAGE_CREATE":
        author = _guild_user(_object(d, "author", "d.author", required=True), "d.author",
                             _object(d, "member", "d.member", required=False))
        fields: dict[str, Any] = {
            "app_id": app_id, "message_id": _required_text(d, "id", "d.id"),
            "channel": _raw(d.get("channel_id"), "d.channel_id"), "author": author,
            "content": _text(d, "content", "d.content") or "",
            "timestamp": _text_timestamp(d, "timestamp", "d.timestamp"),
            "attachments": _attachments(d), "quoted_id": _referenced_id(d)}
        if t == "DIRECT_MESSAGE_CREATE":
            return DirectMessage(**common, **fields,
                                 dm_guild=_raw(d.get("guild_id"), "d.guild_id"),
                                 source_guild=_text(d, "src_guild_id", "d.src_guild_id"))
        return ChannelMessage(**common, **fields, guild=_raw(d.get("guild_id"), "d.guild_id"),
                              mentions=_guild_mentions(d, fields["content"]),
                              mentions_everyone=d.get("mention_everyone") is True)
    if t in _DELETE_TYPES:
        message = _object(d, "message", "d.message", required=True)
        deleted_by = _object(message, "author", "d.message.author", required=True)
        op_user = _object(d, "op_user", "d.op_user", required=False)
        return GuildMessageDelete(
            **common, app_id=app_id,
            deleted_id=_required_text(message, "id", "d.message.id"),
            channel=_raw(message.get("channel_id"), "d.message.channel_id"),
            guild=_raw(message.get("guild_id"), "d.message.guild_id"),
            author=_raw(deleted_by.get("id"), "d.message.author.id"),
            operator=None if _absent(op_user.get("id")) else _raw(op_user["id"],
                                                                   "d.op_user.id"),
            direct=t == "DIRECT_MESSAGE_DELETE" or message.get("direct_message") is True)
    # GUILD_MEMBER_ADD / GUILD_MEMBER_REMOVE
    return GuildMemberEvent(
        **common, app_id=app_id, guild=_raw(d.get("guild_id"), "d.guild_id"),
        member=_guild_user(_object(d, "user", "d.user", required=True), "d.user", d),
        operator=None if _absent(d.get("op_user_id")) else _raw(d["op_user_id"],
                                                               "d.op_user_id"),
        joined_at=_text_timestamp(d, "joined_at", "d.joined_at"))


# --------------------------------------------------------------------------- dispatch


def parse_dispatch(envelope: Envelope, app_id: str) -> QQEvent:
    """The event an op 0 envelope carries, with OpenIDs of the serving ``app_id``."""
    check_app_id(app_id)
    if envelope.op != DISPATCH:
        raise BadInputError("op", envelope.op, f"not a dispatch (op {DISPATCH})")
    t = envelope.t
    if not t:
        raise BadInputError("t", t, "a dispatch needs an event type")
    common: dict[str, Any] = {"event_type": t, "event_id": envelope.id, "seq": envelope.s}
    if envelope.repaired:
        log.warning("[qq] event text repaired", type=t, id=envelope.id, seq=envelope.s,
                    strings=envelope.repaired, reason="lone surrogate, now U+FFFD")
    d = envelope.d
    if t == "RESUMED":
        return Resumed(**common)
    if t not in _MODELLED_TYPES:
        return UnknownEvent(**common, d=d)
    if not _is_object(d):
        raise BadInputError("d", d, f"the body of {t} must be an object")

    if t in _CHANNEL_MESSAGE_TYPES or t in _DELETE_TYPES or t in _GUILD_MEMBER_TYPES or (
            t == "DIRECT_MESSAGE_CREATE"):
        return _parse_guild(t, d, app_id, common)
    if t in _GROUP_MESSAGE_TYPES:
        author = _object(d, "author", "d.author", required=True)
        content = _text(d, "content", "d.content") or ""
        mentions, everyone = _group_mentions(d, app_id, content)
        return GroupMessage(
            **common,
            message_id=_required_text(d, "id", "d.id"),
            group=_require_openid(app_id, d, ("group_openid", "group_id"), "d."),
            author=_require_openid(app_id, author, ("member_openid", "id"), "d.author."),
            author_union=_union(author, "union_openid", "d.author.union_openid"),
            content=content,
            timestamp=_text_timestamp(d, "timestamp", "d.timestamp"),
            attachments=_attachments(d),
            mentioned_bot=t == "GROUP_AT_MESSAGE_CREATE" or any(m.is_you for m in mentions),
            msg_idx=_msg_idx(d),
            quoted_idx=_quoted_idx(d),
            author_name=_lenient_name(author),
            author_role=_member_role(author),
            mentions=mentions,
            mentions_everyone=everyone,
        )
    if t == "C2C_MESSAGE_CREATE":
        author = _object(d, "author", "d.author", required=True)
        return C2CMessage(
            **common,
            message_id=_required_text(d, "id", "d.id"),
            user=_require_openid(app_id, author, ("user_openid", "id"), "d.author."),
            author_union=_union(author, "union_openid", "d.author.union_openid"),
            content=_text(d, "content", "d.content") or "",
            timestamp=_text_timestamp(d, "timestamp", "d.timestamp"),
            attachments=_attachments(d),
            msg_idx=_msg_idx(d),
            quoted_idx=_quoted_idx(d),
            author_name=_lenient_name(author),
        )
    if t in _GROUP_ROBOT_TYPES:
        return GroupRobotEvent(
            **common,
            group=_require_openid(app_id, d, ("group_openid",), "d."),
            operator=_require_openid(app_id, d, ("op_member_openid",), "d."),
            timestamp=_int(d, "timestamp", "d.timestamp"),
        )
    if t in _GROUP_MEMBER_TYPES:
        return GroupMemberEvent(
            **common,
            group=_require_openid(app_id, d, ("group_openid", "group_id"), "d."),
            member=_require_openid(app_id, d, ("member_openid", "user_openid"), "d."),
            operator=_pick_openid(app_id, d, ("op_member_openid",), "d."),
            timestamp=_int(d, "timestamp", "d.timestamp"),
        )
    if t in _FRIEND_TYPES:
        return FriendEvent(
            **common,
            user=_require_openid(app_id, d, ("openid",), "d."),
            timestamp=_int(d, "timestamp", "d.timestamp"),
        )
    if t == "INTERACTION_CREATE":
        data = _object(d, "data", "d.data", required=False)
        resolved = _object(data, "resolved", "d.data.resolved", required=False)
        return Interaction(
            **common,
            interaction_id=_required_text(d, "id", "d.id"),
            interaction_type=_int(d, "type", "d.type"),
            scene_type=_text(d, "scene", "d.scene"),
            chat_type=_int(d, "chat_type", "d.chat_type"),
            group=_pick_openid(app_id, d, ("group_openid",), "d."),
            group_member=_pick_openid(app_id, d, ("group_member_openid",), "d."),
            user=_pick_openid(app_id, d, ("user_openid",), "d."),
            button_data=_text(resolved, "button_data", "d.data.resolved.button_data"),
            button_id=_text(resolved, "button_id", "d.data.resolved.button_id"),
            timestamp=_text_timestamp(d, "timestamp", "d.timestamp"),
        )
    # READY
    user = _object(d, "user", "d.user", required=False)
    return Ready(
        **common,
        session_id=_required_text(d, "session_id", "d.session_id"),
        user_id=_text(user, "id", "d.user.id"),
        username=_text(user, "username", "d.user.username"),
        shard=_shard(d),
        version=_int(d, "version", "d.version"),
    )


def _shard(d: Mapping[str, Any]) -> tuple[int, ...] | None:
    value = d.get("shard")
    if value is None:
        return None
    if not isinstance(value, list) or not all(_is_int(n) and n >= 0 for n in value):
        raise BadInputError("d.shard", value, "must be a list of non-negative integers")
    return tuple(value)
