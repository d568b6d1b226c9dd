"""periodic.every: a tick per interval, none at the start, and a stop ends a long wait."""

from __future__ import annotations

import asyncio

from gensokyo_idmap.periodic import every


def test_ticks_until_stopped_and_none_after() -> None:
    async def scenario() -> int:
        stop = asyncio.Event()
        ticks = 0
        async for _ in every(0.001, stop):
            ticks += 1
            if ticks == 3:
                stop.set()
        return ticks

    assert asyncio.run(scenario()) == 3


def test_a_stop_ends_an_hour_long_wait() -> None:
    async def scenario() -> list[None]:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(0.01, stop.set)
        return [tick async for tick in every(3600, stop)]

    assert asyncio.run(asyncio.wait_for(scenario(), 30)) == []
