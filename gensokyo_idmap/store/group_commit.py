"""Group commit: one writer thread turns many pending writes into one durable transaction.

A durable commit costs an fsync (milliseconds); a write function costs microseconds. So the
writer takes everything that queued up while the previous commit was syncing, runs it in one
transaction, syncs once, and then wakes every waiter. Under load the batch grows by itself;
a lone caller pays one commit, as it would without batching.

Waiters are woken only after the commit returned, so nobody ever acts on a write that a
crash could still take back. Asyncio waiters of one loop are woken with one
``call_soon_threadsafe`` per batch; thread waiters (CLI, tests) block on a
``concurrent.futures.Future``. The other way round too: the writes submitted during one
turn of an event loop reach the writer as one list at the end of that turn (one wake-up,
not one per write; each wake-up is a fight for the GIL).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any, Final, Generic, NamedTuple, TypeVar

from gensokyo_idmap.errors import StoreError

__all__ = ["BatchRunner", "GroupCommitter", "Outcome", "settle", "succeeded"]

T = TypeVar("T")

MAX_BATCH: Final = 1024


class Outcome(NamedTuple, Generic[T]):
    """What one write function produced: its value or the exception it raised.

    A NamedTuple (immutable all the same): the writer builds one per write, and a frozen
    dataclass costs four times as much to build (:func:`succeeded` skips even the keyword
    parsing, on the writer's hot path).
    """

    value: T | None = None
    error: BaseException | None = None


def succeeded(value: T) -> Outcome[T]:
    """``Outcome(value=value)``, built as the tuple it is."""
    return tuple.__new__(Outcome, (value, None))


#: Runs the functions of one batch in one transaction and commits it durably.
BatchRunner = Callable[[Sequence[Callable[[Any], Any]]], list[Outcome[Any]]]


class _Handover:
    """The writes one event loop (or one thread, ``loop`` None) handed over at once.

    Functions and futures in two lists, in the same order: the writer joins the function
    lists of a batch with ``list.extend`` and settles each hand-over's futures with one
    wake-up of its loop, without a record per write to build on the loop and to take apart
    on the writer (both on the path every waiter of a batch waits through).
    """

    __slots__ = ("fns", "futures", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self.loop = loop
        self.fns: list[Callable[[Any], Any]] = []
        self.futures: list[asyncio.Future[Any] | concurrent.futures.Future[Any]] = []


_STOP: Final = object()


class GroupCommitter:
    """Owns the writer thread of one store."""

    def __init__(self, run_batch: BatchRunner, name: str = "idmap-writer") -> None:
        self._run_batch = run_batch
        self._queue: queue.SimpleQueue[_Handover | object] = queue.SimpleQueue()
        self._handing_over: dict[asyncio.AbstractEventLoop, _Handover] = {}
        self._thread: threading.Thread | None = None
        self._name = name
        self._lock = threading.Lock()
        self._closed = False
        self.batches = 0
        self.writes = 0

    def _ensure_thread(self) -> None:
        if self._thread is None:
            with self._lock:
                if self._closed:
                    raise StoreError("the store is closed")
                if self._thread is None:
                    self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                    self._thread.start()

    @property
    def closed(self) -> bool:
        return self._closed

    def submit(self, fn: Callable[[Any], T]) -> asyncio.Future[T]:
        """Queue ``fn``; the future gets its result once the transaction holding it is durable.

        A plain function returning the future (not a coroutine): one less frame to create and
        resume per write, which is measurable when thousands of writes share a commit.
        """
        if self._closed:
            raise StoreError("the store is closed")
        if self._thread is None:
            self._ensure_thread()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        waiting = self._handing_over.get(loop)
        if waiting is None:
            # one hand-over (one wake-up of the writer) per turn of the loop, not per write:
            # every wake-up is a fight for the GIL with the loop
            waiting = self._handing_over[loop] = _Handover(loop)
            loop.call_soon(self._hand_over, loop)
        waiting.fns.append(fn)
        waiting.futures.append(future)
        return future

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        waiting = self._handing_over.pop(loop, None)
        if waiting is not None:
            self._queue.put(waiting)

    def submit_sync(self, fn: Callable[[Any], T]) -> T:
        """Blocking form of :meth:`submit`, for threads without an event loop."""
        if self._closed:
            raise StoreError("the store is closed")
        self._ensure_thread()
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        alone = _Handover(None)
        alone.fns.append(fn)
        alone.futures.append(future)
        self._queue.put(alone)
        return future.result()

    def close(self) -> None:
        """Finish everything queued so far, then stop the writer thread."""
        with self._lock:
            self._closed = True
            thread = self._thread
        for loop in list(self._handing_over):
            self._hand_over(loop)  # queued this turn: they go before the stop
        if thread is not None:
            self._queue.put(_STOP)
            thread.join()

    def _loop(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is _STOP:
                return
            batch: list[_Handover] = [first]  # type: ignore[list-item]
            fns = list(first.fns)  # type: ignore[attr-defined]
            while len(fns) < MAX_BATCH:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stopping = True
                    break
                batch.append(item)  # type: ignore[arg-type]
                fns += item.fns  # type: ignore[attr-defined]
            self._run(batch, fns)
            # the next hand-over may be minutes away: its writes' objects (functions,
            # futures, results) are not kept alive by this frame till then
            first = item = batch = fns = None  # type: ignore[assignment]

    def _run(self, batch: list[_Handover], fns: list[Callable[[Any], Any]]) -> None:
        try:
            outcomes = self._run_batch(fns)
        except BaseException as exc:  # noqa: BLE001 - the commit failed: every waiter hears it
            outcomes = [Outcome(error=exc) for _ in fns]
        self.batches += 1
        self.writes += len(fns)
        if len(batch) == 1:
            _wake(batch[0].loop, batch[0].futures, outcomes)
            return
        # several hand-overs: still one wake-up per loop
        by_loop: dict[asyncio.AbstractEventLoop | None, tuple[list[Any], list[Outcome[Any]]]] = {}
        start = 0
        for handover in batch:
            end = start + len(handover.fns)
            futures, settled = by_loop.setdefault(handover.loop, ([], []))
            futures += handover.futures
            settled += outcomes[start:end]
            start = end
        for loop, (futures, settled) in by_loop.items():
            _wake(loop, futures, settled)


def _wake(loop: asyncio.AbstractEventLoop | None, futures: list[Any],
          outcomes: list[Outcome[Any]]) -> None:
    """Settle futures: a thread's at once (``loop`` None), a loop's on that loop."""
    if loop is None:
        for future, outcome in zip(futures, outcomes, strict=True):
            settle(future, outcome)
        return
    try:
        loop.call_soon_threadsafe(_settle_all, futures, outcomes)
    except RuntimeError:
        pass  # that loop is closed: nobody is waiting any more


def settle(
    future: asyncio.Future[Any] | concurrent.futures.Future[Any], outcome: Outcome[Any]
) -> None:
    if future.done():
        return
    if outcome.error is not None:
        future.set_exception(outcome.error)
    else:
        future.set_result(outcome.value)


def _settle_all(futures: list[Any], outcomes: list[Outcome[Any]]) -> None:
    """Settle the futures of one hand-over on their loop (:func:`settle` inlined: this
    runs on the loop for every write)."""
    for future, (value, error) in zip(futures, outcomes, strict=True):
        if future.done():
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)
