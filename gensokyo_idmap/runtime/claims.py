"""Delivery claims: the same platform event is processed once, however it arrives.

The platform may push a message twice, the gateway replays after a Resume (and after a
restart, from the last seq saved), webhook and gateway may both run, and a captured webhook
callback may be sent again. An event is known by a delivery key, its message id (``d.id``)
or, for other events, its envelope id (:func:`gensokyo_idmap.bridge.dedup.delivery_key`:
what an event is belongs to the platform side, what a claim is to this module).

Rules:

1. **Claimed in memory first.** :class:`DeliveryLog` remembers the keys it handed out for
   a window, bounded in count; a repeat of an event still in flight waits for the first
   delivery's outcome.
2. **Claimed durably after delivery, before the acknowledgement.** Once an event was
   delivered or durably owed to every framework, its key goes to the message-id store
   (:class:`DurableClaims`) before the source is told "done" (webhook 200, gateway seq
   saved): the write joins the transaction every other write of that turn of the event
   loop shares. Never sooner: a claim committed before the delivery was, followed by a
   crash, would make the platform's redelivery look like a repeat, and the event would be
   lost.
3. **A failed delivery is forgotten**, in memory, and it was never claimed durably: a
   redelivery tries again.
4. **Claims outlive restarts for the window.** A key not in memory is looked up in the
   store (one read for a batch) while that can find something memory does not hold: after
   start, until the last claim an earlier process left there has expired (not at all when
   it left none alive), and for a window after memory dropped an entry for room. Otherwise
   memory holds every claim still alive (an entry is kept for the window from when its
   delivery finished, which is after its claim was committed), and the hot path does not
   read the store. A store that other daemons claim in as well (``ClaimStore.shared``:
   Redis) is read for every key memory lacks.
5. **The window follows the webhook's max age**: at least :data:`DEDUP_SECONDS`, and at
   least as long as a callback stays acceptable after it was first received
   (``max_age_seconds`` plus the clock skew allowed ahead), so any replay the webhook lets
   through is a known repeat (:func:`gensokyo_idmap.bridge.dedup.window_seconds`: the
   webhook's limits are the platform side's).
6. **In flight on another daemon means not now.** A store shared by several daemons
   (Redis) also marks each event in flight where it is being delivered: a lease of a few
   seconds that daemon renews while the delivery lasts, so a daemon that dies
   mid-delivery holds nothing for long, and a live one however long it takes. A repeat
   arriving at another daemon meanwhile (the platform retries a webhook call that was
   slow to answer) is refused, not acknowledged: the platform sends it again, and by then
   it is claimed, or free again because the delivery failed or its daemon died. Never
   delivered twice by live daemons, never lost; a renewal that comes later than the lease
   (Redis slow) may let a second daemon deliver it too, a repeat after a fault.
7. **A failed delivery drops its mark only if no other batch here is looking the event
   up.** The marks are this daemon's (one token), so a second batch of the same event
   that looked it up while the first was out (a repeat read before the first was decided)
   marked it again, and decides after its look: if the first failed meanwhile, it delivers
   the event itself, relying on that mark. Dropping the mark then would let another
   daemon deliver a platform retry of it at the same time. So while a look that includes
   the key is under way here (from its call until its batch was decided) the mark stays;
   whoever delivers next drops it (failure) or turns it into a claim (success), and a
   daemon that dies first holds it only until the mark's lease lapses.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Sequence
from typing import Final, Protocol

from gensokyo_idmap.errors import StoreError
from gensokyo_idmap.runtime.base import MsgIdStore, MsgIdWriter
from gensokyo_idmap.runtime.key_times import KeyTimes
from gensokyo_idmap.tables import Named, compacted, estimate

__all__ = [
    "DEDUP_SECONDS",
    "ClaimStore",
    "DeliveryLog",
    "DurableClaims",
    "stored_key",
]

DEDUP_SECONDS: Final = 300.0
_DEDUP_MAX: Final = 100_000
#: How often at most the entries past their window are dropped (each is known to be past it
#: at once: see :class:`DeliveryLog`).
SWEEP_SECONDS: Final = 10.0
_NEVER: Final = float("-inf")
_STORED_KEY_BYTES: Final = 200  # the store's limit for a key (store.base)


def stored_key(key: str) -> str:
    """``key`` as the store keeps it: itself, or a digest when it is long or not valid
    UTF-8 (a platform id has no length limit; LMDB keys do)."""
    try:
        raw = key.encode("utf-8")
    except UnicodeEncodeError:
        raw = key.encode("utf-8", "surrogatepass")
    else:
        if len(raw) <= _STORED_KEY_BYTES:
            return key
    return "sha256:" + hashlib.sha256(raw).hexdigest()


class ClaimStore(Protocol):
    """Where delivery keys are claimed durably (rules 2 and 4)."""

    #: Whether other daemons claim there too (Redis): then a key missing from memory is
    #: always looked up, not only in the windows of rule 4.
    shared: bool

    async def known(self, keys: Sequence[str]) -> set[str]:
        """Those of ``keys`` claimed and not expired (one read for all)."""
        ...
    async def start(self, keys: Sequence[str]) -> tuple[set[str], set[str]]:
        """(claimed, in flight on another daemon) of ``keys``, the others marked in flight
        here (rule 6): one call for a batch. Awaited: on a networked store (Redis) the
        event loop serves other events during the round trip."""
        ...
    def abandon(self, keys: Sequence[str]) -> None:
        """Drop this daemon's in-flight marks of ``keys`` (their delivery failed)."""
        ...
    def held_for(self) -> float:
        """Seconds from now until every claim the store holds has expired (0: none is
        alive), read once at start; a store that cannot tell cheaply answers the window."""
        ...
    async def record(self, keys: Sequence[str]) -> None:
        """Claim ``keys`` for the window; returns once the claim is committed."""
        ...


