"""Durable copies of OneBot events a framework has not confirmed yet (outbox.db).

The platform side acknowledges an event (webhook 200, gateway seq saved) once every framework
has it *confirmed* (a pong after it, an HTTP 2xx: docs/delivery.md) or *durably owed*. A framework
that is away, slow or frozen would otherwise hold the event only in memory, and ``kill -9``
would lose it although the platform was told it arrived. So, before the acknowledgement,
the framework's :class:`Backlog` writes such events durably (:meth:`Backlog.keep_through`,
one group commit for whatever gathered); when the framework confirms one its entry is
forgotten; after a restart the entries left are what is still owed, sent first, oldest first.

Entry ids are handed out when an event is published (:meth:`Outbox.allocate`), not when it is
written, so a framework's entries sort in the order its events were published, whichever
batch committed first; ids still unwritten at a crash are simply never used.

:class:`Backlog` (one per reverse-WS or HTTP POST framework) writes in publish order, an
event never before the ones published ahead of it (per-chat order survives a crash), and
keeps memory bounded: once its queue is full, new events are not held in memory but written
here (*spilled*) and read back into the queue, in order, as the framework confirms what it
has (*refilled*); the events owed from before a restart come back the same way.

A framework away for very long costs at most ``limit_per_sink`` entries: beyond that the
oldest are dropped (logged).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from typing import Any, Final, Protocol, runtime_checkable

import structlog

from gensokyo_idmap import jsonio
from gensokyo_idmap.errors import IdmapError, StoreError
from gensokyo_idmap.onebot.encoding import event_bytes
from gensokyo_idmap.onebot.event_queue import EventBacklog, EventQueue, Tracked
from gensokyo_idmap.store.base import OutboxStore, OutboxWriter

__all__ = ["DEFAULT_OUTBOX_LIMIT", "Backlog", "Outbox", "Tracked", "TrackedSink"]

log = structlog.get_logger("gensokyo_idmap.outbox")

DEFAULT_OUTBOX_LIMIT: Final = 100_000

@runtime_checkable
class TrackedSink(Protocol):
    """A framework connection whose events may be owed across a restart (reverse WS,
    HTTP POST; not the forward WS, whose clients come and go)."""

    @property
    def outbox_name(self) -> str: ...

    @property
    def backlog(self) -> EventBacklog | None:
        """Its backlog (a :class:`Backlog`), when it has one (None: it is not tracked)."""
        ...

    def publish_tracked(self, event: dict[str, Any], key: str | None) -> Tracked:
        """Queue ``event`` (from the platform delivery ``key``); see
        :data:`~gensokyo_idmap.onebot.event_queue.Tracked`."""
        ...


class Outbox:
    def __init__(self, store: OutboxStore, limit_per_sink: int = DEFAULT_OUTBOX_LIMIT) -> None:
        self.store = store
        self.limit = limit_per_sink
        self._counts: dict[str, int] = {}
        self._forgetting: set[asyncio.Future[Any]] = set()
        with store.read() as view:
            self._last = view.counter()
        self.kept = 0
        self.forgotten = 0

    def allocate(self) -> int:
        """The entry id of the next event published (ids only grow)."""
        self._last += 1
        return self._last

    def owed(self, sink: str) -> list[tuple[int, str | None]]:
        """(entry id, platform delivery key) of what ``sink`` is still owed, oldest first
        (read once at start-up: the platform's replay of those events is a repeat)."""
        owed = []
        with self.store.read() as view:
            for entry, body in view.entries(sink):
                owed.append((entry, jsonio.loads(body).get("key")))
        self._counts[sink] = len(owed)
        return owed

    def durable_count(self, sink: str) -> int:
        """How many of ``sink``'s events wait in outbox.db, as counted while writing and
        forgetting them (read by the console; no store read)."""
        return self._counts.get(sink, 0)

    def read_after(self, sink: str, after: int, limit: int) -> list[tuple[int, dict[str, Any]]]:
        """Up to ``limit`` of ``sink``'s entries with an id above ``after``, oldest first."""
        out: list[tuple[int, dict[str, Any]]] = []
        with self.store.read() as view:
            for entry, body in view.entries(sink, after=after):
                if len(out) >= limit:
                    break
                out.append((entry, jsonio.loads(body)["event"]))
        return out

    @property
    def last(self) -> int:
        """The last entry id handed out."""
        return self._last

    async def drop(self, sink: str, after: int, through: int) -> int:
        """Delete ``sink``'s entries with an id in (``after``, ``through``], in one commit
        (an operator dropping a framework's backlog); how many there were."""
        def delete(view: OutboxWriter) -> int:
            ids = [entry for entry, _ in view.entries(sink, after=after) if entry <= through]
            for entry in ids:
                view.remove(sink, entry)
            return len(ids)

        removed: int = await self.store.write(delete)
        self._counts[sink] = max(0, self._counts.get(sink, 0) - removed)
        return removed

    async def keep(self, items: Sequence[tuple[str, int, dict[str, Any], str | None]]) -> None:
        """Write (sink, entry id, event, delivery key) durably in one commit. An event that
        cannot be encoded is not kept (logged, counted): it could never be sent either, and
        must not fail the rest of the batch."""
        bodies = []
        for sink, entry, event, key in items:
            body = event_bytes({"key": key, "event": event}, sink, "outbox", event=event)
            if body is not None:
                bodies.append((sink, entry, body))
        over: dict[str, int] = {}
        for sink, _, _ in bodies:
            self._counts[sink] = self._counts.get(sink, 0) + 1
        for sink, count in self._counts.items():
            if count > self.limit:
                over[sink] = count - self.limit

        def write(view: OutboxWriter) -> None:
            for sink, entry, body in bodies:
                view.put(sink, entry, body)
            for sink, surplus in over.items():
                view.trim(sink, self.limit)
                log.warning("[onebot] outbox full: oldest events dropped", sink=sink,
                            dropped=surplus)

        await self.store.write(write)
        for sink in over:
            self._counts[sink] = self.limit
        self.kept += len(bodies)

    def forget_when_written(self, sink: str, entry: int, written: asyncio.Future[Any]) -> None:
        """Delete the entry once ``written`` resolves True (nothing is owed any more)."""
        def done(future: asyncio.Future[Any]) -> None:
            if future.cancelled() or future.exception() is not None or future.result() is not True:
                return  # still owed: the entry stays for the next start
            self._forget(sink, entry)

        written.add_done_callback(done)

    def _forget(self, sink: str, entry: int) -> None:
        deleting = asyncio.ensure_future(self.store.write(lambda view: view.remove(sink, entry)))
        self._counts[sink] = max(0, self._counts.get(sink, 1) - 1)
        self._forgetting.add(deleting)
        deleting.add_done_callback(self._forgot)

    def _forgot(self, deleting: asyncio.Future[Any]) -> None:
        self._forgetting.discard(deleting)
        if deleting.cancelled():
            return
        error = deleting.exception()
        if isinstance(error, IdmapError):
            log.warning("[onebot] outbox entry not deleted (sent again after a restart)",
                        reason=error.message)
        elif error is None:
            self.forgotten += 1

    async def settle(self) -> None:
        """Wait for deletions in flight (before the store closes)."""
        if self._forgetting:
            await asyncio.gather(*self._forgetting, return_exceptions=True)


_Item = tuple[int, dict[str, Any], str | None, "asyncio.Future[bool]"]  # entry, event, key


class Backlog:
    """What one tracked framework is owed beyond what it confirmed, kept in order.

    Rules:

    1. **Written in publish order, prefix first.** Everything this framework's events need
       written goes through one writer, one commit per turn for whatever gathered: when an
       event is written, so is every event published to this framework before it that is
       neither confirmed nor written yet (:meth:`keep_through`). So whenever a later event of
       a chat is durable (and may be acknowledged), every earlier one is durable or
       confirmed: after a crash the outbox gives them back first, in order, and the
       platform's replay of an earlier one can never come after a later one already sent.
    2. **Bounded memory.** :meth:`publish` puts an event in the queue while the queue has
       room and nothing is spilled; else it *spills* it: the writer writes it (rule 1) and
       its future turns True once it is durable. The refill reads spilled entries back, in
       id order, once the queue is down to half its size, each forgotten once confirmed
       (:meth:`Outbox.forget_when_written`); when nothing is left beyond what it read and
       nothing is being written, spilling stops. While anything is spilled, every new event
       spills too, so none overtakes an older one.
    """

    def __init__(self, outbox: Outbox, sink: str, queue: EventQueue) -> None:
        self.outbox = outbox
        self.sink = sink
        self.queue = queue
        self.spilling = False
        self._cursor = 0  # the highest entry id spilled and read back (or just below a spill)
        self._unkept: deque[_Item] = deque()  # in the queue, not written, in publish order
        self._spills: list[_Item] = []
        self._requests: list[tuple[int, asyncio.Future[None]]] = []  # keep through entry
        self._writing = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.spilled = 0
        self.refilled = 0
        queue.on_room = self._room

    def restore(self) -> list[str]:
        """At start-up, before any publish: what the framework is owed from before (it
        goes out first, read back as spilled entries are); their delivery keys."""
        owed = self.outbox.owed(self.sink)
        if owed:
            self.spilling = True
            self._cursor = 0
            log.info("[onebot] outbox: events owed from before the restart go first",
                     sink=self.sink, events=len(owed))
        return [key for _, key in owed if key is not None]

    def start(self) -> None:
        """Start the writer (and the refill of what :meth:`restore` found)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"backlog {self.sink}")
            self._wake.set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self._settle(self._spills, self._requests, StoreError("outbox: closing"))
        self._spills, self._requests = [], []

    def publish(self, event: dict[str, Any], key: str | None, wait: bool) -> Tracked:
        if self.spilling or self.queue.full:
            return self._spill(event, key), True, 0
        entry = self.outbox.allocate()
        future = self.queue.publish(event)
        unkept = self._unkept
        while unkept and unkept[0][3].done() and unkept[0][3].result() is True:
            unkept.popleft()  # confirmed: nothing to keep
        unkept.append((entry, event, key, future))
        return future, wait, entry

    async def keep_through(self, entry: int) -> None:
        """Return once every event published here up to ``entry`` is confirmed or durable
        (rule 1); raise :class:`StoreError` if the write failed."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._requests.append((entry, done))
        self.start()  # a backlog nobody started must not leave this waiting for ever
        self._wake.set()
        await done

    async def drop(self) -> int:
        """Drop what this framework is owed and has not been sent (the operator's button on
        the console): the events waiting in its queue, those spilled into outbox.db and not
        read back (their entries deleted), and those about to be spilled. Events in flight
        (sent, not confirmed yet) stay, with their entries: confirmed, or sent again after
        a reconnection, as usual. Everything dropped counts as delivered for the platform's
        acknowledgement (nothing is owed for it any more). How many events went."""
        while self._writing:  # a write under way: what it writes is deleted below
            await asyncio.sleep(0.01)
        spills, self._spills = self._spills, []
        self._settle(spills, [], None)
        dropped = len(spills) + self.queue.drop_waiting()  # their entries are forgotten
        after, through = self._cursor, self.outbox.last
        if not self.spilling:
            after = through  # nothing beyond what memory holds
        self.spilling = False
        self._cursor = through
        dropped += await self.outbox.drop(self.sink, after, through)
        log.warning("[onebot] backlog dropped by the operator", sink=self.sink, events=dropped)
        return dropped

    def _spill(self, event: dict[str, Any], key: str | None) -> asyncio.Future[bool]:
        entry = self.outbox.allocate()
        if not self.spilling:
            self.spilling = True
            self._cursor = entry - 1  # what this framework had kept before is in memory
            log.info("[onebot] queue full: further events wait in outbox.db", sink=self.sink,
                     queued=len(self.queue))
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._spills.append((entry, event, key, future))
        self.spilled += 1
        self.start()
        self._wake.set()
        return future

    def _room(self) -> None:
        if self.spilling:
            self._wake.set()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._spills or self._requests:
                await self._write()
            if self.spilling and len(self.queue) <= self.queue.size // 2:
                self._refill()

    async def _write(self) -> None:
        spills, self._spills = self._spills, []
        requests, self._requests = self._requests, []
        through = max([entry for entry, _ in requests], default=0)
        if spills:
            through = max(through, spills[-1][0])
        kept: list[_Item] = []
        unkept = self._unkept
        while unkept and unkept[0][0] <= through:
            item = unkept.popleft()
            if not (item[3].done() and item[3].result() is True):
                kept.append(item)  # not confirmed (yet): owed
        if not kept and not spills:  # written by an earlier turn of this writer already
            self._settle(spills, requests, None)
            return
        self._writing = True
        failure: StoreError | None = None
        try:
            await self.outbox.keep([(self.sink, entry, event, key)
                                    for entry, event, key, _ in kept + spills])
        except IdmapError as err:
            log.error("[onebot] outbox: events not written (not acknowledged)",
                      sink=self.sink, events=len(kept) + len(spills), reason=err.message)
            failure = StoreError(f"outbox.db: {err.message}")
            unkept.extendleft(reversed(kept))  # still to be written, first
        finally:
            self._writing = False
            self._wake.set()  # read back what was written, if there is room
        if failure is None:
            for entry, _, _, future in kept:
                self.outbox.forget_when_written(self.sink, entry, future)
        self._settle(spills, requests, failure)

    @staticmethod
    def _settle(spills: list[_Item], requests: list[tuple[int, asyncio.Future[None]]],
                failure: StoreError | None) -> None:
        for _, _, _, future in spills:
            if not future.done():
                future.set_result(failure is None)
        for _, done in requests:
            if done.done():
                continue
            if failure is None:
                done.set_result(None)
            else:
                done.set_exception(failure)

    def _refill(self) -> None:
        room = self.queue.size - len(self.queue)
        if room <= 0:
            return
        entries = self.outbox.read_after(self.sink, self._cursor, room)
        for entry, event in entries:
            self.outbox.forget_when_written(self.sink, entry, self.queue.publish(event))
            self._cursor = entry
        self.refilled += len(entries)
        if len(entries) < room and not self._spills and not self._writing:
            self.spilling = False  # everything owed is in memory again
            log.info("[onebot] outbox: backlog read back", sink=self.sink,
                     spilled=self.spilled, refilled=self.refilled)
