"""Outbound bridge: a OneBot send names a vUIN → one OpenID → a passive reply on the platform.

Rules:

1. **One identity leaves** (docs/identities.md, reverse path): an explicit OpenID /
   ``rUIN-…`` in the request wins; else the identity last seen in the chat the send belongs
   to (the chat of the message a ``reply`` answers; for an ``at``, the group it is sent
   to); else the identity of this AppID that spoke last in this kind of chat (by its
   latest event, idmap rule 7); else any OpenID of this AppID in the set; else a
   :class:`NoUsableIdentityError` naming the vUIN. A number that is no known vUIN, or text
   that is neither a known identity nor a well-formed OpenID (32 hex digits), is refused
   naming the parameter: nothing is sent.
   A rebound vUIN's alias resolves to the new vUIN first.
2. **Always a passive reply** (:mod:`gensokyo_idmap.runtime.replies`): a ``reply`` segment's
   message, else the newest received message of the chat still in its window with replies
   left, else the newest non-message event of the chat; with no usable id the platform
   answers, and its refusal is the action's failure. A ``reply`` naming what cannot be
   answered (an id the map no longer holds, one of the bot's own messages, a message of
   another chat) does not stop the send: it goes without the quote, chosen as if there
   were none, and a warning names the id and why.
3. **What was sent is remembered**: each platform message id goes into the msgid map
   (direction out, the bot's ``self_id`` its author, the OneBot message as asked its
   content, for ``get_msg``) and the first one's virtual id is the action's ``message_id``.
4. **A server's answer is never awaited on the event loop**: with the graph on PostgreSQL
   or the message ids on Redis (``reads_off_loop``), the choice of identity (its recency
   reads), of the message to reply to and of its ``msg_seq``, and the plan of a message
   with an ``at`` (its mention reads the graph) run on a worker thread, so a slow or hung
   server holds up this send, not every other event of the daemon. What needs no such
   read stays on the loop: a message without an ``at``, and a target or a mentioned member
   whose answer is kept while the graph's version stands (LMDB graph, Redis message ids).
   On LMDB all of it stays on the loop: a read there is a few microseconds, less than a
   thread hop.
5. **Guild-side chats** (docs/wire-mapping.md): a ``group_id`` whose vUIN holds no OpenID
   of this AppID but the ``raw:`` id of a channel (one the legacy config table places in a
   guild, as the old daemon kept it) is that channel (``/channels/{id}/messages``); a
   ``user_id`` that is a guild user goes to the DM session they opened
   (``/dms/{guild_id}/messages``, from the same table). Any other ``raw:`` id is no chat:
   the send fails as rule 1 says. Channels take images by URL in the message itself.
   A ``reply`` segment naming a message of that channel or DM (one the bot received or
   sent there) also shows it quoted: the first platform message carries
   ``message_reference`` beside its ``msg_id``; one of the bot's own is shown so, with no
   warning, while the ``msg_id`` answers what rule 2 picks.
6. **A refused send can be told to its chat** (``onebot.send_error``, the Go daemon's
   ``send_error``): when the platform refuses a send (after its retries), one text message
   ``send failed: platform code …: …`` goes to the same chat, a passive reply like any other,
   so users see an answer instead of silence; the action fails all the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, TypeVar

import structlog

from gensokyo_idmap.bridge.chat import (
    CHAT_KINDS,
    GROUP_CHAT_KINDS,
    GUILD_CHAT_KINDS,
    Chat,
    ChatKind,
)
from gensokyo_idmap.bridge.guilds import directory_of
from gensokyo_idmap.bridge.plan import MessagePlan, UnsupportedSegments, plan_message
from gensokyo_idmap.errors import (
    BadInputError,
    IdmapError,
    NotFoundError,
    NoUsableIdentityError,
    PlatformError,
)
from gensokyo_idmap.identity import (
    IdentityKey,
    OpenId,
    RawId,
    RUin,
    VUin,
    is_platform_openid,
    parse_client_input,
)
from gensokyo_idmap.idmap import IdentityGraph, Recency, Usable, openid_of_app
from gensokyo_idmap.onebot.message import Segment, segments_to_cq_within
from gensokyo_idmap.qq.mentions import guild_user_mention, member_mention
from gensokyo_idmap.qq.outgoing import channel_message_body, check_channel_parts, message_body
from gensokyo_idmap.recency import chat_recency
from gensokyo_idmap.recent_cache import RecentCache
from gensokyo_idmap.runtime.msgid import MAX_CONTENT_BYTES, MessageIds, MsgContext, check_virtual_id
from gensokyo_idmap.runtime.replies import ReplyBudget, ReplyTo
from gensokyo_idmap.tables import Named

__all__ = ["OutboundSender", "OutboundSettings", "PlatformClient", "Target",
           "failure_detail"]

log = structlog.get_logger("gensokyo_idmap.outbound")

T = TypeVar("T")
UserIdType = Literal["vuin", "raw", "ruin"]
_SEND_ATTEMPTS: Final = 4
_DUPLICATE_SEQ: Final = 40054005
#: A guild-side id (channel, guild user): what a channel or guild DM send can use.
GUILD_ID: Final = Usable("a guild-side id (raw:)", lambda key: isinstance(key, RawId))
#: Chats whose Chat and send context are kept made, and resolved targets kept (each a
#: :class:`~gensokyo_idmap.recent_cache.RecentCache`: from their first send until no send
#: used them for two to four minutes; a bot sends only to chats that spoke to it, so no
#: flood of one-off chats reaches them).
_CHATS_REMEMBERED: Final = 10_000
#: Platform codes saying "this msg_id / event_id / msg_seq cannot be used (any more)".
_SPENT_CODES: Final = frozenset({
    22009,  # reply limit of this msg_id reached
    _DUPLICATE_SEQ,  # msg_id + msg_seq used before (e.g. by us before a restart)
    304027, 40034005,  # reply msg expired / msg_id expired
    40034025,  # invalid event_id
})


def failure_detail(err: PlatformError) -> str:
    """What a platform refusal says: its code and message when it answered, else ours."""
    if err.platform_code is not None or err.platform_message:
        return f"platform code {err.platform_code}: {err.platform_message}"
    return err.message


class _NotKnownHere(Exception):
    """A mention that needs a read that may wait for a server (rule 4): the message is
    planned again on a worker thread."""


class PlatformClient(Protocol):
    """What sending needs of the platform's OpenAPI
    (:class:`~gensokyo_idmap.qq.openapi.OpenApiClient`): a chat is named by its kind
    (``group`` / ``c2c``) and OpenID, bodies are the platform's own
    (:mod:`gensokyo_idmap.qq.outgoing`), a failure is a
    :class:`~gensokyo_idmap.errors.PlatformError`."""

    async def send_message(self, chat_kind: str, target: str,
                           body: dict[str, Any]) -> dict[str, Any]:
        """Send one message; the platform's answer, holding the new message ``id``."""
        ...

    async def upload_media(self, chat_kind: str, target: str, body: dict[str, Any]) -> str:
        """Upload a file to send later; its ``file_info``."""
        ...

    async def recall(self, chat_kind: str, target: str, message_id: str) -> None:
        """Recall a message the bot sent."""
        ...


