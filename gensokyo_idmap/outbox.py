"""Durable copies of OneBot events a framework has not received yet (outbox.db).

The platform side acknowledges an event (webhook 200, gateway seq saved) once it is safe;
with every framework connected that means "on the wire". A framework that is away (reverse
WS reconnecting, HTTP POST receiver down) would otherwise hold the event only in memory, and
``kill -9`` would lose it although the platform was told it arrived. So, before the
acknowledgement, :meth:`Outbox.keep` writes such events durably (one group commit for a whole
batch); when the in-memory copy is finally written the entry is forgotten; after a restart
:meth:`Outbox.pending` gives what is still owed, oldest first, ahead of new events.

A framework away for very long costs at most ``limit_per_sink`` entries: beyond that the
oldest are dropped (logged), as the in-memory queue does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Final, Protocol, runtime_checkable

import structlog

from gensokyo_idmap import jsonio
from gensokyo_idmap.errors import IdmapError
from gensokyo_idmap.onebot.encoding import event_bytes
from gensokyo_idmap.store.lmdb_outbox import LmdbOutboxStore, OutboxView

__all__ = ["DEFAULT_OUTBOX_LIMIT", "Outbox", "TrackedSink"]

log = structlog.get_logger("gensokyo_idmap.outbox")

DEFAULT_OUTBOX_LIMIT: Final = 100_000


@runtime_checkable
class TrackedSink(Protocol):
    """A framework connection whose events may be owed across a restart (reverse WS,
    HTTP POST; not the forward WS, whose clients come and go)."""

    @property
    def outbox_name(self) -> str: ...

    def publish_tracked(self, event: dict[str, Any]) -> tuple[asyncio.Future[bool], bool]:
        """Queue ``event``; its write future, and whether waiting for it is worthwhile (the
        framework is connected now)."""
        ...


class Outbox:
    def __init__(self, store: LmdbOutboxStore, limit_per_sink: int = DEFAULT_OUTBOX_LIMIT) -> None:
        self.store = store
        self.limit = limit_per_sink
        self._counts: dict[str, int] = {}
        self._forgetting: set[asyncio.Future[Any]] = set()
        self.kept = 0
        self.forgotten = 0

    def pending(self, sink: str) -> list[tuple[int, dict[str, Any], str | None]]:
        """What ``sink`` is still owed, oldest first (read once at start-up): entry id,
        event, and the platform delivery key it came from."""
        owed = []
        with self.store.read() as view:
            for entry, body in view.entries(sink):
                kept = jsonio.loads(body)
                owed.append((entry, kept["event"], kept.get("key")))
        self._counts[sink] = len(owed)
        return owed

    def restore(self, sink: TrackedSink) -> list[str]:
        """Queue what ``sink`` is owed from before the restart (call before new events);
        the delivery keys of those events: the platform's replay of them is a duplicate."""
        owed = self.pending(sink.outbox_name)
        for entry, event, _ in owed:
            written, _ = sink.publish_tracked(event)
            self.forget_when_written(sink.outbox_name, entry, written)
        if owed:
            log.info("[onebot] outbox: events owed from before the restart queued",
                     sink=sink.outbox_name, events=len(owed))
        return [key for _, _, key in owed if key is not None]

    async def keep(self, items: Sequence[tuple[str, dict[str, Any], str | None]]
                   ) -> list[int | None]:
        """Write (sink, event, delivery key) durably in one commit; entry ids, in order.
        An event that cannot be encoded is not kept (logged, counted; its id is ``None``):
        it could never be sent either, and must not fail the rest of the batch."""
        encoded = [(sink, event_bytes({"key": key, "event": event}, sink, "outbox",
                                      event=event))
                   for sink, event, key in items]
        bodies = [(sink, body) for sink, body in encoded if body is not None]
        over: dict[str, int] = {}
        for sink, _ in bodies:
            self._counts[sink] = self._counts.get(sink, 0) + 1
        for sink, count in self._counts.items():
            if count > self.limit:
                over[sink] = count - self.limit

        def write(view: OutboxView) -> list[int]:
            ids = [view.add(sink, body) for sink, body in bodies]
            for sink, surplus in over.items():
                view.trim(sink, self.limit)
                log.warning("[onebot] outbox full: oldest events dropped", sink=sink,
                            dropped=surplus)
            return ids

        ids = iter(await self.store.write(write))
        for sink in over:
            self._counts[sink] = self.limit
        self.kept += len(bodies)
        return [None if body is None else next(ids) for _, body in encoded]

    def forget_when_written(self, sink: str, entry: int | None,
                            written: asyncio.Future[Any]) -> None:
        """Delete the entry once ``written`` resolves True (the framework has the event);
        nothing to do for an event that was not kept (``None``)."""
        if entry is None:
            return

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
