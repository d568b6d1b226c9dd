"""Per-chat turns and wait_all, on a real event loop (no sockets needed: pure asyncio)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gensokyo_idmap.bridge.chat_turns import ChatTurns, wait_all


def run(coro: object) -> object:
    return asyncio.run(asyncio.wait_for(coro, 10))  # type: ignore[arg-type]


async def _event(turns: ChatTurns, chat: str | None | tuple[str, ...], name: str,
                 delay: float, log: list[str]) -> None:
    """One event's (or, for a tuple of chats, one batch's) turn, logged."""
    async with turns.turn(*(chat if isinstance(chat, tuple) else (chat,))):
        log.append(f"start {name}")
        await asyncio.sleep(delay)
        log.append(f"end {name}")


def test_events_of_one_chat_run_one_at_a_time_in_arrival_order() -> None:
    turns = ChatTurns()
    log: list[str] = []

    async def main() -> None:
        await asyncio.gather(_event(turns, "g1", "a", 0.03, log),
                             _event(turns, "g1", "b", 0.0, log),
                             _event(turns, "g1", "c", 0.01, log))

    run(main())
    assert log == ["start a", "end a", "start b", "end b", "start c", "end c"]
    assert len(turns) == 0


def test_other_chats_and_no_chat_do_not_wait() -> None:
    turns = ChatTurns()
    log: list[str] = []

    async def main() -> None:
        await asyncio.gather(_event(turns, "g1", "slow", 0.05, log),
                             _event(turns, "g2", "other", 0.0, log),
                             _event(turns, None, "none", 0.0, log))

    run(main())
    assert log.index("end other") < log.index("end slow")
    assert log.index("end none") < log.index("end slow")
    assert len(turns) == 0


@pytest.mark.parametrize(("first_chat", "second_chats", "third_chat"), [
    ("g1", "g1", "g1"),
    ("g2", ("g1", "g2"), "g1"),  # the cancelled one is a batch: it hands g1 on after g2
])
def test_a_cancelled_waiter_lets_nobody_overtake_the_running_turn(
        first_chat: str, second_chats: str | tuple[str, ...], third_chat: str) -> None:
    turns = ChatTurns()
    log: list[str] = []

    async def main() -> None:
        first = asyncio.create_task(_event(turns, first_chat, "first", 0.05, log))
        await asyncio.sleep(0)
        second = asyncio.create_task(_event(turns, second_chats, "second", 0.0, log))
        await asyncio.sleep(0)
        third = asyncio.create_task(_event(turns, third_chat, "third", 0.0, log))
        await asyncio.sleep(0.01)
        second.cancel()
        with pytest.raises(asyncio.CancelledError):
            await second
        await asyncio.gather(first, third)

    run(main())
    assert log == ["start first", "end first", "start third", "end third"]
    assert len(turns) == 0


def test_an_error_in_a_turn_passes_the_turn_on() -> None:
    turns = ChatTurns()
    log: list[str] = []

    async def failing() -> None:
        async with turns.turn("g1"):
            await asyncio.sleep(0.01)
            raise ValueError("boom")

    async def main() -> None:
        results = await asyncio.gather(failing(), _event(turns, "g1", "next", 0.0, log),
                                       return_exceptions=True)
        assert isinstance(results[0], ValueError)

    run(main())
    assert log == ["start next", "end next"]
    assert len(turns) == 0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["g1", "g2", "g3"]),
                          st.sampled_from([0.0, 0.0, 0.001, 0.003])), min_size=1, max_size=12))
def test_any_mix_keeps_each_chat_in_order_and_exclusive(plan: list[tuple[str, float]]) -> None:
    turns = ChatTurns()
    log: list[str] = []

    async def main() -> None:
        await asyncio.gather(*(_event(turns, chat, f"{chat}:{i}", delay, log)
                               for i, (chat, delay) in enumerate(plan)))

    run(main())
    for chat in {c for c, _ in plan}:
        mine = [line for line in log if f" {chat}:" in line]
        expected = [f"{what} {chat}:{i}" for i, (c, _) in enumerate(plan) if c == chat
                    for what in ("start", "end")]
        assert mine == expected
    assert len(turns) == 0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from(["g1", "g2", "g3"]), min_size=1,
                                   max_size=3),
                          st.sampled_from([0.0, 0.0, 0.001, 0.003])), min_size=1, max_size=10))
def test_turns_of_several_chats_keep_every_chat_in_order_and_exclusive(
        plan: list[tuple[list[str], float]]) -> None:
    """A batch's turn holds all its chats at once: for each chat, the turns that name it
    start in arrival order, each after the one before ended."""
    turns = ChatTurns()
    log: list[str] = []

    async def main() -> None:
        await asyncio.gather(*(_event(turns, tuple(chats), f"#{i}", delay, log)
                               for i, (chats, delay) in enumerate(plan)))

    run(main())
    for chat in {c for chats, _ in plan for c in chats}:
        named = [i for i, (chats, _) in enumerate(plan) if chat in chats]
        mine = [line for line in log if int(line.split("#")[1]) in named]
        assert mine == [f"{what} #{i}" for i in named for what in ("start", "end")]
    assert len(turns) == 0


def test_wait_all_returns_when_every_future_is_done() -> None:
    async def main() -> list[bool]:
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in range(3)]
        done = loop.create_future()
        done.set_result(1)
        loop.call_later(0.01, futures[0].set_result, 1)
        loop.call_later(0.02, futures[1].set_result, 2)
        loop.call_later(0.03, futures[2].set_exception, RuntimeError("failed write"))
        start = loop.time()
        await wait_all([done, *futures], timeout=5.0)
        assert loop.time() - start < 4.0  # did not sit out the timeout
        futures[2].exception()  # retrieved: no "never retrieved" warning
        return [f.done() for f in futures]

    assert run(main()) == [True, True, True]


def test_wait_all_waits_for_older_futures_that_finish_after_the_newest() -> None:
    async def main() -> bool:
        loop = asyncio.get_running_loop()
        older, newest = loop.create_future(), loop.create_future()
        loop.call_later(0.01, newest.set_result, 1)
        loop.call_later(0.04, older.set_result, 1)
        await wait_all([older, newest], timeout=5.0)
        return older.done()

    assert run(main()) is True


def test_wait_all_keeps_one_deadline_for_all_the_futures() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        stuck, newest = loop.create_future(), loop.create_future()
        loop.call_later(0.03, newest.set_result, 1)
        start = loop.time()
        await wait_all([stuck, newest], timeout=0.06)
        return loop.time() - start

    assert 0.05 <= run(main()) < 0.5  # not 0.03 + another 0.06


def test_wait_all_gives_up_after_the_timeout_and_leaves_the_futures_alone() -> None:
    async def main() -> tuple[bool, bool]:
        loop = asyncio.get_running_loop()
        stuck = loop.create_future()
        await wait_all([stuck], timeout=0.02)
        return stuck.done(), stuck.cancelled()

    assert run(main()) == (False, False)


def test_wait_all_with_nothing_pending_returns_at_once() -> None:
    async def main() -> None:
        await wait_all([], timeout=0.0)

    run(main())


def test_the_memory_chore_keeps_the_turns_in_flight_and_shrinks_after_a_flood() -> None:
    """A chat leaves the table as its last turn ends; forget() keeps whatever is in
    flight and gives back the table a flood of chats grew."""
    turns = ChatTurns()

    async def main() -> None:
        async with turns.turn(*(f"g{n}" for n in range(5000))):
            flooded = turns.footprint()
        async with turns.turn("busy"):
            turns.forget()
            assert len(turns) == 1  # in flight: kept
            assert turns.footprint() < flooded / 20
            async with turns.turn("other"):
                pass
        assert len(turns) == 0

    run(main())