@dataclass(frozen=True, slots=True)
class OutboundSettings:
    app_id: str
    self_id: int
    send_error: bool = False  # rule 5: a refused send is reported to its chat
    op_userid_type: UserIdType = "vuin"
    reads_off_loop: bool = False  # rule 4: the graph or the message ids are on a server
    #: a segment the platform cannot carry: refuse the send, or drop it with a warning
    unsupported_segments: UnsupportedSegments = "refuse"


@dataclass(frozen=True, slots=True)
class Target:
    """Where a send goes: the chat kind, the OpenID the platform needs, its vUIN if known."""

    chat_kind: ChatKind
    openid: str
    vuin: int | None


class OutboundSender:
    def __init__(self, graph: IdentityGraph, msgids: MessageIds, openapi: PlatformClient | None,
                 settings: OutboundSettings, budget: ReplyBudget | None = None) -> None:
        self.graph = graph
        self.msgids = msgids
        self.openapi = openapi
        self.settings = settings
        # "is None", not "or": an empty budget has no length, so it is false
        self.budget = budget if budget is not None else ReplyBudget()
        self._usable = openid_of_app(settings.app_id)
        self._recency = chat_recency(msgids)
        self.guilds = directory_of(graph)
        self._chats: RecentCache[tuple[str, str], tuple[Chat, MsgContext]] = RecentCache(
            _CHATS_REMEMBERED)
        self._targets: RecentCache[tuple[object, ...], tuple[int, Target]] = RecentCache(
            _CHATS_REMEMBERED)
        self._sending = 0  # sends under way (see the store of the id sent)
        # bound once, as the inbound bridge does: a module-level lazy logger re-reads the
        # configuration on every call, which doubled the cost of the line each send logs
        self._log = log.bind()

    async def off_loop(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``: on a worker thread when its reads may wait for a server (rule 4),
        else right here."""
        if self.settings.reads_off_loop:
            return await asyncio.to_thread(fn, *args)
        return fn(*args)

    # --- identities ---------------------------------------------------------------------

    def client_id(self, value: object, field: str) -> IdentityKey | VUin:
        """A client's id parameter by the client-input rules of docs/identities.md (and
        ``op_userid_type``: in ``ruin`` mode a number that is a known QQ rUIN means that
        person, before it is read as a vUIN)."""
        if not isinstance(value, int | str) or isinstance(value, bool):
            raise BadInputError(field, value, "expected a vUIN, an rUIN-… text or an OpenID")
        parsed = parse_client_input(value, self.settings.app_id or None, field=field)
        if isinstance(parsed, VUin) and self.settings.op_userid_type == "ruin":
            as_ruin = RUin("QQ", 0, str(parsed.value))
            if self.graph.lookup(as_ruin) is not None:
                return as_ruin
        return parsed

    def chat(self, target: Target) -> Chat:
        """The chat of this AppID a send to ``target`` goes to."""
        return self._chat_of(target)[0]

    def _chat_of(self, target: Target) -> tuple[Chat, MsgContext]:
        """The chat of ``target`` and the msgid-map context of a message sent there, made
        once per chat (checking a context's fields each send was waste: they never change)."""
        key = (target.chat_kind, target.openid)
        known = self._chats.young.get(key) or self._chats.get(key)
        if known is None:
            chat = Chat(self.settings.app_id, target.chat_kind, target.openid)
            known = (chat, chat.context("out"))
            self._chats.put(key, known)
        return known

    def memory_tables(self) -> list[Named]:
        """Its in-memory tables, for the memory chore and the figures
        (:mod:`gensokyo_idmap.tables`)."""
        return [("send_chats", self._chats), ("send_targets", self._targets)]

    def answered_scene(self, chat_kind: ChatKind, reply_to: object) -> str | None:
        """The chat a send belongs to when it answers a message (``reply_to``, a virtual
        id): that message's chat if it is one of this AppID and kind, else None. A bad,
        unknown or expired id is no context here; the reply choice says what is wrong."""
        if not isinstance(reply_to, int | str) or isinstance(reply_to, bool):
            return None
        try:
            record = self.msgids.lookup(check_virtual_id(reply_to))
        except IdmapError:
            return None
        if record is None or record.app_id != self.settings.app_id or not record.target:
            return None
        chat = Chat(self.settings.app_id, chat_kind, record.target)
        return chat.scene if chat.holds(record.chat_kind) else None

    async def target_of(self, chat_kind: ChatKind, value: object, field: str,
                        explicit: object = None, answering: object = None) -> Target:
        """:meth:`resolve_target` in the chat of the message a send answers
        (:meth:`answered_scene`), off the loop when its reads wait for a server (a send
        that answers no message and whose target is kept needs no read: answered here)."""
        def choose() -> Target:
            scene = self.answered_scene(chat_kind, answering)
            return self.resolve_target(chat_kind, value, field, explicit, scene)

        if self.settings.reads_off_loop and answering is None:
            known = self.known_target(chat_kind, value, field, explicit)
            if known is not None:
                return known
        return await self.off_loop(choose)

    def _kept_key(self, chat_kind: ChatKind, value: object, field: str, explicit: object,
                  scene: str | None) -> tuple[int, tuple[object, ...]] | None:
        """The store's version and the key :meth:`resolve_target` keeps an answer under;
        None when no answer is kept (a store without a cheap version, ids of other types)."""
        version = self.graph.version()
        if (version is None or type(value) not in (int, str)
                or type(explicit) not in (int, str, type(None))):
            return None
        return version, (chat_kind, value, field, explicit, scene)

    def known_target(self, chat_kind: ChatKind, value: object, field: str,
                     explicit: object = None, scene: str | None = None) -> Target | None:
        """:meth:`resolve_target`'s answer if it is kept and still stands, else None: no
        read but the store's version (so never a wait for a server)."""
        return self._kept_answer(self._kept_key(chat_kind, value, field, explicit, scene))

    def _kept_answer(self, kept: tuple[int, tuple[object, ...]] | None) -> Target | None:
        """The answer kept under ``kept`` (:meth:`_kept_key`) if it is of that version."""
        if kept is None:
            return None
        known = self._targets.get(kept[1])
        return known[1] if known is not None and known[0] == kept[0] else None

    def resolve_target(self, chat_kind: ChatKind, value: object, field: str,
                       explicit: object = None, scene: str | None = None) -> Target:
        """The OpenID to send to for a client's ``group_id`` / ``user_id`` (rule 1).

        ``scene`` is the chat the send belongs to when it is known (the chat of the message
        it answers, the group a mention is made in): the identity last seen there comes
        first, then the one that spoke last in this kind of chat.

        An answer is kept while the identity store's version is unchanged (nothing was
        committed to it since) if the choice did not ask who spoke last (that reads the
        message ids, which change with every message): a busy chat's vUIN, and a member
        mentioned in it, are resolved once, not once per send.
        """
        kept = self._kept_key(chat_kind, value, field, explicit, scene)
        answer = self._kept_answer(kept)
        if answer is not None:
            return answer
        asked = False

        def recency(scene: str, identity: str) -> tuple[int, int] | None:
            nonlocal asked
            asked = True
            return self._recency(scene, identity)

        target = self._resolve(chat_kind, value, field, explicit, scene, recency)
        # group and C2C targets only: a guild-side one also reads the guild directory
        if kept is not None and not asked and target.chat_kind in CHAT_KINDS:
            self._targets.put(kept[1], (kept[0], target))
        return target

    def _resolve(self, chat_kind: ChatKind, value: object, field: str, explicit: object,
                 scene: str | None, recency: Recency) -> Target:
        """:meth:`resolve_target` read from the graph (``recency``: who spoke last)."""
        wanted = self.client_id(value, field)
        override: IdentityKey | None = None
        if explicit is not None:
            named = self.client_id(explicit, "openid")
            if isinstance(named, VUin):
                raise BadInputError("openid", explicit, "must name an identity, not a vUIN")
            override = named
        prefix = Chat.kind_prefix(self.settings.app_id, chat_kind)  # this kind of chat
        if isinstance(wanted, RawId) and override is None:
            return self._guild_target(chat_kind, wanted, self.graph.lookup(wanted), value,
                                      field)
        if isinstance(wanted, VUin):
            vuin: int | None = wanted.value
            try:
                chosen = self.graph.pick_identity(wanted.value, scene, override, self._usable,
                                                  scene_prefix=prefix, recency=recency)
            except NoUsableIdentityError:
                guild_side = self._guild_identity(wanted.value, chat_kind)
                if guild_side is None:
                    raise
                return self._guild_target(chat_kind, guild_side, vuin, value, field)
            except NotFoundError:  # no identity at all: a number nobody was given
                raise NotFoundError(f"{field} {value}: neither a known vUIN nor an OpenID; "
                                    "not sent") from None
        else:
            vuin = self.graph.lookup(wanted)
            if (override is None and vuin is None and isinstance(wanted, OpenId)
                    and not is_platform_openid(wanted.openid)):
                raise BadInputError(field, value, "neither a known vUIN nor a well-formed "
                                    "OpenID (32 hex digits); not sent")
            if override is not None or isinstance(wanted, OpenId):
                chosen = override or wanted
            elif vuin is None:
                raise NotFoundError(f"{field} {value}: no vUIN is known for it")
            else:
                chosen = self.graph.pick_identity(vuin, scene, usable=self._usable,
                                                  scene_prefix=prefix, recency=recency)
        if not isinstance(chosen, OpenId) or not self._usable.accepts(chosen):
            raise BadInputError(field, value, f"{chosen.key} is not {self._usable.description}")
        return Target(chat_kind, chosen.openid, vuin)

    def _guild_identity(self, vuin: int, chat_kind: ChatKind) -> RawId | None:
        """The channel (``group``: a ``raw:`` id the config table places in a guild) or the
        guild user (``c2c``: a ``raw:`` id) a vUIN with no usable OpenID stands for (rule 5),
        else None."""
        if chat_kind not in ("group", "c2c"):
            return None
        kind: ChatKind = "channel" if chat_kind == "group" else "dms"
        try:
            key = self.graph.pick_identity(
                vuin, usable=GUILD_ID,
                scene_prefix=Chat.kind_prefix(self.settings.app_id, kind))
        except NotFoundError:
            return None
        if not isinstance(key, RawId):
            return None
        if chat_kind == "c2c":
            return key  # its DM session is looked up next, and its absence said plainly
        placed = self.guilds.is_channel(vuin) or self.guilds.guild_of_channel(
            key.value) is not None
        return key if placed else None

    def _guild_target(self, chat_kind: ChatKind, key: RawId, vuin: int | None, value: object,
                      field: str) -> Target:
        """Where a send to a guild-side id goes: the channel itself for a group, the DM
        session a guild user opened for a private chat (rule 5)."""
        if chat_kind in GROUP_CHAT_KINDS:
            return Target("channel", key.value, vuin)
        if chat_kind == "dms":
            return Target("dms", key.value, vuin)
        dm_guild = self.guilds.dm_guild_of_user(key.value)
        if dm_guild is None:
            raise NotFoundError(f"{field} {value}: guild user {key.value} has opened no direct "
                                "message session with the bot (a DM goes to that session)")
        return Target("dms", dm_guild, vuin)

    def mention(self, target: Target, qq: str, known_only: bool = False) -> str | None:
        """An ``at`` segment as the platform renders it: a member mention in groups, naming
        the identity of that person last seen in this group (rule 1).

        ``<qqbot-at-user id="<member openid>" />`` is what third-party SDKs send; they use
        it in markdown for sure, in plain text messages it is UNCONFIRMED (the reference
        does not say). An at of the bot itself is left out (``""``, as documented); one
        the platform has no form for (``all``, any at in C2C or a guild DM) is None, which
        ``onebot.unsupported_segments`` decides (:func:`plan_message`).

        ``known_only``: answer only what needs no read but the store's version (a member
        whose answer is kept, :meth:`known_target`), else raise :class:`_NotKnownHere`.
        """
        if qq == str(self.settings.self_id):
            return ""
        if qq == "all" or target.chat_kind not in GROUP_CHAT_KINDS:
            return None
        if target.chat_kind == "channel":
            if known_only:
                raise _NotKnownHere(qq)
            return self._channel_mention(qq)
        scene = self.chat(target).scene
        if known_only:
            member = self.known_target("group", qq, "at.qq", scene=scene)
            if member is None:
                raise _NotKnownHere(qq)
        else:
            try:
                member = self.resolve_target("group", qq, "at.qq", scene=scene)
            except IdmapError as err:
                self._log.info("[message] at left as text", qq=qq, reason=err.message)
                return f"@{qq}"
        return member_mention(member.openid)

    def _channel_mention(self, qq: str) -> str:
        """``<@id>``: a guild user mentioned in a channel, by their guild user id."""
        try:
            wanted = self.client_id(qq, "at.qq")
            key = (wanted if isinstance(wanted, RawId) else
                   self.graph.pick_identity(wanted.value, usable=GUILD_ID)
                   if isinstance(wanted, VUin) else None)
        except IdmapError as err:
            self._log.info("[message] at left as text", qq=qq, reason=err.message)
            return f"@{qq}"
        return guild_user_mention(key.value) if isinstance(key, RawId) else f"@{qq}"

    # --- replies --------------------------------------------------------------------------

    def _take_newest(self, chat_kind: str, target: str, window: float) -> tuple[str, int] | None:
        """The newest message (or event) of ``chat_kind`` received from ``target`` within
        ``window`` seconds that can still take a reply, and the ``msg_seq`` of a reply to
        it (counted): the budget jumps over what is spent, so the cost does not grow with
        how many messages of the chat are used up."""
        app_id = self.settings.app_id
        with self.msgids.inbound_walk(app_id, chat_kind, target, window) as newest:
            return self.budget.take_newest((app_id, chat_kind, target), newest, window)

    def answerable(self, target: Target, reply_to: int | None,
                   shown: bool = False) -> int | None:
        """``reply_to`` (the virtual id a ``reply`` segment names) if a send to ``target``
        can answer it: a message of that chat the bot received, which the map still holds.
        Else None, and a warning naming the id and why: the send still goes, without the
        quote, answering what rule 2 picks (a framework's ``reply_message`` on an old
        message must not cost the answer). ``shown``: the message is quoted all the same
        (one of the bot's own in a channel or DM, :meth:`quoted_in`), so no warning."""
        if reply_to is None:
            return None
        record = self.msgids.lookup(reply_to)
        chat = self.chat(target)
        why = (None if record is not None and record.direction == "in"
               and record.app_id == chat.app_id and record.target == chat.openid
               and chat.holds(record.chat_kind)
               else "unknown or expired" if record is None
               else "the bot's own message" if record.direction == "out"
               else "a message of another chat")
        if why is None:
            return reply_to
        if shown:
            return None
        self._log.warning("[message] reply sent without its quote", reply_to=reply_to,
                          reason=why, chat_kind=target.chat_kind, target=target.vuin)
        return None

    def choose_reply(self, target: Target, reply_to: int | None) -> tuple[ReplyTo, int]:
        """What the next message to ``target`` answers (rule 2), and its ``msg_seq``
        (counted in the budget). ``reply_to``: a message :meth:`answerable` let through
        (one gone since, expired this very moment, is passed over like any other)."""
        chat = self.chat(target)
        if reply_to is not None:
            record = self.msgids.lookup(reply_to)
            if record is not None and record.direction == "in":
                return (ReplyTo(msg_id=record.real_id),
                        self.budget.take(record.real_id, chat.reply_window))
        taken = self._take_newest(chat.kind, chat.openid, chat.reply_window)
        if taken is not None:
            return ReplyTo(msg_id=taken[0]), taken[1]
        taken = self._take_newest(chat.event_kind, chat.openid, chat.reply_window)
        if taken is not None:
            return ReplyTo(event_id=taken[0]), taken[1]
        return ReplyTo(), self.budget.take(None)

    def quoted_in(self, target: Target, reply_to: int) -> str | None:
        """The platform id of the message a ``reply`` segment names, when it is one of the
        chat of ``target`` (received or sent by the bot): what a channel or guild DM send
        quotes (``message_reference``, rule 5). None otherwise: the reply choice says what
        is wrong with an unknown id, and a message of another chat is no quote here."""
        record = self.msgids.lookup(reply_to)
        if record is None or (record.app_id, record.chat_kind, record.target) != (
                self.settings.app_id, target.chat_kind, target.openid):
            return None
        return record.real_id

    # --- sending --------------------------------------------------------------------------

    def _platform(self) -> PlatformClient:
        if self.openapi is None:
            raise PlatformError("sending needs bot.app_id and bot.secret (no platform access)")
        return self.openapi

    async def send(self, target: Target, segments: list[Segment]) -> int:
        """Send a OneBot message; the virtual id of the first platform message sent. A
        refusal is the caller's; with ``send_error`` the chat is told first (rule 5)."""
        self._sending += 1
        try:
            return await self._send(target, segments)
        except PlatformError as err:
            if self.settings.send_error and self.openapi is not None:
                await self._tell_the_chat(target, err)
            raise
        finally:
            self._sending -= 1

    async def _tell_the_chat(self, target: Target, err: PlatformError) -> None:
        """Rule 5: one text message saying why a send failed, as a reply like any other;
        if that fails too, it is logged (the send's own failure is what the caller gets)."""
        text = f"send failed: {failure_detail(err)}"
        try:
            await self._send(target, [Segment.text(text)])
        except IdmapError as again:
            self._log.warning("[message] send failure not reported to the chat",
                              chat_kind=target.chat_kind, target=target.vuin,
                              reason=again.message)

    async def _send(self, target: Target, segments: list[Segment]) -> int:
        def make_plan(known_only: bool = False) -> MessagePlan:
            return plan_message(segments, target.chat_kind,
                                lambda qq: self.mention(target, qq, known_only),
                                self.settings.unsupported_segments)

        # only a mention reads the graph (rule 4): a message without one, or whose members
        # are all kept (known_target), is planned here, not on a worker thread and back
        if self.settings.reads_off_loop and any(segment.type == "at" for segment in segments):
            try:
                plan = make_plan(known_only=True)
            except _NotKnownHere:
                plan = await self.off_loop(make_plan)
        else:
            plan = make_plan()
        if target.chat_kind in GUILD_CHAT_KINDS:
            check_channel_parts(plan.parts)  # refused whole, before any part is sent
        if plan.dropped:
            self._log.warning("[message] segments the platform cannot carry left out",
                              chat_kind=target.chat_kind, target=target.vuin,
                              segments=[f"message[{index}] {kind}"
                                        for index, kind in plan.dropped])
            left_out = {index for index, _ in plan.dropped}
            segments = [segment for index, segment in enumerate(segments)
                        if index not in left_out]  # what get_msg shows is what was sent
        openapi = self._platform()
        chat, out = self._chat_of(target)
        guild_side = target.chat_kind in GUILD_CHAT_KINDS
        answering, quote = plan.reply_to, None
        if answering is not None:
            if guild_side:  # a message of that channel or DM is shown quoted (rule 5)
                quote = await self.off_loop(self.quoted_in, target, answering)
            # a quote of what cannot be answered is left out (rule 2), unless it is shown
            answering = await self.off_loop(self.answerable, target, answering,
                                            quote is not None)
            if answering is None and quote is None:  # get_msg shows no quote either
                segments = [segment for segment in segments if segment.type != "reply"]
        context = out.about(
            self.settings.self_id, segments_to_cq_within(segments, MAX_CONTENT_BYTES))
        first: int | None = None
        for part in plan.parts:
            file_info = None
            if part.media is not None and not guild_side:
                file_info = await openapi.upload_media(target.chat_kind, target.openid,
                                                       part.media.upload_body())
            reply, seq = await self.off_loop(self.choose_reply, target, answering)
            for attempt in range(1, _SEND_ATTEMPTS + 1):
                body = (channel_message_body(part, msg_id=reply.msg_id,
                                             event_id=reply.event_id, msg_seq=seq,
                                             quote=quote if first is None else None)
                        if guild_side else
                        message_body(part, msg_id=reply.msg_id, event_id=reply.event_id,
                                     msg_seq=seq, file_info=file_info))
                try:
                    answer = await openapi.send_message(target.chat_kind, target.openid, body)
                    break
                except PlatformError as err:
                    if (attempt == _SEND_ATTEMPTS or reply.reference is None
                            or err.platform_code not in _SPENT_CODES):
                        raise
                    # the platform knows better than our counts (e.g. after a restart):
                    # a repeated msg_seq takes the next one, a spent id the next message
                    self._log.info("[message] reply id refused, trying again",
                                   code=err.platform_code, reply_to=reply.reference,
                                   attempt=attempt)
                    if err.platform_code != _DUPLICATE_SEQ and answering is None:
                        await self.off_loop(self.budget.use_up, reply.reference,
                                            chat.reply_window)
                        reply, seq = await self.off_loop(self.choose_reply, target, None)
                        if reply.reference is None:
                            raise  # nothing else to answer: the platform's own reason stands
                    else:  # the same id again, with its next msg_seq
                        seq = await self.off_loop(self.budget.take, reply.reference,
                                                  chat.reply_window)
            # with the writes of this turn of the loop when other sends are in flight: they
            # share one commit (a commit per send was a sixth of a send's CPU at 32 in
            # flight); a send alone commits at once (a turn of the loop to wait for a batch
            # that nothing else joins, and another to wake up, cost more than the commit)
            virtual_id = await self.msgids.store_real(answer["id"], context,
                                                      alone=self._sending == 1)
            # debug: an info line per send was a twentieth of its cost, and what it said is
            # in the msgid map (get_msg) and the action metrics already
            self._log.debug("[message] sent", chat_kind=target.chat_kind, target=target.vuin,
                            message_id=virtual_id, reply_to=reply.reference, msg_seq=seq)
            if first is None:
                first = virtual_id
        assert first is not None  # plan_message never returns no parts
        return first

    async def recall(self, virtual_id: int) -> None:
        """``delete_msg``: only what the bot sent can be recalled (platform rule)."""
        record = await self.off_loop(self.msgids.lookup, virtual_id)
        if record is None:
            raise NotFoundError(f"message_id {virtual_id} is unknown or expired")
        if record.direction != "out" or record.chat_kind not in CHAT_KINDS:
            raise BadInputError("message_id", virtual_id,
                                "only messages the bot sent can be recalled")
        await self._platform().recall(record.chat_kind, record.target, record.real_id)
        self._log.info("[message] recalled", message_id=virtual_id)
