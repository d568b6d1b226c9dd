"""memory.py: free memory goes back to the system, on a worker thread, until stop."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import textwrap
from collections.abc import Callable

import pytest

from gensokyo_idmap.memory import (
    YOUNG_COLLECTION_THRESHOLD,
    malloc_trim_function,
    run_trimmer,
)

GLIBC = sys.platform.startswith("linux") and malloc_trim_function() is not None

# A child fragments its heap (every other block of 2,000 freed, each too large for
# pymalloc and too small for mmap) and prints RssAnon before and after one trim.
FRAGMENT_AND_TRIM = textwrap.dedent("""
    import random
    from gensokyo_idmap.memory import malloc_trim_function

    def anon_kib():
        for line in open("/proc/self/status"):
            if line.startswith("RssAnon:"):
                return int(line.split()[1])

    random.seed(1)
    blocks = [bytearray(random.randint(16_384, 65_536)) for _ in range(2_000)]
    del blocks[::2]
    before = anon_kib()
    released = malloc_trim_function()()
    print(before, anon_kib(), released)
""")


@pytest.mark.skipif(not GLIBC, reason="malloc_trim is glibc's; this C library has none")
def test_a_trim_gives_freed_memory_back() -> None:
    done = subprocess.run([sys.executable, "-c", FRAGMENT_AND_TRIM], capture_output=True,
                          text=True, timeout=60, check=True)
    before, after, released = map(int, done.stdout.split())
    assert released == 1
    # about 40 MiB were freed behind blocks still in use; most of it must go back
    assert before - after > 20 * 1024, (before, after)


# A child sets glibc's thresholds as the daemon does at one of its steps (or leaves glibc's
# own), takes a 256 KiB block (asyncio's read buffer), frees a 2 MiB one (as LMDB's page
# lists are, when a scratch environment closes), takes a 1 MiB one, and says where each of
# the two is: in the heap (the [heap] of /proc/self/maps) or a mapping of its own.
WHERE_BLOCKS_GO = textwrap.dedent("""
    import ctypes, ctypes.util, sys
    from gensokyo_idmap import memory

    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.calloc.restype = libc.malloc.restype = ctypes.c_void_p
    libc.calloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    if sys.argv[1] == "opening":
        assert memory.set_malloc_thresholds(memory.OPENING_MMAP_THRESHOLD)
    elif sys.argv[1] == "running":
        assert memory.set_malloc_thresholds(memory.RUNNING_MMAP_THRESHOLD,
                                            2 * memory.RUNNING_MMAP_THRESHOLD)

    def where(block):
        for line in open("/proc/self/maps"):
            span, *rest = line.split()
            start, end = (int(part, 16) for part in span.split("-"))
            if start <= block < end:
                return "heap" if rest[-1] == "[heap]" else "mapped"

    read = libc.malloc(256 << 10)
    libc.free(libc.calloc(1, 2 << 20))
    print(where(read), where(libc.malloc(1 << 20)))
