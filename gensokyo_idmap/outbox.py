"""Durable copies of OneBot events a framework has not confirmed yet (outbox.db).

The platform side acknowledges an event (webhook 200, gateway seq saved) once every framework
has it *confirmed* (a pong after it, an HTTP 2xx: DESIGN §8a) or *durably owed*. A framework
that is away, slow or frozen would otherwise hold the event only in memory, and ``kill -9``
would lose it although the platform was told it arrived. So, before the acknowledgement,
:meth:`Outbox.keep` writes such events durably (one group commit for a whole batch); when the
framework confirms one its entry is forgotten; after a restart the entries left are what is
still owed, sent first, oldest first.

Entry ids are handed out when an event is published (:meth:`Outbox.allocate`), not when it is
written, so a framework's entries sort in the order its events were published, whichever
batch committed first; ids still unwritten at a crash are simply never used.

:class:`Backlog` (one per reverse-WS or HTTP POST framework) keeps memory bounded: once its
queue is full, new events are not held in memory but written here (*spilled*) and read back
into the queue, in order, as the framework confirms what it has (*refilled*); the events owed
from before a restart come back the same way. While anything is spilled, every new event
spills too, so none overtakes an older one.

A framework away for very long costs at most ``limit_per_sink`` entries: beyond that the
oldest are dropped (logged).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Final, Protocol, runtime_checkable

import structlog

from gensokyo_idmap import jsonio
from gensokyo_idmap.errors import IdmapError
from gensokyo_idmap.onebot.encoding import event_bytes
from gensokyo_idmap.onebot.event_queue import EventBacklog, EventQueue, Tracked
from gensokyo_idmap.store.lmdb_outbox import LmdbOutboxStore, OutboxView

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
    def __init__(self, store: LmdbOutboxStore, limit_per_sink: int = DEFAULT_OUTBOX_LIMIT) -> None:
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

    def read_after(self, sink: str, after: int, limit: int) -> list[tuple[int, dict[str, Any]]]:
        """Up to ``limit`` of ``sink``'s entries with an id above ``after``, oldest first."""
        out: list[tuple[int, dict[str, Any]]] = []
        with self.store.read() as view:
            for entry, body in view.entries(sink, after=after):
                if len(out) >= limit:
                    break
                out.append((entry, jsonio.loads(body)["event"]))
        return out

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

        def write(view: OutboxView) -> None:
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


class Backlog:
    """What one tracked framework is owed beyond its memory queue, waiting in outbox.db.

    :meth:`publish` puts an event in the queue while the queue has room and nothing is
    spilled; else it spills it (written here by one writer, in publish order, one commit for
    whatever gathered meanwhile). The refill reads spilled entries back, in id order, once
    the queue is down to half its size, each with :meth:`Outbox.forget_when_written`; when
    nothing is left beyond what it read and nothing is being written, spilling stops.
    """

    def __init__(self, outbox: Outbox, sink: str, queue: EventQueue) -> None:
        self.outbox = outbox
        self.sink = sink
        self.queue = queue
        self.spilling = False
        self._cursor = 0  # the highest entry id spilled and read back (or just below a spill)
        self._buffer: list[tuple[int, dict[str, Any], str | None, asyncio.Future[bool]]] = []
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
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"backlog {self.sink}")
            self._wake.set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self._settle_buffer(False)

    def publish(self, event: dict[str, Any], key: str | None, wait: bool) -> Tracked:
        if self.spilling or self.queue.full:
            return self._spill(event, key), True, 0
        return self.queue.publish(event), wait, self.outbox.allocate()

    def _spill(self, event: dict[str, Any], key: str | None) -> asyncio.Future[bool]:
        entry = self.outbox.allocate()
        if not self.spilling:
            self.spilling = True
            self._cursor = entry - 1  # what this framework had kept before is in memory
            log.info("[onebot] queue full: further events wait in outbox.db", sink=self.sink,
                     queued=len(self.queue))
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._buffer.append((entry, event, key, future))
        self.spilled += 1
        self._wake.set()
        return future

    def _room(self) -> None:
        if self.spilling:
            self._wake.set()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._buffer:
                await self._write()
            if self.spilling and len(self.queue) <= self.queue.size // 2:
                self._refill()

    async def _write(self) -> None:
        batch, self._buffer = self._buffer, []
        self._writing = True
        ok = False
        try:
            await self.outbox.keep([(self.sink, entry, event, key)
                                    for entry, event, key, _ in batch])
            ok = True
        except IdmapError as err:
            log.error("[onebot] outbox: spilled events not written (not acknowledged)",
                      sink=self.sink, events=len(batch), reason=err.message)
        finally:
            self._writing = False
            for _, _, _, future in batch:
                if not future.done():
                    future.set_result(ok)
            self._wake.set()  # read back what was written, if there is room

    def _refill(self) -> None:
        room = self.queue.size - len(self.queue)
        if room <= 0:
            return
        entries = self.outbox.read_after(self.sink, self._cursor, room)
        for entry, event in entries:
            self.outbox.forget_when_written(self.sink, entry, self.queue.publish(event))
            self._cursor = entry
        self.refilled += len(entries)
        if len(entries) < room and not self._buffer and not self._writing:
            self.spilling = False  # everything owed is in memory again
            log.info("[onebot] outbox: backlog read back", sink=self.sink,
                     spilled=self.spilled, refilled=self.refilled)

    def _settle_buffer(self, ok: bool) -> None:
        batch, self._buffer = self._buffer, []
        for _, _, _, future in batch:
            if not future.done():
                future.set_result(ok)
