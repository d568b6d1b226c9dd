"""TurnBatches: events handed over during one turn of the loop go to the pipeline together;
each caller hears its batch's outcome."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from gensokyo_idmap.bridge.turn_batches import TurnBatches

from ..conftest import run


class Pipeline:
    """Records each batch; a batch holding "bad" fails; ``hold`` keeps batches waiting."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.finished: list[list[str]] = []
        self.hold = asyncio.Event()
        self.hold.set()

    async def __call__(self, events: Sequence[str]) -> None:
        self.batches.append(list(events))
        await self.hold.wait()
        if "bad" in events:
            raise RuntimeError("store unavailable")
        self.finished.append(list(events))


def held() -> tuple[Pipeline, TurnBatches[str]]:
    """A pipeline whose batches wait for ``hold``, and the batches feeding it."""
    pipeline = Pipeline()
    pipeline.hold.clear()
    return pipeline, TurnBatches(pipeline)


async def turns(count: int = 2) -> None:
    """Let the loop run ``count`` turns (a batch starts at the end of one, runs in the next)."""
    for _ in range(count):
        await asyncio.sleep(0)


def test_the_events_of_one_turn_go_as_one_batch_and_each_caller_waits_for_it() -> None:
    async def main() -> None:
        pipeline, batches = held()
        first = [asyncio.ensure_future(batches(e)) for e in ("a", "b", "c")]
        await turns()
        later = asyncio.ensure_future(batches("d"))  # a later turn: a batch of its own
        await turns()
        assert pipeline.batches == [["a", "b", "c"], ["d"]]  # both under way at once
        assert not any(f.done() for f in [*first, later])  # nobody before its batch is done
        pipeline.hold.set()
        await asyncio.gather(*first, later)
        assert pipeline.finished == [["a", "b", "c"], ["d"]]

    run(main())


def test_a_failed_batch_fails_each_of_its_callers_and_no_other() -> None:
    async def main() -> None:
        pipeline = Pipeline()
        batches = TurnBatches(pipeline)
        failing = [batches(e) for e in ("a", "bad")]
        await asyncio.sleep(0)
        fine = batches("c")
        for done in failing:
            with pytest.raises(RuntimeError, match="store unavailable"):
                await done
        await fine
        assert pipeline.finished == [["c"]]

    run(main())


def test_a_caller_that_stops_waiting_stops_nothing() -> None:
    async def main() -> None:
        pipeline, batches = held()
        gone = asyncio.ensure_future(batches("a"))
        staying = asyncio.ensure_future(batches("b"))
        await turns()
        gone.cancel()  # its HTTP request went away
        await asyncio.sleep(0)
        pipeline.hold.set()
        await staying
        assert pipeline.finished == [["a", "b"]]

    run(main())


def test_drain_starts_this_turns_batch_and_waits_for_every_batch_under_way() -> None:
    async def main() -> None:
        pipeline, batches = held()
        first = batches("a")
        await asyncio.sleep(0)
        second = batches("b")  # handed over this turn, not started yet
        draining = asyncio.ensure_future(batches.drain())
        await turns()
        assert pipeline.batches == [["a"], ["b"]] and not draining.done()
        pipeline.hold.set()
        await draining
        assert pipeline.finished == [["a"], ["b"]] and first.done() and second.done()

    run(main())


def test_several_events_handed_over_at_once_join_the_batch_of_that_turn() -> None:
    """``add_all`` (a gateway's read): its events join the batch of the turn, in order,
    with one future for them that hears the batch's outcome, as single callers do."""
    async def main() -> None:
        pipeline, batches = held()
        one = asyncio.ensure_future(batches("a"))
        many = batches.add_all(["b", "c"])
        failing = batches.add_all(["d"])
        await turns()
        assert pipeline.batches == [["a", "b", "c", "d"]]
        assert not many.done()
        pipeline.hold.set()
        await asyncio.gather(one, many)
        later = batches.add_all(["bad", "e"])
        with pytest.raises(RuntimeError, match="store unavailable"):
            await later
        assert failing.done() and failing.exception() is None

    run(main())
