"""Virtual message ids: real platform message ids ↔ positive int32, with a TTL.

Rules this module keeps:

1. **No live virtual id maps to two real ids.** Ids come from ``msg_counter``, a position
   whose id wraps from 2**31-1 to 1 (:func:`~gensokyo_idmap.runtime.blocks.virtual_id_at`);
   every id whose record is still alive is skipped; an expired record in the way is purged
   (all of its index entries) before its id is reused.
2. **Expired means gone.** A lookup never returns a record whose expiry has passed, swept
   or not; storing a real id whose record expired allocates afresh.
3. **A store hit refreshes the TTL** (same virtual id, new expiry, ``[idmap] msg_id hit``).
   ``msg_id create|hit`` are debug lines: one comes with every message, whose info line
   (``[message] … mapped``) already names the virtual id.
4. **The sweep costs what expired**, not what is stored: it walks ``expires_at`` from the
   start and stops at the first key in the future.
5. **Time is a parameter** (``clock``), so tests move it instead of sleeping.
6. **A message's author and content live and die with its record** (``get_msg``): written
   in the same step, deleted with it (sweep, purge), kept on a hit. The content is OneBot
   CQ text of at most ``MAX_CONTENT_BYTES`` (the bridge cuts longer messages); with
   ``keep_content`` off no text is written, the author still is.
7. **A reply choice reads a busy chat once, not once per send.** What the walks of a chat
   found (:meth:`MsgIdMap.inbound_walk`) answers the next ones until an inbound message of
   that chat is stored (through this map: its walks are dropped before the write and again
   after the commit), an answer expires or leaves the window, or a second passes (what
   another process stores, ``msgid store``, is seen within it).
8. **A quoted message is found by its chat and ``msg_idx``** (:func:`quote_key`): an
   inbound message's ``msg_idx`` is a second key of its record in the real → virtual
   index (``MsgContent.alias``), written, kept and deleted with it; :meth:`MsgIdMap.quoted`
   answers only while the live record still names that key.
9. **No id is handed out twice, even when the store is lost.** A position is used only
   within a block reserved in the precious store (:mod:`gensokyo_idmap.runtime.blocks`,
   ``blocks`` of :class:`MsgIdMap`): a fresh msgid-map.db, or a restart, goes on above every
   position reserved before.

10. **Each bot's message ids are its own.** A real id stored again with another AppID than
    the live record's (two bots of one daemon given one platform message id) is no hit: it
    gets a virtual id of its own, with its bot's chat, and the real → virtual index names
    the newest; the other bot's record lives on. A store with no AppID (the CLI's) hits
    whichever record the index names.

Write functions validate before their first write (the store's batch contract).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, Final, Literal, Protocol, cast

import structlog

from gensokyo_idmap import counters
from gensokyo_idmap.errors import BadInputError, IdmapError, NotFoundError, StoreError
from gensokyo_idmap.health import HealthSource
from gensokyo_idmap.identity import MAX_OPENID_LEN
from gensokyo_idmap.periodic import every
from gensokyo_idmap.runtime.base import (
    MsgContent,
    MsgIdCounts,
    MsgIdReader,
    MsgIdStore,
    MsgIdWriter,
    MsgRecord,
)
from gensokyo_idmap.runtime.blocks import INT32_MAX, IdBlocks, virtual_id_at
from gensokyo_idmap.tables import Named, estimate

__all__ = [
    "DEFAULT_MSGID_TTL_SECONDS",
    "DEFAULT_SWEEP_INTERVAL_SECONDS",
    "EVENT_KINDS",
    "INT32_MAX",
    "MAX_CONTENT_BYTES",
    "MAX_PROBES",
    "RECENT_SCAN",
    "InboundWalk",
    "MessageIds",
    "MsgContext",
    "MsgIdMap",
    "quote_key",
]

log = structlog.get_logger("gensokyo_idmap.msgid")

DEFAULT_MSGID_TTL_SECONDS: Final = 3600
DEFAULT_SWEEP_INTERVAL_SECONDS: Final = 60
MAX_REAL_ID_BYTES: Final = 400
#: A message's AppID, chat kind and target (an OpenID, MAX_OPENID_LEN) in characters.
MAX_CONTEXT_LEN: Final = MAX_OPENID_LEN
#: The most a message's OneBot content (CQ text, UTF-8) takes beside its id mapping.
MAX_CONTENT_BYTES: Final = 4096
#: Positions one allocation tries past the counter for an id no live record holds (both
#: backends): beyond, the store fails rather than search on.
MAX_PROBES: Final = 1 << 16
#: Deletes per transaction of a sweep: a sweep never holds the writer long, and LMDB keeps
#: every page a transaction dirtied (4 KiB each, malloc'd by the writer thread) for the
#: later transactions of the environment until it closes: its largest transaction's worth
#: stays resident. 2,000 deletes of records scattered over the indexes dirtied ~550 pages
#: (2.2 MiB held for good after the sweep of a 50,000-message flood), 128 dirty ~130
#: (0.5 MiB); the sweep took as long (0.34 s for 50,000: the store does not fsync).
_SWEEP_BATCH: Final = 128
#: Entries past their expiry (not swept yet, or left by another daemon) a page of recent
#: messages steps over at most beyond its own length: a sweep runs every minute, so more
#: than a minute's worth of traffic is rarely in the way.
RECENT_SCAN: Final = 2_000
#: The chat kind under which a chat's reply-able non-message events (their envelope ids)
#: are kept, per chat kind of its messages.
EVENT_KINDS: Final = {"group": "group-event", "c2c": "c2c-event",
                       "channel": "channel-event", "dms": "dms-event"}


class MsgContext:
    """Where a message belongs: AppID, chat kind and target, and which way it went; and,
    once :meth:`about` names them, who wrote it and what it said (rule 6)."""

    __slots__ = ("alias", "app_id", "author", "chat_kind", "direction", "message", "target")

    author: int
    message: str | None
    alias: str | None

    def __init__(
        self,
        app_id: str = "",
        chat_kind: str = "",
        target: str = "",
        direction: Literal["in", "out"] = "in",
    ) -> None:
        if direction not in ("in", "out"):
            raise BadInputError("direction", direction, "must be 'in' or 'out'")
        for field, value in (("app_id", app_id), ("chat_kind", chat_kind), ("target", target)):
            if not isinstance(value, str) or "\0" in value or len(value) > MAX_CONTEXT_LEN:
                raise BadInputError(field, value, f"must be text of at most {MAX_CONTEXT_LEN} "
                                    "characters, no NUL")
            _check_utf8(field, value)
        self.app_id = app_id
        self.chat_kind = chat_kind
        self.target = target
        self.direction = direction
        self.author = 0
        self.message = None
        self.alias = None

    def about(self, author: int, message: str | None,
              msg_idx: str | None = None) -> MsgContext:
        """This chat's context for one message: its author's vUIN (0: unknown), its
        OneBot content as CQ text (None: not kept) and the platform's ``msg_idx`` of it
        (rule 8; None: none, or one too long to be a key). The chat fields are not checked
        again (a chat's context is built once and reused for each of its messages)."""
        if isinstance(author, bool) or not isinstance(author, int) or author < 0:
            raise BadInputError("author", author, "must be a vUIN (0: unknown)")
        if message is not None:
            if not isinstance(message, str):
                raise BadInputError("message", message, "must be text")
            if _check_utf8("message", message) > MAX_CONTENT_BYTES:
                raise BadInputError("message", message[:80],
                                    f"longer than {MAX_CONTENT_BYTES} bytes")
        one = object.__new__(MsgContext)
        one.app_id, one.chat_kind, one.target = self.app_id, self.chat_kind, self.target
        one.direction, one.author, one.message = self.direction, author, message
        one.alias = None if msg_idx is None else quote_key(
            self.app_id, self.chat_kind, self.target, msg_idx)
        return one

    def content(self, keep_text: bool = True) -> MsgContent | None:
        """What is kept beside the record (rules 6, 8): None when nothing is known."""
        message = self.message if keep_text else None
        if not self.author and message is None and self.alias is None:
            return None
        return MsgContent(self.author, message, self.alias)


def quote_key(app_id: str, chat_kind: str, target: str, msg_idx: str) -> str | None:
    """The real → virtual index key of a chat's message by its ``msg_idx`` (rule 8), or
    None when ``msg_idx`` cannot be one (not text, empty, or the key too long). NULs
    separate the parts and lead it, so it never equals a platform message id."""
    if not isinstance(msg_idx, str) or not msg_idx:
        return None
    key = f"\0idx\0{app_id}\0{chat_kind}\0{target}\0{msg_idx}"
    try:
        if len(key.encode("utf-8")) > MAX_REAL_ID_BYTES:
            return None
    except UnicodeEncodeError:
        return None
    return key


def _check_utf8(field: str, value: str) -> int:
    """``value``'s size in UTF-8 bytes; a :class:`BadInputError` when it has none (a lone
    surrogate)."""
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise BadInputError(
            field, value, "holds characters that are not valid Unicode text"
        ) from None


def _check_real_id(real_id: str) -> None:
    if not isinstance(real_id, str) or not real_id:
        raise BadInputError("message_id", real_id, "a real message id must be non-empty text")
    _check_utf8("message_id", real_id)
    if len(real_id.encode("utf-8")) > MAX_REAL_ID_BYTES:
        raise BadInputError("message_id", real_id, f"longer than {MAX_REAL_ID_BYTES} bytes")


def check_virtual_id(value: int | str, field: str = "message_id") -> int:
    """A virtual message id from a client: a positive int32."""
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        number = int(value.strip())
    else:  # floats (1.5 must not become 1), bools, anything else
        raise BadInputError(field, value, f"must be an integer from 1 to {INT32_MAX}")
    if not 1 <= number <= INT32_MAX:
        raise BadInputError(field, value, f"must be an integer from 1 to {INT32_MAX}")
    return number


# --- pure rules over a store view ---------------------------------------------------------

#: The blocks of a map without a high-water mark (tests, benchmarks, read-only tools).
_NO_MARK: Final = IdBlocks(None)


def _alive(record: MsgRecord | None, now_ms: int) -> MsgRecord | None:
    return record if record is not None and record.expires_ms > now_ms else None


def _allocate(writer: MsgIdWriter, now_ms: int, blocks: IdBlocks) -> int:
    """The virtual id of the next position after the counter whose id no live record holds
    (ids wrap at int32, positions do not), within the blocks reserved (rule 9)."""
    position, soon = writer.msg_counter(), blocks.soon
    for _ in range(MAX_PROBES):
        if position >= soon:  # twice a block
            position = blocks.advance(position + 1) - 1  # may raise: nothing written yet
            soon = blocks.soon
        candidate = position % INT32_MAX + 1  # virtual_id_at(position + 1), per probe
        position += 1
        held = writer.record(candidate)
        if held is None:
            break
        if held.expires_ms <= now_ms:
            writer.delete_record(held)  # expired but not swept yet: purge, then reuse
            break
    else:
        raise StoreError(f"no free virtual message id within {MAX_PROBES} of the counter")
    writer.set_msg_counter(position)
    return candidate


def _apply_store(
    writer: MsgIdWriter, real_id: str, context: MsgContext, now_ms: int, ttl_ms: int,
    keep_text: bool = True, blocks: IdBlocks = _NO_MARK,
) -> tuple[int, bool]:
    known = writer.virtual_of(real_id)
    record = writer.record(known) if known is not None else None
    if (known is not None and record is not None and record.real_id == real_id
            and record.expires_ms > now_ms):
        if not context.app_id or record.app_id == context.app_id:  # rule 10
            kept = writer.content(known)  # rule 6: a hit keeps what the first store kept
            writer.delete_record(record)
            writer.put_record(replace(record, expires_ms=now_ms + ttl_ms), kept)
            return known, True
        record = None  # another bot's, alive: kept; this one gets an id of its own
    virtual_id = _allocate(writer, now_ms, blocks)  # may raise: nothing written before
    if record is not None and record.real_id == real_id:
        writer.delete_record(record)  # expired: invisible, so it starts afresh
    writer.put_record(
        MsgRecord(virtual_id, real_id, context.app_id, context.chat_kind, context.target,
                  context.direction, now_ms, now_ms + ttl_ms),
        context.content(keep_text),
    )
    return virtual_id, False


def _apply_sweep(writer: MsgIdWriter, now_ms: int, limit: int) -> int:
    swept = 0
    for expires_ms, virtual_id in writer.expired(now_ms, limit):
        record = writer.record(virtual_id)
        if record is not None and record.expires_ms == expires_ms:
            writer.delete_record(record)
            swept += 1
        else:
            writer.delete_expiry(expires_ms, virtual_id)
    return swept


def _apply_claim_sweep(writer: MsgIdWriter, now_ms: int, limit: int) -> int:
    """Delete delivery claims (:mod:`.claims`) whose window has passed; how many."""
    expired = writer.expired_claims(now_ms, limit)
    for expires_ms, key in expired:
        writer.delete_claim(key, expires_ms)
    return len(expired)


def stored(logger: structlog.typing.FilteringBoundLogger, real_id: str, ctx: MsgContext,
           virtual_id: int, hit: bool) -> int:
    """Count and log a store once it is committed; its virtual id (rule 3)."""
    (counters.MSGID_HIT if hit else counters.MSGID_CREATE).inc()
    logger.debug("[idmap] msg_id hit" if hit else "[idmap] msg_id create",
                 real_id=real_id, virtual_id=virtual_id, chat_kind=ctx.chat_kind)
    return virtual_id


def looked_up(logger: structlog.typing.FilteringBoundLogger, virtual_id: int,
              record: MsgRecord | None) -> MsgRecord | None:
    """Count and log a lookup; its record."""
    counters.MSGID_LOOKUP.inc()
    logger.info("[idmap] msg_id lookup", virtual_id=virtual_id,
                real_id=None if record is None else record.real_id)
    return record


def real_id_of(virtual_id: int, record: MsgRecord | None) -> str:
    """The real id of a looked-up record; NotFoundError names the virtual id without one."""
    if record is None:
        raise NotFoundError(f"virtual message id {virtual_id} is unknown or expired")
    return record.real_id


def live_alias(key: str, known: int | None,
               record_and_content: Callable[[int], tuple[MsgRecord | None,
                                                         MsgContent | None]],
               now_ms: int) -> int | None:
    """The virtual id an index names for the alias ``key`` (``known``) if its record is
    alive and its content still names ``key`` (rule 8)."""
    if known is None:
        return None
    record, content = record_and_content(known)
    if _alive(record, now_ms) is None or content is None or content.alias != key:
        return None
    return known


def live_virtual_id(real_id: str, known: int | None,
                    record_of: Callable[[int], MsgRecord | None], now_ms: int) -> int | None:
    """The virtual id a store names for ``real_id`` (``known``) if its record is alive and
    still says ``real_id`` (rule 2)."""
    record = None if known is None else _alive(record_of(known), now_ms)
    return None if record is None or record.real_id != real_id else record.virtual_id


#: The newest live inbound record of a chat in a window below a position ((created ms,
#: virtual id); None: the newest of all), or None: a reply choice's view of a chat.
InboundWalk = Callable[[tuple[int, int] | None], MsgRecord | None]


def _position(at: tuple[int, int]) -> MsgRecord:
    """A record standing for a position in a chat (``before`` of ``latest_inbound``)."""
    return MsgRecord(at[1], "", "", "", "", "", at[0], 0)


def newest_of(records: Iterable[MsgRecord | None]) -> tuple[int, int] | None:
    """(created ms, virtual id) of the newest of ``records`` (the newest inbound record of
    each chat kind of one chat): the virtual id orders records of one millisecond."""
    newest: tuple[int, int] | None = None
    for record in records:
        if record is not None and (newest is None
                                   or (record.created_ms, record.virtual_id) > newest):
            newest = (record.created_ms, record.virtual_id)
    return newest


def _count_sweep(swept: int, seconds: float) -> None:
    counters.MSGID_EXPIRED.inc(swept)
    counters.MSGID_SWEEP_SECONDS.observe(seconds)


#: How long a chat's walk answers are reused without a new inbound message of that chat
#: (what a writer in another process, ``msgid store``, adds is seen within this), how many
#: answers one chat keeps and how many chats keep them.
_WALK_MEMO_MS: Final = 1000
_WALK_MEMO_ANSWERS: Final = 64
_WALK_MEMO_CHATS: Final = 10_000
_ChatKey = tuple[str, str, str]
_Answers = dict[tuple[int, int] | None, MsgRecord | None]


class WalkMemo(dict[_ChatKey, tuple[int, _Answers]]):
    """chat → (until when, in ms, the answers of its walks) (rule 7): at most
    :data:`_WALK_MEMO_CHATS` chats (all forgotten at once beyond), each for a second; a
    dict (its lookups cost what a dict's do) that the memory chore can sweep
    (:mod:`gensokyo_idmap.tables`)."""

    __slots__ = ("_now_ms",)

    def __init__(self, now_ms: Callable[[], int]) -> None:
        super().__init__()
        self._now_ms = now_ms

    def forget(self) -> None:
        """Drop the chats whose walks are past their second: the chats no one sends to.
        (A reply choice on a worker thread may add one meanwhile: the items are copied in
        one step, and a memo renewed since is left.)"""
        now_ms = self._now_ms()
        for chat, memo in list(self.items()):
            if memo[0] <= now_ms and self.get(chat) is memo:
                self.pop(chat, None)

    def footprint(self) -> int:
        return estimate(len(self), (self,), self.items())


class _Walking:
    """``with``: one chat's walk (:meth:`MsgIdMap.inbound_walk`), answered from what the
    last walks of the chat found while no inbound message of it was stored since (a send
    of a busy chat asks the same two questions as the one before it), else from a read
    snapshot opened at the first question that needs one. A class, not a generator: it is
    entered once per send."""

    __slots__ = ("_chat", "_ids", "_now_ms", "_reading", "_since_ms")

    def __init__(self, ids: MsgIdMap, chat: _ChatKey, now_ms: int, since_ms: int) -> None:
        self._ids = ids
        self._chat = chat
        self._now_ms = now_ms
        self._since_ms = since_ms
        self._reading: AbstractContextManager[MsgIdReader] | None = None

    def __enter__(self) -> InboundWalk:
        ids, chat, now_ms, since_ms = self._ids, self._chat, self._now_ms, self._since_ms
        stored_before = ids._inbound_stores  # an inbound store after this: answers not kept
        memo = ids.walks.get(chat)
        answers: _Answers = memo[1] if memo is not None and memo[0] > now_ms else {}
        walk: InboundWalk | None = None

        def below(at: tuple[int, int] | None) -> MsgRecord | None:
            nonlocal walk
            if at in answers:
                found = answers[at]
                if found is None or (found.expires_ms > now_ms
                                     and found.created_ms >= since_ms):
                    return found
            if walk is None:
                self._reading = ids.store.read()
                walk = self._reading.__enter__().inbound_walk(*chat, now_ms, since_ms)
            found = walk(at)
            if ids._inbound_stores == stored_before:
                ids._remember(chat, answers, at, found, now_ms)
            return found

        return below

    def __exit__(self, *exc: Any) -> None:
        if self._reading is not None:
            self._reading.__exit__(*exc)


# --- the service --------------------------------------------------------------------------


class MessageIds(Protocol):
    """What the bridge, the APIs and the CLI need of a message-id map: :class:`MsgIdMap`
    over msgid-map.db, or :class:`~gensokyo_idmap.runtime.redis.state.RedisMsgIdMap` shared by
    several daemons (``idmap.runtime_backend``). Each method is documented on
    :class:`MsgIdMap`."""

    @property
    def store(self) -> HealthSource: ...
    async def store_real(self, real_id: str, context: MsgContext | None = None, *,
                         alone: bool = False) -> int: ...
    async def store_many(self, items: Sequence[tuple[str, MsgContext]]) -> list[int]: ...
    def store_real_sync(self, real_id: str, context: MsgContext | None = None) -> int: ...
    def lookup(self, virtual_id: int) -> MsgRecord | None: ...
    def lookup_content(self, virtual_id: int
                       ) -> tuple[MsgRecord, MsgContent | None] | None: ...
    def real_id_of(self, virtual_id: int) -> str: ...
    def virtual_of(self, real_id: str) -> int | None: ...
    def quoted(self, app_id: str, chat_kind: str, target: str,
               msg_idx: str) -> int | None: ...
    def latest_inbound(self, app_id: str, chat_kind: str, target: str, window_seconds: float,
                       before: MsgRecord | None = None) -> MsgRecord | None: ...
    def inbound_walk(self, app_id: str, chat_kind: str, target: str, window_seconds: float
                     ) -> AbstractContextManager[InboundWalk]: ...
    def newest_inbound(self, app_id: str, chat_kinds: Sequence[str],
                       target: str) -> tuple[int, int] | None: ...
    def recent(self, before: tuple[int, int] | None, limit: int
               ) -> list[tuple[MsgRecord, MsgContent | None]]: ...
    async def sweep(self) -> int: ...
    def sweep_sync(self) -> int: ...
    def counts(self) -> MsgIdCounts: ...
    async def run_sweeper(self, stop: asyncio.Event,
                          interval_seconds: float = DEFAULT_SWEEP_INTERVAL_SECONDS) -> None: ...


class MsgIdMap:
    """Virtual message ids over one MsgIdStore."""

    def __init__(
        self,
        store: MsgIdStore,
        clock: Callable[[], float] = time.time,
        ttl_seconds: float = DEFAULT_MSGID_TTL_SECONDS,
        *,
        keep_content: bool = True,
        blocks: IdBlocks | None = None,
    ) -> None:
        """``blocks``: the positions reserved in the precious store (rule 9); None: no
        high-water mark, the counter alone (tests, benchmarks, read-only commands)."""
        if ttl_seconds <= 0:
            raise BadInputError("msgid_ttl_seconds", ttl_seconds, "must be positive")
        self.store = store
        self._blocks = blocks or _NO_MARK
        self._clock = clock
        self._ttl_ms = int(ttl_seconds * 1000)
        self._keep_content = keep_content  # idmap.keep_message_content (rule 6)
        self._log = log.bind()
        # the reply choice's walks per chat, dropped by each inbound store of the chat
        self.walks = WalkMemo(self._now_ms)
        self._store_count = itertools.count(1)
        self._inbound_stores = 0

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def memory_tables(self) -> list[Named]:
        """Its in-memory table (:mod:`gensokyo_idmap.tables`): the walks of rule 7."""
        return [("reply_walks", self.walks)]

    async def store_real(self, real_id: str, context: MsgContext | None = None, *,
                         alone: bool = False) -> int:
        """The virtual id of ``real_id`` (the same one while it lives; TTL refreshed).

        The write joins the transaction of everything stored during this turn of the event
        loop (one commit for a flood of messages), which costs the caller a wait of one
        turn. ``alone=True`` commits it in a transaction of its own at once instead: for a
        lone write someone is waiting on. (The id of a message just sent, which the
        framework's action answer carries, joins the turn's transaction: with many sends in
        flight they share one commit, and the wait of one turn is short.)
        """
        store, ctx = self._store_fn(real_id, context)
        stored = self.store.transact(store) if alone else await self.store.write(store)
        return self._stored(real_id, ctx, *stored)

    async def store_many(self, items: Sequence[tuple[str, MsgContext]]) -> list[int]:
        """The virtual ids of several real ids (a batch of inbound events), in order.

        One write function for the batch (one future, one outcome): it joins the
        transaction of this turn of the loop like any write. A store that fails (no free
        id) writes nothing of its own and does not stop the others; the first such error
        is raised once every outcome is known.
        """
        stores = [self._store_fn(real_id, context) for real_id, context in items]

        def store_all(view: MsgIdWriter) -> list[tuple[int, bool] | IdmapError]:
            outcomes: list[tuple[int, bool] | IdmapError] = []
            for store, _ in stores:
                try:
                    outcomes.append(store(view))
                except IdmapError as exc:  # raised before that store wrote anything
                    outcomes.append(exc)
            return outcomes

        outcomes = await self.store.write(store_all) if stores else []
        failed = next((o for o in outcomes if isinstance(o, IdmapError)), None)
        if failed is not None:
            raise failed
        return [self._stored(real_id, ctx, *cast(tuple[int, bool], outcome))
                for (real_id, _), (_, ctx), outcome in zip(items, stores, outcomes, strict=True)]

    def store_real_sync(self, real_id: str, context: MsgContext | None = None) -> int:
        """Blocking :meth:`store_real`, for code without an event loop (CLI, compat)."""
        store, ctx = self._store_fn(real_id, context)
        return self._stored(real_id, ctx, *self.store.write_sync(store))

    def _store_fn(self, real_id: str, context: MsgContext | None
                  ) -> tuple[Callable[[MsgIdWriter], tuple[int, bool]], MsgContext]:
        """The checked write function of a store, and the context it records."""
        _check_real_id(real_id)
        ctx = context or MsgContext()
        now_ms = self._now_ms()

        def store(view: MsgIdWriter) -> tuple[int, bool]:
            if ctx.direction == "in":
                self._inbound_stored(ctx)
            return _apply_store(view, real_id, ctx, now_ms, self._ttl_ms, self._keep_content,
                                self._blocks)

        return store, ctx

    def _stored(self, real_id: str, ctx: MsgContext, virtual_id: int, hit: bool) -> int:
        if ctx.direction == "in":
            self._inbound_stored(ctx)
        return stored(self._log, real_id, ctx, virtual_id, hit)

    def lookup(self, virtual_id: int) -> MsgRecord | None:
        """The live record of a virtual id, or None (expired ones are invisible)."""
        vid = check_virtual_id(virtual_id)
        with self.store.read() as view:
            record = _alive(view.record(vid), self._now_ms())
        return looked_up(self._log, vid, record)

    def lookup_content(self, virtual_id: int) -> tuple[MsgRecord, MsgContent | None] | None:
        """The live record of a virtual id and the author and content kept beside it (None:
        none were, e.g. a record from before they were kept), in one read; None when the id
        is unknown or expired."""
        vid = check_virtual_id(virtual_id)
        with self.store.read() as view:
            record = _alive(view.record(vid), self._now_ms())
            content = None if record is None else view.content(vid)
        looked_up(self._log, vid, record)
        return None if record is None else (record, content)

    def real_id_of(self, virtual_id: int) -> str:
        """The real id of a live virtual id; NotFoundError names the id otherwise."""
        return real_id_of(virtual_id, self.lookup(virtual_id))

    def virtual_of(self, real_id: str) -> int | None:
        """The live virtual id of a real id, without creating one."""
        _check_real_id(real_id)
        now_ms = self._now_ms()
        with self.store.read() as view:
            return live_virtual_id(real_id, view.virtual_of(real_id), view.record, now_ms)

    def quoted(self, app_id: str, chat_kind: str, target: str, msg_idx: str) -> int | None:
        """The live virtual id of the message of this chat whose ``msg_idx`` a quote names
        (rule 8), or None: never stored, expired, or its key handed on."""
        key = quote_key(app_id, chat_kind, target, msg_idx)
        if key is None:
            return None
        now_ms = self._now_ms()
        with self.store.read() as view:
            return live_alias(key, view.virtual_of(key),
                              lambda vid: (view.record(vid), view.content(vid)), now_ms)

    def latest_inbound(
        self, app_id: str, chat_kind: str, target: str, window_seconds: float,
        before: MsgRecord | None = None,
    ) -> MsgRecord | None:
        """The newest inbound message of a chat created within the window (passive replies).

        One cursor seek on ``chat_recent``, whatever the store holds; it steps back only over
        this chat's expired-but-unswept messages. ``before`` asks for the next older one
        (a message whose replies are used up).
        """
        now_ms = self._now_ms()
        with self.store.read() as view:
            return view.latest_inbound(
                app_id, chat_kind, target, now_ms, now_ms - int(window_seconds * 1000), before
            )

    def inbound_walk(self, app_id: str, chat_kind: str, target: str, window_seconds: float
                     ) -> AbstractContextManager[InboundWalk]:
        """:meth:`latest_inbound` of one chat as often as a reply choice asks, below a
        position ((created ms, virtual id); None: the newest), all in one read snapshot:
        the transaction costs more than the seek; answered from the chat's last walks
        where rule 7 lets them stand (then no transaction at all)."""
        now_ms = self._now_ms()
        return _Walking(self, (app_id, chat_kind, target), now_ms,
                        now_ms - int(window_seconds * 1000))

    def _remember(self, chat: _ChatKey, answers: _Answers, at: tuple[int, int] | None,
                  found: MsgRecord | None, now_ms: int) -> None:
        """Keep a walk's answer for the chat's next walks (:class:`_Walking`)."""
        if len(answers) >= _WALK_MEMO_ANSWERS:
            answers.clear()
        answers[at] = found
        walks = self.walks
        if walks.get(chat, (0, None))[1] is not answers:
            if len(walks) >= _WALK_MEMO_CHATS:
                walks.clear()
            walks[chat] = (now_ms + _WALK_MEMO_MS, answers)

    def _inbound_stored(self, context: MsgContext) -> None:
        """An inbound message of ``context``'s chat is being (or was just) stored: its walk
        answers are of no more use, and walks under way keep none of theirs. Called before
        the write and again after its commit, so a walk that read in between keeps nothing
        either."""
        self._inbound_stores = next(self._store_count)
        self.walks.pop((context.app_id, context.chat_kind, context.target), None)

    def newest_inbound(self, app_id: str, chat_kinds: Sequence[str],
                       target: str) -> tuple[int, int] | None:
        """(created ms, virtual id) of the newest live inbound record of a chat under any of
        ``chat_kinds`` (its messages and its reply-able events), or None: when the chat last
        spoke, as far as this store still knows, for the reverse path's recency. The virtual
        id orders records of one millisecond (one batch allocates them in arrival order).
        One cursor seek per kind, in one snapshot.
        """
        now_ms = self._now_ms()
        with self.store.read() as view:
            return newest_of([view.latest_inbound(app_id, kind, target, now_ms, 0)
                              for kind in chat_kinds])

    def recent(self, before: tuple[int, int] | None, limit: int
               ) -> list[tuple[MsgRecord, MsgContent | None]]:
        """Up to ``limit`` live messages (in and out) with what was kept of them, the
        newest created first, each created before ``before`` ((created ms, virtual id);
        None: from the newest): one walk back on the ``recent`` index, in one snapshot,
        stepping over at most :data:`RECENT_SCAN` entries past their expiry."""
        now_ms = self._now_ms()
        with self.store.read() as view:
            return [(record, view.content(record.virtual_id))
                    for record in view.recent(before, now_ms, limit, limit + RECENT_SCAN)]

    async def sweep(self) -> int:
        """Delete every expired triple; returns how many. Cost grows with what expired.

        It runs in a worker thread: a sweep of many entries is batches of 128 deletes,
        which must not hold up the event loop (this store's writes otherwise commit on it).
        """
        return await asyncio.to_thread(self.sweep_sync)

    def sweep_sync(self) -> int:
        """Blocking :meth:`sweep`; it also deletes the expired delivery claims (:mod:`.claims`)
        this store keeps. Returns how many message ids it deleted."""
        now_ms = self._now_ms()
        started = time.perf_counter()
        total = self._sweep_all(_apply_sweep, now_ms)
        claims = self._sweep_all(_apply_claim_sweep, now_ms)
        _count_sweep(total, time.perf_counter() - started)
        # a sweep that deleted nothing (every minute of a quiet day) is not news
        (self._log.info if total or claims else self._log.debug)(
            "[idmap] msg_id sweep", swept=total, claims_swept=claims,
            seconds=round(time.perf_counter() - started, 6))
        return total

    def _sweep_all(self, sweep: Callable[[MsgIdWriter, int, int], int], now_ms: int) -> int:
        """Run ``sweep`` in transactions of at most 128 deletes until one finds fewer."""
        total = 0
        while True:
            swept = self.store.write_sync(lambda view: sweep(view, now_ms, _SWEEP_BATCH))
            total += swept
            if swept < _SWEEP_BATCH:
                return total

    def counts(self) -> MsgIdCounts:
        """Records held and the last virtual id handed out (the counter holds its
        position: rule 1)."""
        with self.store.read() as view:
            counts = view.counts()
        return replace(counts, counter=counts.counter and virtual_id_at(counts.counter))

    async def run_sweeper(
        self, stop: asyncio.Event, interval_seconds: float = DEFAULT_SWEEP_INTERVAL_SECONDS
    ) -> None:
        """Sweep every ``interval_seconds`` until ``stop`` is set."""
        async for _ in every(interval_seconds, stop):
            try:
                await self.sweep()
            except StoreError as err:
                self._log.error("[idmap] msg_id sweep failed", reason=err.message)

