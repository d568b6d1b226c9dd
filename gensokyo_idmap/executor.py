"""The daemon's default executor: worker threads that never hold up the process's exit.

``asyncio`` runs blocking calls on the loop's default executor: name lookups of every
outgoing connection (aiohttp's resolver calls ``getaddrinfo`` there), ``asyncio.to_thread``
(the msgid sweep, the start-up migration). A ``ThreadPoolExecutor`` is joined twice at the
end — by ``asyncio.run`` and again when the interpreter exits — so a lookup still waiting
for a name server that does not answer (seconds to minutes) kept the process alive after
it had logged ``[app] stopped``, with everything already closed.

Here the workers are daemon threads and ``shutdown`` does not wait for them. That is safe
because the daemon awaits every job whose outcome matters (the sweep, the migration) before
its stores close; what can still be running at exit is a job nobody waits for any more,
like the lookup of a connection that was cancelled.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
from collections.abc import Callable
from typing import Any, Final, TypeVar

__all__ = ["DaemonThreadExecutor"]

T = TypeVar("T")
_STOP: Final = object()


class DaemonThreadExecutor(concurrent.futures.ThreadPoolExecutor):
    """Up to ``max_workers`` daemon threads, started as jobs come; ``shutdown`` never waits.

    A ``ThreadPoolExecutor`` subclass only because ``loop.set_default_executor`` takes no
    other kind; none of the base class's machinery is used.
    """

    def __init__(self, max_workers: int = 8, thread_name_prefix: str = "gsk-worker") -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix=thread_name_prefix)
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._idle = 0
        self._lock = threading.Lock()
        self._closed = False
        self._limit = max_workers
        self._prefix = thread_name_prefix

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any
               ) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._jobs.put((future, fn, args, kwargs))
            if self._idle == 0 and len(self._workers) < self._limit:  # else a worker takes it
                worker = threading.Thread(target=self._work, daemon=True,
                                          name=f"{self._prefix}-{len(self._workers)}")
                self._workers.append(worker)
                worker.start()
        return future

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            job = self._jobs.get()
            with self._lock:
                self._idle -= 1
            if job is _STOP:
                return
            future, fn, args, kwargs = job
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:  # noqa: BLE001 - handed to the waiter
                    future.set_exception(exc)
                else:
                    future.set_result(result)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No new jobs; idle workers end. Never waits for a running job (see the module
        docstring), whatever ``wait`` says."""
        with self._lock:
            self._closed = True
            workers = len(self._workers)
        if cancel_futures:
            while True:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is not _STOP:
                    job[0].cancel()
        for _ in range(workers):
            self._jobs.put(_STOP)