""")


@pytest.mark.skipif(not GLIBC, reason="mallopt's thresholds are glibc's")
@pytest.mark.parametrize(("step", "where"), [
    ("glibc's", ["mapped", "heap"]),  # raised by the free: the next large block in the heap
    ("opening", ["mapped", "mapped"]),  # held: LMDB's next lists are mappings
    ("running", ["heap", "heap"]),  # fixed where glibc's raise went: reads in the heap
])
def test_the_daemons_thresholds_decide_where_large_blocks_go(step: str,
                                                              where: list[str]) -> None:
    done = subprocess.run([sys.executable, "-c", WHERE_BLOCKS_GO, step],
                          capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == where


def test_the_trimmer_trims_on_a_worker_thread_until_stopped() -> None:
    calls: list[str] = []

    def trim() -> int:
        calls.append(threading.current_thread().name)
        return 0

    async def scenario() -> int:
        stop = asyncio.Event()
        task = asyncio.create_task(run_trimmer(stop, interval_seconds=0.01, trim=trim))
        for _ in range(500):
            if len(calls) >= 3:
                break
            await asyncio.sleep(0.01)
        stop.set()
        await asyncio.wait_for(task, 5)
        seen = len(calls)
        await asyncio.sleep(0.05)
        return seen

    seen = asyncio.run(scenario())
    assert seen >= 3
    assert threading.main_thread().name not in calls
    assert len(calls) == seen  # nothing after stop


def test_without_malloc_trim_the_trimmer_ends_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gensokyo_idmap.memory.malloc_trim_function", lambda: None)
    asyncio.run(asyncio.wait_for(run_trimmer(asyncio.Event(), interval_seconds=0.01), 5))


def test_the_chore_sweeps_the_tables_on_the_loop_before_each_trim(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The one memory chore (issue 36.3): each minute the tables forget (on the event loop:
    they are the loop's), then the trim hands what they held back; with no malloc_trim the
    tables are swept all the same."""
    calls: list[tuple[str, bool]] = []

    def on_loop() -> bool:
        return threading.current_thread() is threading.main_thread()

    def trim() -> int:
        calls.append(("trim", on_loop()))
        return 0

    def sweep() -> None:
        calls.append(("sweep", on_loop()))

    async def scenario(trim: Callable[[], int] | None) -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(run_trimmer(stop, interval_seconds=0.01, trim=trim,
                                               sweep=sweep))
        for _ in range(500):
            if len([c for c in calls if c[0] == "sweep"]) >= 2:
                break
            await asyncio.sleep(0.01)
        stop.set()
        await asyncio.wait_for(task, 5)

    asyncio.run(scenario(trim))
    assert calls[:4] == [("sweep", True), ("trim", False), ("sweep", True), ("trim", False)]
    calls.clear()
    monkeypatch.setattr("gensokyo_idmap.memory.malloc_trim_function", lambda: None)
    asyncio.run(scenario(None))  # no malloc_trim in this C library
    assert calls[:2] == [("sweep", True), ("sweep", True)]


# A child holds 2,000 live lists at a time (as sends in flight hold their objects), 100
# times, and counts the collections started, with CPython's threshold and then with ours.
HOLD_AND_COUNT = textwrap.dedent("""
    import gc
    from gensokyo_idmap.memory import collect_less_often

    started = []
    gc.callbacks.append(lambda phase, info: phase == "start" and started.append(1))

    def hold():
        for _ in range(100):
            held = [[] for _ in range(2_000)]
            del held

    hold()
    before = len(started)
    thresholds = gc.get_threshold()
    collect_less_often()
    started.clear()
    hold()
    print(before, len(started), thresholds[1:] == gc.get_threshold()[1:], gc.get_threshold()[0])
""")


def test_collect_less_often_lets_what_is_in_flight_live_without_collections() -> None:
    done = subprocess.run([sys.executable, "-c", HOLD_AND_COUNT], capture_output=True,
                          text=True, timeout=60, check=True)
    before, after, older_kept, young = done.stdout.split()
    assert int(before) >= 100  # CPython's 700: collections while 2,000 are alive
    assert int(after) == 0
    assert older_kept == "True"
    assert int(young) == YOUNG_COLLECTION_THRESHOLD


def test_the_trimmer_trims_once_as_soon_as_the_start_up_is_over() -> None:
    """With ``started``: nothing before it is set, one trim at once when it is (the
    interval is an hour here), none once stopped before it."""
    calls: list[str] = []

    def trim() -> int:
        calls.append("trim")
        return 0

    async def scenario(set_started: bool) -> list[int]:
        stop, started = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(run_trimmer(stop, interval_seconds=3600, trim=trim,
                                               started=started))
        await asyncio.sleep(0.05)
        seen = [len(calls)]
        if set_started:
            started.set()
            for _ in range(500):
                if calls:
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
        seen.append(len(calls))
        stop.set()
        await asyncio.wait_for(task, 5)
        seen.append(len(calls))
        return seen

    assert asyncio.run(scenario(True)) == [0, 1, 1]
    calls.clear()
    assert asyncio.run(scenario(False)) == [0, 0, 0]
