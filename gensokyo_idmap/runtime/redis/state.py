"""The runtime state of several daemons on one Redis: message ids, delivery claims and
passive-reply counts (``idmap.runtime_backend: redis``).

The same rules as on LMDB, shared rather than copied: requests are checked by
:mod:`gensokyo_idmap.runtime.msgid` (real ids, virtual ids, contexts) and a record is alive by the
same comparison with the same clock; what differs is where the state lives
(:mod:`gensokyo_idmap.runtime.redis.scripts`: Lua scripts and native TTL, no sweeper).

Redis holds nothing that cannot be lost, so a Redis that does not answer degrades the
daemon instead of stopping it (:class:`~gensokyo_idmap.runtime.redis.connection.RedisRuntime`
logs the outage once):

- storing a message id raises :class:`~gensokyo_idmap.errors.StoreError`: the event is
  not acknowledged and the platform sends it again, so it is never lost;
- a lookup finds nothing (an unknown message id, no message to reply to: a send goes out
  without a passive-reply id, and the platform says whether it takes that);
- de-duplication knows only what this daemon's memory holds, and claims are not shared;
- reply counts are this daemon's own (:class:`ReplyBudget`'s memory), as before Redis.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar, cast

import redis
import structlog

from gensokyo_idmap.errors import BadInputError, StoreError
from gensokyo_idmap.runtime.base import MsgContent, MsgIdCounts, MsgRecord
from gensokyo_idmap.runtime.blocks import IdBlocks
from gensokyo_idmap.runtime.claims import DEDUP_SECONDS, stored_key
from gensokyo_idmap.runtime.msgid import (
    DEFAULT_MSGID_TTL_SECONDS,
    DEFAULT_SWEEP_INTERVAL_SECONDS,
    EVENT_KINDS,
    RECENT_SCAN,
    InboundWalk,
    MsgContext,
    _alive,
    _check_real_id,
    _position,
    check_virtual_id,
    live_alias,
    live_virtual_id,
    looked_up,
    newest_of,
    quote_key,
    real_id_of,
    stored,
)
from gensokyo_idmap.runtime.redis.scripts import RedisMsgIds, Stored, StoreItem
from gensokyo_idmap.runtime.redis.trips import Together, concatenated, distinct, own, whole
from gensokyo_idmap.runtime.replies import (
    _LONGEST_WINDOW,
    MAX_REPLIES,
    REPLY_WINDOW_SECONDS,
    Newest,
    Received,
    ReplyBudget,
)

__all__ = [
    "IN_FLIGHT_SECONDS",
    "RENEWED_FOR_AT_MOST_SECONDS",
    "RENEW_EVERY_SECONDS",
    "RedisClaims",
    "RedisMsgIdMap",
    "RedisReplyBudget",
]

log = structlog.get_logger("gensokyo_idmap.msgid")

T = TypeVar("T")
M = TypeVar("M", bound=Received)

#: The lease of an in-flight mark: how long an event stays marked on the daemon delivering
#: it unless that daemon renews the mark. A daemon killed mid-delivery renews nothing, so
#: its events are free for another daemon this long after its last renewal at most.
IN_FLIGHT_SECONDS = 3.0
#: How often a daemon renews the leases of every delivery it has in flight (one script for
#: all): a renewal may come this much short of :data:`IN_FLIGHT_SECONDS` late before a
#: lease lapses under a delivery that is still alive.
RENEW_EVERY_SECONDS = 1.0
#: A mark is renewed for this long at most. No delivery takes so long (each framework gets
#: a few seconds, then the event is owed in the outbox); a mark held longer was lost track
#: of (its batch was cancelled before it was decided), and is let lapse.
RENEWED_FOR_AT_MOST_SECONDS = 120.0
_DEDUP_OFF = ("de-duplication across daemons is off until Redis answers: a repeat seen by "
              "another daemon may be delivered again")
_LEASES_LAPSE = ("in-flight marks are not renewed until Redis answers: another daemon may "
                 "deliver a retry of an event being delivered here")
_NOT_ACKNOWLEDGED = ("events are not acknowledged until Redis answers (the platform sends "
                     "them again)")
_COUNTS_OWN = "reply counts are this daemon's own until Redis answers"
_LOOKUP_FAILED = "message ids are unknown until Redis answers: replies go out without a " \
                 "passive-reply id, recalls and lookups of earlier messages fail"


#: Blocks one store may take before it is "no free id" (the probes of an item start again
#: in each block; a store takes a second block only when the first runs out under it).
_BLOCKS_PER_STORE = 8


#: How long a message of each msgid-map chat kind can be replied to (its messages and its
#: reply-able events), in ms: how long it stays a candidate of the reply choice on Redis.
_REPLY_WINDOWS_MS = {kind: int(seconds * 1000)
                     for chat, seconds in REPLY_WINDOW_SECONDS.items()
                     for kind in (chat, EVENT_KINDS[chat])}


class RedisMsgIdMap:
    """:class:`~gensokyo_idmap.runtime.msgid.MessageIds` on Redis, shared by every daemon using
    the same prefix. No sweeper: every key has a native TTL. Its ids come from blocks of
    positions of its own (:mod:`~gensokyo_idmap.runtime.blocks`), its place in them kept in
    its memory: a Redis that loses its keys does not send them back."""

    def __init__(self, ids: RedisMsgIds, clock: Callable[[], float] = time.time,
                 ttl_seconds: float = DEFAULT_MSGID_TTL_SECONDS, *,
                 keep_content: bool = True, blocks: IdBlocks | None = None) -> None:
        """``blocks``: the positions this daemon reserved in the precious store; None: no
        high-water mark (tests, benchmarks)."""
        if ttl_seconds <= 0:
            raise BadInputError("msgid_ttl_seconds", ttl_seconds, "must be positive")
        self.ids = ids
        self._blocks = blocks or IdBlocks(None)
        self._position = 0  # the last position this daemon used (blocks rule 1)
        self._keep_content = keep_content  # idmap.keep_message_content
        self.store = ids.runtime  # what /healthz asks
        self._clock = clock
        self._ttl_ms = int(ttl_seconds * 1000)
        self._log = log.bind()
        # stores asked for while one is on the wire go out together in the next script
        self._stores: Together[StoreItem, list[tuple[int, bool] | None],
                                list[tuple[int, bool] | None]] = Together(
            self._store_blocks, concatenated, own)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    async def ask_at_start(self) -> None:
        """A ``PING`` as the daemon starts: a Redis down then is an outage from the start,
        logged once now (and known to every caller), not found out by the first event;
        the daemon runs degraded and goes back to Redis by itself, as after any outage."""
        await self.store.softly_awaited(self.store.ping, None, _NOT_ACKNOWLEDGED)

    async def _store_blocks(self, wanted: list[StoreItem]) -> list[tuple[int, bool] | None]:
        """Store ``wanted`` from this daemon's blocks, one script per block they take (a
        reservation it waits for on a worker thread: a durable write elsewhere)."""
        outcomes: list[tuple[int, bool] | None] = []
        for _ in range(_BLOCKS_PER_STORE):
            if self._position >= self._blocks.soon:
                await asyncio.to_thread(self._advance)
            if self._took(wanted, outcomes, await self.ids.store(*self._script(wanted, outcomes))):
                break
        return outcomes + [None] * (len(wanted) - len(outcomes))

    def _store_blocks_sync(self, wanted: list[StoreItem]) -> list[tuple[int, bool] | None]:
        """Blocking :meth:`_store_blocks`."""
        outcomes: list[tuple[int, bool] | None] = []
        for _ in range(_BLOCKS_PER_STORE):
            if self._position >= self._blocks.soon:
                self._advance()
            if self._took(wanted, outcomes, self.ids.store_sync(*self._script(wanted, outcomes))):
                break
        return outcomes + [None] * (len(wanted) - len(outcomes))

    def _advance(self) -> None:
        """Past half the block: the next one asked for; past its end: the next one's start
        (blocks rule 4)."""
        self._position = self._blocks.advance(self._position + 1) - 1

    def _script(self, wanted: list[StoreItem], outcomes: list[tuple[int, bool] | None]
                ) -> tuple[list[StoreItem], int, int, tuple[int, int]]:
        """The arguments of the next store script: the items not stored yet, from here to
        the end of the block."""
        return (wanted[len(outcomes):], self._now_ms(), self._ttl_ms,
                (self._position, self._blocks.limit))

    def _took(self, wanted: list[StoreItem], outcomes: list[tuple[int, bool] | None],
              answer: Stored) -> bool:
        """Note a script's answer; whether every item has its outcome now."""
        self._position, done = answer
        outcomes += done
        return len(outcomes) == len(wanted)

    # --- stores ---------------------------------------------------------------------------

    def _items(self, items: Sequence[tuple[str, MsgContext | None]]
               ) -> tuple[list[StoreItem], list[MsgContext]]:
        contexts = []
        wanted: list[StoreItem] = []
        for real_id, context in items:
            _check_real_id(real_id)
            ctx = context or MsgContext()
            contexts.append(ctx)
            window = _REPLY_WINDOWS_MS.get(ctx.chat_kind, 0) if ctx.direction == "in" else 0
            content = ctx.content(self._keep_content)
            author = 0 if content is None else content.author
            text = None if content is None else content.message
            alias = None if content is None else content.alias
            wanted.append((real_id, ctx.app_id, ctx.chat_kind, ctx.target, ctx.direction,
                           window, author, int(text is not None), text or "", alias or ""))
        return wanted, contexts

    def _outcomes(self, wanted: list[StoreItem], contexts: list[MsgContext],
                  outcomes: list[tuple[int, bool] | None]) -> list[int]:
        if any(outcome is None for outcome in outcomes):
            raise StoreError("no free virtual message id within the probes of the counter")
        return [stored(self._log, item[0], ctx, *cast(tuple[int, bool], outcome))
                for item, ctx, outcome in zip(wanted, contexts, outcomes, strict=True)]

    def _unavailable(self, exc: BaseException | None = None) -> StoreError:
        if exc is not None:
            self.store.failed(exc, _NOT_ACKNOWLEDGED)
        return StoreError("redis: message ids cannot be stored now "
                          f"({self.store.health() or 'unreachable'})")

    async def store_real(self, real_id: str, context: MsgContext | None = None, *,
                         alone: bool = False) -> int:
        """As :meth:`MsgIdMap.store_real`; every store is its own atomic script here."""
        [virtual_id] = await self.store_many([(real_id, context or MsgContext())])
        return virtual_id

    async def store_many(self, items: Sequence[tuple[str, MsgContext]]) -> list[int]:
        """As :meth:`MsgIdMap.store_many`, in one atomic script (one round trip) with the
        stores of every other caller asked for while the previous script was on the wire
        (each webhook call stores one event: one script per event cost more than the
        event's other work together). The script takes the items in the order the calls
        came, so each chat keeps its order, and hands each caller its own ids. A Redis
        that does not answer raises :class:`StoreError` for every caller of the script
        (not acknowledged: the platform sends those events again)."""
        wanted, contexts = self._items(items)
        if not wanted:
            return []
        if not self.store.available():
            raise self._unavailable()
        try:
            outcomes = await self._stores(wanted)
        except redis.RedisError as exc:
            raise self._unavailable(exc) from exc
        self.store.answered()
        return self._outcomes(wanted, contexts, outcomes)

    def store_real_sync(self, real_id: str, context: MsgContext | None = None) -> int:
        wanted, contexts = self._items([(real_id, context)])
        try:
            outcomes = self._store_blocks_sync(wanted)
        except redis.RedisError as exc:
            raise self._unavailable(exc) from exc
        self.store.answered()
        [virtual_id] = self._outcomes(wanted, contexts, outcomes)
        return virtual_id

    # --- reads (synchronous callers; nothing found while Redis is down) -------------------

    def lookup(self, virtual_id: int) -> MsgRecord | None:
        vid = check_virtual_id(virtual_id)
        record = self.store.softly(lambda: self.ids.record(vid), None, _LOOKUP_FAILED)
        return looked_up(self._log, vid, _alive(record, self._now_ms()))

    def lookup_content(self, virtual_id: int) -> tuple[MsgRecord, MsgContent | None] | None:
        vid = check_virtual_id(virtual_id)
        nothing: tuple[MsgRecord | None, MsgContent | None] = (None, None)
        record, content = self.store.softly(lambda: self.ids.record_and_content(vid),
                                            nothing, _LOOKUP_FAILED)
        record = looked_up(self._log, vid, _alive(record, self._now_ms()))
        return None if record is None else (record, content)

    def real_id_of(self, virtual_id: int) -> str:
        return real_id_of(virtual_id, self.lookup(virtual_id))

    def virtual_of(self, real_id: str) -> int | None:
        _check_real_id(real_id)
        now_ms = self._now_ms()

        return self.store.softly(lambda: live_virtual_id(
            real_id, self.ids.virtual_of(real_id), self.ids.record, now_ms), None,
            _LOOKUP_FAILED)

    def quoted(self, app_id: str, chat_kind: str, target: str, msg_idx: str) -> int | None:
        key = quote_key(app_id, chat_kind, target, msg_idx)
        if key is None:
            return None
        now_ms = self._now_ms()
        return self.store.softly(lambda: live_alias(
            key, self.ids.virtual_of(key), self.ids.record_and_content, now_ms), None,
            _LOOKUP_FAILED)

    def latest_inbound(self, app_id: str, chat_kind: str, target: str, window_seconds: float,
                       before: MsgRecord | None = None) -> MsgRecord | None:
        now_ms = self._now_ms()
        since_ms = now_ms - int(window_seconds * 1000)
        return self.store.softly(lambda: self.ids.latest_inbound(
            app_id, chat_kind, target, now_ms, since_ms, before), None, _LOOKUP_FAILED)

    @contextmanager
    def inbound_walk(self, app_id: str, chat_kind: str, target: str, window_seconds: float
                     ) -> Iterator[InboundWalk]:
        """As :meth:`MsgIdMap.inbound_walk`, a script per step (the reply choice on Redis
        is :meth:`RedisReplyBudget.take_newest`'s own script, which walks nothing here)."""
        def below(at: tuple[int, int] | None) -> MsgRecord | None:
            return self.latest_inbound(app_id, chat_kind, target, window_seconds,
                                       None if at is None else _position(at))

        yield below

    def newest_inbound(self, app_id: str, chat_kinds: Sequence[str],
                       target: str) -> tuple[int, int] | None:
        now_ms = self._now_ms()
        return self.store.softly(lambda: newest_of(
            [self.ids.latest_inbound(app_id, kind, target, now_ms, 0) for kind in chat_kinds]),
            None, _LOOKUP_FAILED)

    def recent(self, before: tuple[int, int] | None, limit: int
               ) -> list[tuple[MsgRecord, MsgContent | None]]:
        """As :meth:`MsgIdMap.recent`, from the ``m:l`` list (nothing while Redis is
        down)."""
        now_ms = self._now_ms()
        return self.store.softly(lambda: self.ids.recent(before, now_ms, limit,
                                                         limit + RECENT_SCAN),
                                 [], _LOOKUP_FAILED)

    def counts(self) -> MsgIdCounts:
        """Counter and records still in Redis (a ``SCAN`` of the prefix: for stats only)."""
        try:
            return self.ids.counts()
        except redis.RedisError as exc:
            raise StoreError(f"redis: cannot count message ids: {exc}") from exc

    # --- no sweeper: native TTL -----------------------------------------------------------

    async def sweep(self) -> int:
        return 0

    def sweep_sync(self) -> int:
        return 0

    async def run_sweeper(self, stop: asyncio.Event,
                          interval_seconds: float = DEFAULT_SWEEP_INTERVAL_SECONDS) -> None:
        await stop.wait()


