"""DeliveryLog: each platform event is processed once, repeats wait for the first outcome."""

from __future__ import annotations

import asyncio

import pytest

from gensokyo_idmap.dedup import DeliveryLog


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def run(coro: object) -> object:
    return asyncio.run(asyncio.wait_for(coro, 10))  # type: ignore[arg-type]


def test_a_repeat_in_flight_waits_for_the_first_and_a_later_one_is_done_at_once() -> None:
    async def main() -> None:
        log = DeliveryLog()
        assert log.claim("msg:a") is None  # the first delivery processes it
        repeat = log.claim("msg:a")
        assert repeat is not None and not repeat.done()
        same = log.claim("msg:a")
        assert same is repeat  # every repeat waits on one future
        log.finish("msg:a", None)
        await repeat  # resolved without error
        later = log.claim("msg:a")
        assert later is not None and later.done() and later.exception() is None
        assert log.claim("msg:b") is None  # another key is not affected

    run(main())


def test_a_failed_delivery_is_forgotten_and_its_waiters_hear_why() -> None:
    async def main() -> None:
        log = DeliveryLog()
        assert log.claim("msg:a") is None
        repeat = log.claim("msg:a")
        assert repeat is not None
        log.finish("msg:a", RuntimeError("store down"))
        with pytest.raises(RuntimeError, match="store down"):
            await repeat
        assert log.claim("msg:a") is None  # the redelivery tries again
        log.finish("msg:a", None)
        assert log.claim("msg:a") is not None

    run(main())


def test_a_failure_nobody_waited_for_still_lets_the_redelivery_in() -> None:
    async def main() -> None:
        log = DeliveryLog()
        assert log.claim("msg:a") is None
        log.finish("msg:a", ValueError("bad"))
        assert log.claim("msg:a") is None

    run(main())


def test_entries_expire_after_the_ttl_and_the_oldest_go_beyond_the_limit() -> None:
    async def main() -> None:
        clock = Clock()
        log = DeliveryLog(ttl=60.0, limit=3, clock=clock)
        for key in ("k1", "k2", "k3"):
            assert log.claim(key) is None
            log.finish(key, None)
        assert log.claim("k4") is None  # the limit: k1, the oldest, is dropped
        log.finish("k4", None)
        assert log.claim("k4") is not None  # still remembered (k2 makes room)
        assert log.claim("k1") is None  # forgotten: processed again
        log.finish("k1", None)
        clock.now += 61
        assert log.claim("k1") is None  # expired

    run(main())


def test_each_entry_expires_at_its_own_time() -> None:
    """Old entries are only looked at when the oldest is due; each still goes at its time."""
    async def main() -> None:
        clock = Clock()
        log = DeliveryLog(ttl=60.0, clock=clock)
        for key, at in (("k1", 0.0), ("k2", 30.0), ("k3", 59.0)):
            clock.now = at
            assert log.claim(key) is None
            log.finish(key, None)
        clock.now = 61.0
        assert log.claim("k2") is not None and log.claim("k3") is not None
        assert log.claim("k1") is None  # due at 60: forgotten
        log.finish("k1", None)
        clock.now = 91.0
        assert log.claim("k2") is None  # due at 90
        log.finish("k2", None)
        assert log.claim("k3") is not None  # due at 119
        clock.now = 500.0
        assert log.claim("k3") is None and log.claim("k1") is None  # all gone, then anew
        log.finish("k3", None)
        log.finish("k1", None)
        clock.now = 530.0
        assert log.claim("k3") is not None

    run(main())


def test_remember_marks_a_key_as_processed() -> None:
    async def main() -> None:
        log = DeliveryLog()
        log.remember("msg:owed")
        earlier = log.claim("msg:owed")
        assert earlier is not None and earlier.done()
        log.finish("msg:owed", None)  # finishing a key nobody claimed changes nothing
        assert log.claim("msg:owed") is not None

    run(main())
