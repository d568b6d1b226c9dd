"""Hand the C allocator's free pages back to the system, once a minute.

Why: CPython takes memory for anything larger than a small object (read buffers, JSON
texts, LMDB's dirty pages) from the C library's ``malloc``. glibc keeps what is freed in
its heaps for reuse and returns it to the system only from the top of a heap. After a peak
of load (frameworks slow to confirm, a burst of webhook retries, a backlog written to the
outbox) the freed memory stays behind fragments that are still in use, so the resident size
keeps the peak's high-water mark for the life of the process, and every further peak can
add to it. ``malloc_trim(0)`` gives back every free page of every arena (glibc ≥ 2.8 also
releases free pages in the middle of a heap), so the resident size follows what is in use.

In ``bench/soak.py`` a trim of the daemon's main heap gave back 3.4 MiB of 73 MiB resident
anonymous memory after 36 minutes on a loaded machine; it costs a few milliseconds (that
is why it runs on a worker thread, not on the event loop) once a minute.

Where the C library has no ``malloc_trim`` (musl, macOS) this does nothing.

The cyclic garbage collector runs less often in the daemon (:func:`collect_less_often`):
CPython starts a young collection once 700 more container objects were made than freed.
With 32 sends in flight, the objects they hold (tasks, futures, requests, records: about 45
each) stay above that, so a young collection ran every ~15 sends, scanning objects that were
all still alive and moving them on to the older generations, and every ~2,000 sends a full
collection walked the whole heap (~76,000 objects, 20-35 ms). In ``bench/outbound.py`` that
was ~25 us of the ~200 us of CPU per send at 32 in flight. With a threshold of 10,000 the
same 2,000 sends started no collection at all, and the CPU per send fell by 0.03 ms.
Reference counting frees all acyclic garbage at once either way; only cycles wait longer
(at most 10,000 objects' worth before the next young collection).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
from collections.abc import Callable
from typing import Final

import structlog

from gensokyo_idmap.periodic import every

__all__ = ["TRIM_INTERVAL_SECONDS", "YOUNG_COLLECTION_THRESHOLD", "collect_less_often",
           "malloc_trim_function", "run_trimmer"]

#: How often free memory is handed back: often enough that a peak does not linger, rarely
#: enough that the few milliseconds of a trim are nothing.
TRIM_INTERVAL_SECONDS: Final = 60.0

_log = structlog.get_logger("gensokyo_idmap.memory")
#: Container objects made and not yet freed that start a young collection in the daemon
#: (CPython's default: 700, less than what 32 sends in flight hold; see the module's note).
YOUNG_COLLECTION_THRESHOLD: Final = 10_000


def collect_less_often(threshold: int = YOUNG_COLLECTION_THRESHOLD) -> None:
    """Start the collector's young collections only after ``threshold`` more container
    objects were made than freed (never lowering it); the older generations' thresholds
    are kept. For the daemon process: a library must not change its host's collector."""
    young, older, oldest = gc.get_threshold()
    gc.set_threshold(max(young, threshold), older, oldest)


def malloc_trim_function() -> Callable[[], int] | None:
    """glibc's ``malloc_trim(0)`` as a function returning 1 when it released memory, or
    None where the C library has none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: int(trim(0))


async def run_trimmer(stop: asyncio.Event,
                      interval_seconds: float = TRIM_INTERVAL_SECONDS,
                      trim: Callable[[], int] | None = None,
                      sweep: Callable[[], None] | None = None) -> None:
    """The memory chore: every ``interval_seconds`` until ``stop`` is set, ``sweep`` (on
    the event loop: the in-memory tables forget what their rules let them,
    :meth:`gensokyo_idmap.tables.Tables.sweep`), then the trim, which hands what they held
    back to the system (nothing where there is no ``malloc_trim``). ``trim`` defaults to
    :func:`malloc_trim_function`'s."""
    if trim is None:
        trim = malloc_trim_function()
    if trim is None:
        _log.debug("[app] no malloc_trim in this C library: free memory stays with it")
        if sweep is None:
            return
    loop = asyncio.get_running_loop()
    async for _ in every(interval_seconds, stop):
        if sweep is not None:
            sweep()
        if trim is not None:
            await loop.run_in_executor(None, trim)