class RedisClaims:
    """Delivery claims on Redis (:class:`~gensokyo_idmap.runtime.claims.ClaimStore`): shared
    by every daemon on the prefix, so a webhook retry landing on another daemon is a known
    repeat, or refused while the first daemon still delivers it (claims rule 6). Redis
    down: nothing is known, marked or recorded (this daemon's memory still de-duplicates
    what it saw itself).

    An in-flight mark is a lease: it lapses :data:`IN_FLIGHT_SECONDS` after it was set
    unless renewed, and this daemon renews every mark it holds (those it set and has not
    yet turned into a claim or dropped) every :data:`RENEW_EVERY_SECONDS`, in one script for
    all, by a task that runs while it holds any. A renewal extends only a mark still under
    this daemon's token. So a live delivery keeps its mark however long it takes, and a
    daemon that dies frees its events within :data:`IN_FLIGHT_SECONDS`. A renewal later
    than the lease (Redis slow or down, the loop stalled) lets another daemon deliver a
    retry of the event while this one still does: a repeat after a fault, never a loss.
    The lease is compared with each daemon's own clock, as every expiry on Redis is: the
    daemons' clocks must agree within a second (NTP does), or one ahead may take a live
    delivery over, again a repeat.
    """

    shared = True

    def __init__(self, ids: RedisMsgIds, window: float = DEDUP_SECONDS,
                 clock: Callable[[], float] = time.time,
                 in_flight_seconds: float = IN_FLIGHT_SECONDS,
                 renew_every: float = RENEW_EVERY_SECONDS) -> None:
        self._ids = ids
        self._runtime = ids.runtime
        self._window_ms = int(window * 1000)
        self._in_flight_ms = int(in_flight_seconds * 1000)
        self._renew_every = renew_every
        self._clock = clock
        self._token = f"busy:{uuid.uuid4().hex}"  # this daemon's in-flight marks
        # stored key → (which mark, when set) of each mark this daemon holds (renewed)
        self._held: dict[str, tuple[int, float]] = {}
        self._marks = itertools.count()
        self._renewer: asyncio.Task[None] | None = None
        self._start: Together[str, tuple[set[str], set[str]], tuple[set[str], set[str]]] = \
            Together(lambda keys: self._ids.start_claims(
                keys, int(self._clock() * 1000), self._in_flight_ms, self._token),
                distinct, whole)
        self._record: Together[str, None, None] = Together(
            lambda keys: self._ids.put_claims(
                keys, int(self._clock() * 1000) + self._window_ms, self._window_ms),
            distinct, whole)

    async def known(self, keys: Sequence[str]) -> set[str]:
        stored = {stored_key(key): key for key in keys}
        nothing: set[str] = set()
        alive = await self._runtime.softly_awaited(lambda: self._ids.claims_alive(
            list(stored), int(self._clock() * 1000)), nothing, _DEDUP_OFF)
        return {stored[key] for key in alive}

    async def start(self, keys: Sequence[str]) -> tuple[set[str], set[str]]:
        stored = {stored_key(key): key for key in keys}

        async def mark() -> tuple[set[str], set[str]]:
            done, busy = await self._start(list(stored))
            self._hold([key for key in stored if key not in done and key not in busy])
            return done, busy

        nothing: tuple[set[str], set[str]] = (set(), set())
        done, busy = await self._runtime.softly_awaited(mark, nothing, _DEDUP_OFF)
        return ({key for mine, key in stored.items() if mine in done},
                {key for mine, key in stored.items() if mine in busy})

    def held_for(self) -> float:
        """Not asked (every daemon on the prefix claims there): the window."""
        return self._window_ms / 1000

    def abandon(self, keys: Sequence[str]) -> None:
        stored = self._let_go(keys)
        self._runtime.softly(lambda: self._ids.abandon_claims(stored, self._token), None,
                             _DEDUP_OFF)

    async def record(self, keys: Sequence[str]) -> None:
        stored = self._let_go(keys)
        if stored:
            await self._runtime.softly_awaited(
                lambda: self._record(stored), None,
                "delivery claims are not shared until Redis answers")

    # --- the leases of the marks held here ------------------------------------------------

    def _hold(self, stored: list[str]) -> None:
        """Renew the marks just set on ``stored`` from now on (a mark set again counts
        anew); the renewing task runs while any is held."""
        if not stored:
            return
        now = self._clock()
        for key in stored:
            self._held[key] = (next(self._marks), now)
        loop = asyncio.get_running_loop()
        renewer = self._renewer
        if renewer is None or renewer.done() or renewer.get_loop() is not loop:
            self._renewer = loop.create_task(self._keep_renewing())

    def _let_go(self, keys: Sequence[str]) -> list[str]:
        """``keys`` as stored, no longer renewed here (claimed, or dropped)."""
        stored = [stored_key(key) for key in keys]
        for key in stored:
            self._held.pop(key, None)
        return stored

    def holds(self, key: str) -> bool:
        """Whether this daemon renews the mark of ``key`` (tests, diagnostics)."""
        return stored_key(key) in self._held

    async def _keep_renewing(self) -> None:
        while self._held:
            await asyncio.sleep(self._renew_every)
            await self.renew()

    async def renew(self) -> None:
        """Extend the lease of every mark held here, in one script (the task calls this
        every :data:`RENEW_EVERY_SECONDS`). A mark found no longer under this daemon's
        token lapsed, and another daemon may have taken its event: not held any more,
        logged."""
        now = self._clock()
        oldest = now - RENEWED_FOR_AT_MOST_SECONDS
        sent = {key: held for key, held in self._held.items() if held[1] >= oldest}
        if len(sent) < len(self._held):
            log.warning("[message] in-flight marks held too long are let lapse",
                        count=len(self._held) - len(sent),
                        limit_seconds=RENEWED_FOR_AT_MOST_SECONDS)
            self._held = dict(sent)
        if not sent:
            return
        unanswered: set[str] | None = None
        lost = await self._runtime.softly_awaited(
            lambda: self._ids.renew_claims(list(sent), int(now * 1000), self._in_flight_ms,
                                           self._token), unanswered, _LEASES_LAPSE)
        if lost is None:
            return
        lapsed = 0
        for key in lost:  # unless marked again meanwhile (a later mark's own lease)
            if self._held.get(key) == sent[key]:
                del self._held[key]
                lapsed += 1
        if lapsed:
            log.warning("[message] in-flight marks lapsed before their deliveries ended",
                        count=lapsed, effect="another daemon may deliver a retry of those "
                        "events as well", reason="the renewals came later than the lease")


