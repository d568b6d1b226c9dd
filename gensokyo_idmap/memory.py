"""The daemon's memory: the C allocator's free pages handed back to the system once a
minute, its large blocks kept in mappings of their own, and the cyclic collector run less
often.

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

glibc's thresholds are set by the daemon, in two steps (:func:`set_malloc_thresholds`).
glibc serves a block of at least its mmap threshold (128 KiB at first) as a mapping of its
own, given back whole when freed, whose pages become resident only once written; smaller
blocks come from the heap. When a mapped block is freed whole, glibc raises the threshold
to its size (up to 32 MiB) and the trim threshold to twice that. So:

- While the stores open, the threshold is held at 128 KiB (:data:`OPENING_MMAP_THRESHOLD`).
  LMDB takes 3 MiB of page lists (``calloc``) for each environment it opens, and a new data
  dir's stores are each made in a scratch environment first, closed again: that close
  raised the threshold to 2 MiB, so the stores' own lists came from the heap, where they
  held 4.5 MiB of an idle daemon's resident memory that fresh mappings, untouched until
  used, do not (``bench/idle_imports.py``).
- Once they are open, the thresholds are fixed where glibc's adjustment had them on a new
  data dir: :data:`RUNNING_MMAP_THRESHOLD`, trim twice that. asyncio reads a socket into a
  256 KiB buffer and shrinks it to what came; held at 128 KiB, every read would be an
  ``mmap``, an ``mremap`` and a ``munmap`` (15 against 11 us a read on its own; a webhook
  event took 25 % more CPU in ``bench/inbound.py``). With both steps an event costs what
  it did (interleaved with the code before: webhook 0.26-0.31 against 0.25-0.30 ms,
  gateway 0.08-0.11 against 0.09-0.12 ms, on a busy machine).

Arenas: the worker threads' own (``MALLOC_ARENA_MAX``) held nothing an idle daemon keeps
(no change with one arena), so their number is left to glibc.

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
from typing import Any, Final

import structlog

from gensokyo_idmap.periodic import every

__all__ = ["OPENING_MMAP_THRESHOLD", "RUNNING_MMAP_THRESHOLD", "TRIM_INTERVAL_SECONDS",
           "YOUNG_COLLECTION_THRESHOLD", "collect_less_often", "malloc_trim_function",
           "run_trimmer", "set_malloc_thresholds"]

#: How often free memory is handed back: often enough that a peak does not linger, rarely
#: enough that the few milliseconds of a trim are nothing.
TRIM_INTERVAL_SECONDS: Final = 60.0

_log = structlog.get_logger("gensokyo_idmap.memory")
#: glibc's mmap threshold while the stores open: its initial one, kept (module docstring).
OPENING_MMAP_THRESHOLD: Final = 128 * 1024
#: glibc's mmap threshold once they are open (its trim threshold: twice that, glibc's ratio).
RUNNING_MMAP_THRESHOLD: Final = 2 * 1024 * 1024
_M_TRIM_THRESHOLD: Final = -1  # mallopt's parameters (malloc.h)
_M_MMAP_THRESHOLD: Final = -3
#: Container objects made and not yet freed that start a young collection in the daemon
#: (CPython's default: 700, less than what 32 sends in flight hold; see the module's note).
YOUNG_COLLECTION_THRESHOLD: Final = 10_000


def collect_less_often(threshold: int = YOUNG_COLLECTION_THRESHOLD) -> None:
    """Start the collector's young collections only after ``threshold`` more container
    objects were made than freed (never lowering it); the older generations' thresholds
    are kept. For the daemon process: a library must not change its host's collector."""
    young, older, oldest = gc.get_threshold()
    gc.set_threshold(max(young, threshold), older, oldest)


def _libc_function(name: str) -> Any | None:
    """A function of the C library, or None where it has none by that name."""
    library = ctypes.util.find_library("c")
    if library is None:
        return None
    try:
        return getattr(ctypes.CDLL(library), name)
    except (OSError, AttributeError):
        return None


def malloc_trim_function() -> Callable[[], int] | None:
    """glibc's ``malloc_trim(0)`` as a function returning 1 when it released memory, or
    None where the C library has none."""
    trim = _libc_function("malloc_trim")
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: int(trim(0))


def set_malloc_thresholds(mmap_threshold: int, trim_threshold: int | None = None) -> bool:
    """Fix glibc's mmap threshold (and its trim threshold, if given) in bytes: glibc adjusts
    them no more (module docstring). False where the C library has no ``mallopt`` or it
    refused. For the daemon process: a library must not change its host's allocator."""
    mallopt = _libc_function("mallopt")
    if mallopt is None:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    done = bool(mallopt(_M_MMAP_THRESHOLD, mmap_threshold))
    if trim_threshold is not None:
        done = bool(mallopt(_M_TRIM_THRESHOLD, trim_threshold)) and done
    return done


async def run_trimmer(stop: asyncio.Event,
                      interval_seconds: float = TRIM_INTERVAL_SECONDS,
                      trim: Callable[[], int] | None = None,
                      sweep: Callable[[], None] | None = None,
                      started: asyncio.Event | None = None) -> None:
    """The memory chore: every ``interval_seconds`` until ``stop`` is set, ``sweep`` (on
    the event loop: the in-memory tables forget what their rules let them,
    :meth:`gensokyo_idmap.tables.Tables.sweep`), then the trim, which hands what they held
    back to the system (nothing where there is no ``malloc_trim``). ``trim`` defaults to
    :func:`malloc_trim_function`'s.

    With ``started``, one trim more as soon as it is set (the daemon's start-up is over):
    reading the modules' code, building the config's models and opening the stores leave
    free pages between what stays in the heap, which an idle daemon would otherwise hold
    until the first interval is up (0.6 MiB of an idle daemon's 57.5, daemons with and
    without this trim alternating)."""
    if trim is None:
        trim = malloc_trim_function()
    if trim is None:
        _log.debug("[app] no malloc_trim in this C library: free memory stays with it")
        if sweep is None:
            return
    loop = asyncio.get_running_loop()
    if started is not None and trim is not None:
        await _first_of(started, stop)
        if not stop.is_set():
            await loop.run_in_executor(None, trim)
    async for _ in every(interval_seconds, stop):
        if sweep is not None:
            sweep()
        if trim is not None:
            await loop.run_in_executor(None, trim)


async def _first_of(*events: asyncio.Event) -> None:
    """Return once any of ``events`` is set."""
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
