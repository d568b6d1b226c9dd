"""The group committer itself (store/group_commit.py), with a batch runner of the test's own:
what the stores' contract tests cannot arrange on purpose, a batch made of several hand-overs
(two event loops, two turns of one of them, and a thread), each waiter getting its own
function's result, on its own loop, only once the batch's commit returned."""

from __future__ import annotations

import asyncio
import gc
import weakref
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from gensokyo_idmap.store.group_commit import GroupCommitter, Outcome, succeeded


def test_a_batch_of_several_hand_overs_wakes_each_waiter_with_its_own_result() -> None:
    holding = threading.Event()
    release = threading.Event()
    committed: list[int] = []  # the size of each batch, appended once it is "durable"

    def run_batch(fns: Sequence[Callable[[Any], Any]]) -> list[Outcome[Any]]:
        if not committed and not holding.is_set():
            holding.set()  # the first batch holds the writer: the rest queue up meanwhile
            assert release.wait(10)
        outcomes = [succeeded(fn(None)) for fn in fns]
        committed.append(len(fns))
        return outcomes

    committer = GroupCommitter(run_batch, name="test-writer")
    results: dict[str, list[Any]] = {}
    queued = {name: threading.Event() for name in ("a", "b")}

    def loop_thread(name: str, turns: tuple[int, ...]) -> None:
        async def submit_in_turns() -> None:
            futures: list[asyncio.Future[Any]] = []
            for size in turns:
                start = len(futures)
                futures += [committer.submit(lambda _, i=i: f"{name}{i}")
                            for i in range(start, start + size)]
                await asyncio.sleep(0)  # the turn ends: its writes are handed over
            queued[name].set()
            results[name] = list(await asyncio.gather(*futures))
            # woken after the commit holding them returned, and on this loop
            results[name].append((committed[:], asyncio.get_running_loop() is loop))

        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(submit_in_turns())
        finally:
            loop.close()

    first = threading.Thread(target=committer.submit_sync, args=(lambda _: "first",))
    first.start()
    try:
        assert holding.wait(10)
        threads = [threading.Thread(target=loop_thread, args=("a", (3, 2))),
                   threading.Thread(target=loop_thread, args=("b", (2,)))]
        for thread in threads:
            thread.start()
        assert all(event.wait(10) for event in queued.values())
        alone: list[Any] = []
        threads.append(threading.Thread(
            target=lambda: alone.append(committer.submit_sync(lambda _: "sync"))))
        threads[-1].start()
        deadline = time.monotonic() + 10
        while committer._queue.qsize() < 4 and time.monotonic() < deadline:  # noqa: SLF001
            time.sleep(0.001)  # the thread's write is queued: a wait, not a timing
        release.set()
        for thread in [first, *threads]:
            thread.join(10)
    finally:
        release.set()
        committer.close()

    assert committed == [1, 8]  # three turns of two loops and a thread: one batch
    assert results["a"] == ["a0", "a1", "a2", "a3", "a4", ([1, 8], True)]
    assert results["b"] == ["b0", "b1", ([1, 8], True)]
    assert alone == ["sync"]
    assert (committer.batches, committer.writes) == (2, 9)


class _Write:
    """A write function that a weak reference can watch."""

    def __call__(self, _view: Any) -> str:
        return "done"


def test_the_writer_keeps_nothing_of_a_batch_while_it_waits_for_the_next() -> None:
    """A flood's last batch (its functions, futures and results) is not kept alive by the
    writer thread until the next write comes, which may be minutes later: objects of a
    flood that outlive it keep the memory the flood took from being given back."""
    committer = GroupCommitter(lambda fns: [succeeded(fn(None)) for fn in fns],
                               name="test-writer")
    try:
        write = _Write()
        watched = weakref.ref(write)
        assert committer.submit_sync(write) == "done"
        del write
        gc.collect()
        deadline = time.monotonic() + 10
        while watched() is not None and time.monotonic() < deadline:
            time.sleep(0.001)  # the writer's frame lets go after the wake-up: a wait
        assert watched() is None
    finally:
        committer.close()