class RedisReplyBudget(ReplyBudget):
    """Replies per ``msg_id`` / ``event_id`` counted across daemons on Redis, so a message
    answered five times through daemon A is known spent on daemon B. Each daemon keeps its
    own ``msg_seq`` offset (``seq_base``), so two daemons never send the same pair. Redis
    down: this daemon's own counts, as :class:`ReplyBudget` keeps them."""

    def __init__(self, ids: RedisMsgIds, limit: int = MAX_REPLIES, seq_base: int = 0,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time, *, scope: str = "") -> None:
        """``scope``: what this budget's counts are kept under on Redis, so that each bot
        of a daemon counts its own replies (``<AppID>:`` with ``bots``; one bot's counts
        are named as they always were)."""
        super().__init__(limit=limit, seq_base=seq_base, clock=clock)
        self._ids = ids
        self._scope = scope
        self._runtime = ids.runtime
        self._wall_clock = wall_clock  # the message ids' clock: their created / expires ms

    def take_newest(self, chat: tuple[str, str, str], newest: Newest[M],
                    window: float = _LONGEST_WINDOW) -> tuple[str, int] | None:
        """As :meth:`ReplyBudget.take_newest`, the choice and the count in one script on
        Redis (:meth:`RedisMsgIds.take_newest`: spent messages leave the chat's candidates
        there, whichever daemon spent them). Redis down: nothing to answer (its message ids
        are unknown then, as :meth:`RedisMsgIdMap.latest_inbound` says)."""
        now_ms = int(self._wall_clock() * 1000)
        window_ms = int(window * 1000)
        taken = self._runtime.softly(lambda: self._ids.take_newest(
            *chat, now_ms, now_ms - window_ms, self.limit, window_ms, self._scope), None,
            _COUNTS_OWN)
        if taken is None:
            return None
        real_id, used = taken
        super().take(real_id, window)  # this daemon's own count, for when Redis goes away
        return real_id, self.seq_base + used

    def used(self, reference: str) -> int:
        shared = self._runtime.softly(lambda: self._ids.replies_used(self._scope + reference),
                                      None, _COUNTS_OWN)
        return super().used(reference) if shared is None else shared

    def take(self, reference: str | None, window: float = _LONGEST_WINDOW) -> int:
        local = super().take(reference, window)
        if reference is None:
            return local
        shared = self._runtime.softly(
            lambda: self._ids.take_reply(self._scope + reference, int(window * 1000)), None,
            _COUNTS_OWN)
        return local if shared is None else self.seq_base + shared

    def use_up(self, reference: str, window: float = _LONGEST_WINDOW) -> None:
        super().use_up(reference, window)
        self._runtime.softly(lambda: self._ids.set_replies(
            self._scope + reference, max(self.limit, 1), int(window * 1000)), None,
            _COUNTS_OWN)