class DurableClaims:
    """Delivery keys claimed within the window, in the message-id store (rules 2 and 4).

    Times are wall-clock milliseconds (they must mean the same to the next process); the
    store's sweeper deletes expired claims.
    """

    shared = False

    def __init__(self, store: MsgIdStore, window: float = DEDUP_SECONDS,
                 clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._window_ms = int(window * 1000)
        self._clock = clock

    async def start(self, keys: Sequence[str]) -> tuple[set[str], set[str]]:
        """No other daemon writes this file: nothing is in flight elsewhere, nothing to mark.
        Awaits nothing: an LMDB read is a memory-mapped lookup, cheaper than a thread hop."""
        return self._known(keys), set()

    def abandon(self, keys: Sequence[str]) -> None:
        pass

    def held_for(self) -> float:
        with self._store.read() as view:
            last_ms = view.last_claim_expiry()
        return 0.0 if last_ms is None else max(0.0, last_ms / 1000 - self._clock())

    async def known(self, keys: Sequence[str]) -> set[str]:
        """Those of ``keys`` claimed and not expired (one read for all)."""
        return self._known(keys)

    def _known(self, keys: Sequence[str]) -> set[str]:
        now_ms = int(self._clock() * 1000)
        with self._store.read() as view:
            return {key for key in keys
                    if (view.claim_expiry(stored_key(key)) or 0) > now_ms}

    async def record(self, keys: Sequence[str]) -> None:
        """Claim ``keys`` for the window; returns once the claim is committed."""
        expires_ms = int(self._clock() * 1000) + self._window_ms
        stored = [stored_key(key) for key in keys]

        def put(view: MsgIdWriter) -> None:
            view.put_claims(stored, expires_ms)

        await self._store.write(put)


async def _after(ahead: asyncio.Future[None] | None) -> None:
    """Once ``ahead`` is done (at once when it is None or done); cancelling the caller
    leaves ``ahead`` alone (a plain ``await`` would cancel it for every batch behind)."""
    if ahead is not None and not ahead.done():
        await asyncio.wait([ahead])


class DeliveryLog:
    """Event keys processed (or in flight) recently: at most ``limit`` (the oldest dropped
    first, and the store read for a window after: rule 4), each for the window ``ttl``.

    An entry is a timestamp; only while a delivery is in flight and a repeat waits for it
    is there a future too. A future per entry (100k of them kept for five minutes) made
    every full garbage collection walk them, and cost a future per event for the rare repeat.
    With ``claims`` the keys also go to the store (module rules 2 and 4).

    The entries are the keys' hashes and times in arrays in the order of their times (a key
    done is moved to the end): no object per key, so a flood's keys give their memory back
    after the window (:mod:`gensokyo_idmap.runtime.key_times`, which says why, and what a
    hash for a key costs). An entry past its window counts as absent the moment it is (its
    time is compared), and is dropped from the front at most every :data:`SWEEP_SECONDS`
    (not once per event: the front is found by walking past the entries moved on), or at
    once when the log is full, or by the memory chore (:meth:`forget`).
    """

    def __init__(self, ttl: float = DEDUP_SECONDS, limit: int = _DEDUP_MAX,
                 clock: Callable[[], float] = time.monotonic,
                 claims: ClaimStore | None = None) -> None:
        self._ttl = ttl
        self._limit = limit
        self._clock = clock
        self._claims = claims
        self._seen = KeyTimes()  # key → when claimed / done, oldest first
        self._sweep_at = float("inf")  # when the entries past their window are dropped next
        # until when a key missing here may be claimed in the store (rule 4): while a
        # claim of an earlier process may be alive there
        self._look_up_until = clock() + (0.0 if claims is None else claims.held_for())
        # key → the future repeats wait on (None: in flight, nobody waiting yet)
        self._in_flight: dict[str, asyncio.Future[None] | None] = {}
        # done once the newest batch looking into the store was decided (claim_all's order)
        self._looking: asyncio.Future[None] | None = None
        # key → looks under way that include it (rule 7; a shared store only)
        self._looking_up: dict[str, int] = {}

    async def claim(self, key: str) -> asyncio.Future[None] | None:
        """None: the caller processes ``key`` now. A future: someone did or is doing it."""
        [earlier] = await self.claim_all([key])
        return earlier

    async def claim_all(self, keys: Sequence[str | None]
                        ) -> list[asyncio.Future[None] | None]:
        """:meth:`claim` for each of ``keys`` in order (None for a None key), with one look
        into the store for those not in memory.

        Memory is decided after the look: another batch may have claimed one of ``keys``
        while it was awaited, and then this one waits for that delivery (:meth:`_claim`
        checks memory first). Batches are decided in the order they came, whichever look
        is answered first: the caller queues for its chats' turns right after, so arrival
        order is what each chat keeps. A store that answers without suspending (LMDB)
        never makes a batch wait here."""
        now = self._clock()
        if now >= self._sweep_at or len(self._seen) + len(keys) > self._limit:
            self._forget_old(now, len(keys))
        seen, cutoff = self._seen, now - self._ttl
        known: set[str] = set()
        busy: set[str] = set()
        ahead = self._looking
        counted: list[str] = []
        try:
            if self._claims is not None and (self._claims.shared or now < self._look_up_until):
                missed = list(dict.fromkeys(key for key in keys if key is not None
                                            and seen.get(key, _NEVER) <= cutoff))
                if missed:
                    if self._claims.shared:  # its look marks them (rule 7)
                        counted = missed
                        self._count_looks(counted, 1)
                    mine = self._looking = asyncio.get_running_loop().create_future()
                    try:
                        known, busy = await self._claims.start(missed)
                        await _after(ahead)
                    finally:
                        mine.set_result(None)
                        if self._looking is mine:
                            self._looking = None
                    ahead = None
            await _after(ahead)
            return [None if key is None else self._claim(key, now, key in known, key in busy)
                    for key in keys]
        finally:
            if counted:
                self._count_looks(counted, -1)

    def _count_looks(self, keys: list[str], step: int) -> None:
        looking_up = self._looking_up
        for key in keys:
            count = looking_up.get(key, 0) + step
            if count:
                looking_up[key] = count
            else:
                del looking_up[key]

    def _has(self, key: str, now: float) -> bool:
        """Whether ``key`` is remembered and within its window."""
        return self._seen.get(key, _NEVER) > now - self._ttl

    def _claim(self, key: str, now: float, claimed_before: bool,
               busy_elsewhere: bool = False) -> asyncio.Future[None] | None:
        remembered = self._has(key, now)
        if busy_elsewhere and not remembered:  # rule 6: refused, sent again later
            refused: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            refused.set_exception(StoreError(
                f"event {key} is being processed by another daemon: not acknowledged, "
                "so the platform sends it again"))
            refused.exception()  # retrieved here: the caller re-raises it itself
            return refused
        if remembered or claimed_before:
            loop = asyncio.get_running_loop()
            if key in self._in_flight:
                waiting = self._in_flight[key]
                if waiting is None:
                    waiting = self._in_flight[key] = loop.create_future()
                return waiting
            if not remembered:  # claimed by an earlier process: remember it here
                self._add(key, now)
            done: asyncio.Future[None] = loop.create_future()
            done.set_result(None)
            return done
        self._add(key, now)
        self._in_flight[key] = None
        return None

    def _add(self, key: str, now: float) -> None:
        """Remember ``key`` from ``now``, at the end (its entry past its window, if any,
        taken out first: the times stay in order)."""
        seen = self._seen
        if not seen:
            self._sweep_at = now + self._ttl
        seen.put(key, now)

    def _forget_old(self, now: float, coming: int = 0) -> None:
        """Drop the entries past their time, and the oldest beyond the count limit, so
        that ``coming`` more fit (only when due: a walk to the front per event was a
        visible cost)."""
        seen = self._seen
        room = len(seen) + coming - self._limit  # entries to drop so that the coming fit
        if seen.drop_front(now - self._ttl, room):
            # dropped for room while their claims may live on in the store
            self._look_up_until = max(self._look_up_until, now + self._ttl)
        first = seen.first_time()
        self._sweep_at = (float("inf") if first is None else
                          max(first + self._ttl, now + SWEEP_SECONDS))

    def remember(self, key: str) -> None:
        """Record ``key`` as processed (e.g. its events were owed from before a restart)."""
        now = self._clock()
        if not self._has(key, now):
            self._add(key, now)

    def __len__(self) -> int:
        """Entries remembered (some may be past their window until the next sweep)."""
        return len(self._seen)

    def memory_tables(self) -> list[Named]:
        return [("delivery_keys", self)]

    def forget(self) -> None:
        """Drop what is past its window now (the memory chore: :mod:`gensokyo_idmap.tables`),
        and shrink the tables of the deliveries in flight after a flood of them."""
        self._forget_old(self._clock())
        self._in_flight = compacted(self._in_flight)
        self._looking_up = compacted(self._looking_up)

    def footprint(self) -> int:
        return self._seen.footprint() + estimate(
            len(self._in_flight), (self._in_flight, self._looking_up), self._in_flight.items())

    async def commit(self, keys: Sequence[str | None]) -> None:
        """Claim the processed ``keys`` durably (rule 2): call before the source is told
        "done", after every framework has the events delivered or durably owed."""
        if self._claims is not None:
            claimed = [key for key in keys if key is not None]
            if claimed:
                await self._claims.record(claimed)

    def finish_all(self, keys: Sequence[str | None], error: BaseException | None) -> None:
        """:meth:`finish` of each of ``keys`` (None: no key) at one time: one clock read,
        one time object for the batch's entries (24 bytes each less)."""
        now = self._clock()
        for key in keys:
            if key is not None:
                self.finish(key, error, now)

    def finish(self, key: str, error: BaseException | None, now: float | None = None) -> None:
        """The delivery of ``key`` is over: it failed (``error``: forgotten, a redelivery
        tries again) or it went through (remembered for the window from ``now``, by default
        the clock's now)."""
        if key not in self._in_flight:
            return
        waiting = self._in_flight.pop(key)
        if error is not None:
            self._seen.discard(key)  # not processed: a redelivery must try again
            if self._claims is not None and key not in self._looking_up:  # rule 7
                self._claims.abandon([key])  # on any daemon
        else:  # remembered for the window from now (rule 4), if it still is
            self._seen.renew(key, self._clock() if now is None else now)
        if waiting is None or waiting.done():
            return
        if error is not None:
            waiting.set_exception(error)
            waiting.exception()  # retrieved here: waiters re-raise it themselves
        else:
            waiting.set_result(None)
