"""DeliveryLog: each platform event is processed once, repeats wait for the first outcome;
with durable claims also after the process is gone: DurableClaims on a real msgid-map.db,
and RedisClaims on a Redis prefix of the test's own (the same tests, parametrised)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from gensokyo_idmap.runtime.claims import SWEEP_SECONDS, ClaimStore, DeliveryLog, DurableClaims
from gensokyo_idmap.runtime.redis.state import RedisClaims
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore
from gensokyo_idmap.runtime.redis.scripts import RedisMsgIds
from gensokyo_idmap.runtime.redis.connection import RedisRuntime

from ..conftest import MSGID_BACKENDS, FakeClock

#: Opens the claims of one "process" (window, clock); closing it ends that process.
OpenClaims = Callable[[float, FakeClock], AbstractContextManager[ClaimStore]]


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
        assert await log.claim("msg:a") is None  # the first delivery processes it
        repeat = await log.claim("msg:a")
        assert repeat is not None and not repeat.done()
        same = await log.claim("msg:a")
        assert same is repeat  # every repeat waits on one future
        log.finish("msg:a", None)
        await repeat  # resolved without error
        later = await log.claim("msg:a")
        assert later is not None and later.done() and later.exception() is None
        assert await log.claim("msg:b") is None  # another key is not affected

    run(main())


def test_a_failed_delivery_is_forgotten_and_its_waiters_hear_why() -> None:
    async def main() -> None:
        log = DeliveryLog()
        assert await log.claim("msg:a") is None
        repeat = await log.claim("msg:a")
        assert repeat is not None
        log.finish("msg:a", RuntimeError("store down"))
        with pytest.raises(RuntimeError, match="store down"):
            await repeat
        assert await log.claim("msg:a") is None  # the redelivery tries again
        log.finish("msg:a", None)
        assert await log.claim("msg:a") is not None

    run(main())


def test_a_failure_nobody_waited_for_still_lets_the_redelivery_in() -> None:
    async def main() -> None:
        log = DeliveryLog()
        assert await log.claim("msg:a") is None
        log.finish("msg:a", ValueError("bad"))
        assert await log.claim("msg:a") is None

    run(main())


def test_entries_expire_after_the_ttl_and_the_oldest_go_beyond_the_limit() -> None:
    async def main() -> None:
        clock = Clock()
        log = DeliveryLog(ttl=60.0, limit=3, clock=clock)
        for key in ("k1", "k2", "k3"):
            assert await log.claim(key) is None
            log.finish(key, None)
        assert await log.claim("k4") is None  # the limit: k1, the oldest, is dropped
        log.finish("k4", None)
        assert await log.claim("k4") is not None  # still remembered (k2 makes room)
        assert await log.claim("k1") is None  # forgotten: processed again
        log.finish("k1", None)
        clock.now += 61
        assert await log.claim("k1") is None  # expired

    run(main())


def test_each_entry_expires_at_its_own_time() -> None:
    """Old entries are only looked at when the oldest is due; each still goes at its time."""
    async def main() -> None:
        clock = Clock()
        log = DeliveryLog(ttl=60.0, clock=clock)
        for key, at in (("k1", 0.0), ("k2", 30.0), ("k3", 59.0)):
            clock.now = at
            assert await log.claim(key) is None
            log.finish(key, None)
        clock.now = 61.0
        assert await log.claim("k2") is not None and await log.claim("k3") is not None
        assert await log.claim("k1") is None  # due at 60: forgotten
        log.finish("k1", None)
        clock.now = 91.0
        assert await log.claim("k2") is None  # due at 90
        log.finish("k2", None)
        assert await log.claim("k3") is not None  # due at 119
        clock.now = 500.0
        assert await log.claim("k3") is None and await log.claim("k1") is None  # all gone, then anew
        log.finish("k3", None)
        log.finish("k1", None)
        clock.now = 530.0
        assert await log.claim("k3") is not None

    run(main())


def test_an_entry_past_its_window_is_absent_before_any_sweep() -> None:
    """The entries past their window are dropped at most every SWEEP_SECONDS, but each is
    absent from the moment its window ends: the window is the rule, not the sweep."""
    async def main() -> None:
        clock = Clock()
        log = DeliveryLog(ttl=60.0, clock=clock)
        assert await log.claim("k1") is None
        log.finish("k1", None)
        clock.now += SWEEP_SECONDS / 2
        assert await log.claim("k2") is None  # a sweep after this one is at least 10 s off
        log.finish("k2", None)
        clock.now += 60.0 - SWEEP_SECONDS / 2  # k1's window is over, k2's is not
        assert len(log) == 2  # no sweep since: both held
        assert await log.claim("k2") is not None
        assert await log.claim("k1") is None  # gone all the same: processed again
        log.finish("k1", None)

    run(main())


def test_a_key_remembered_is_not_kept_as_an_object() -> None:
    """The log keeps a key's hash, not the key: the strings of a flood's events do not
    outlive them for the window, scattered over the memory the flood took, which Python
    could then not give back (runtime/key_times.py)."""
    async def main() -> None:
        clock = Clock()
        log = DeliveryLog(ttl=60.0, clock=clock)
        keys = ["".join(("msg:", "flood", str(n))) for n in range(100)]  # made here
        held = [sys.getrefcount(key) for key in keys]
        assert [await log.claim(key) for key in keys] == [None] * 100
        log.finish_all(keys, None)
        assert [sys.getrefcount(key) for key in keys] == held
        assert all([await log.claim(f"msg:flood{n}") is not None for n in range(100)])
        clock.now += 61
        assert await log.claim("msg:flood7") is None

    run(main())


def test_the_memory_chore_forgets_what_is_past_its_window_without_traffic() -> None:
    """After a flood, no claim comes to drop the flood's keys: forget() does, keeping each
    key still within its window; the table's memory goes with them."""
    async def main() -> None:
        clock = Clock()
        log = DeliveryLog(ttl=60.0, clock=clock)
        keys = [f"msg:flood{n}" for n in range(5000)]
        for key in keys:
            assert await log.claim(key) is None
        log.finish_all(keys, None)
        flooded = log.footprint()
        clock.now += 30
        assert await log.claim("msg:late") is None
        log.finish("msg:late", None)
        clock.now += 30  # the flood's window is over, the late key's is not
        log.forget()
        assert len(log) == 1 and await log.claim("msg:late") is not None
        assert log.footprint() < flooded / 20  # its hash table shrunk too
        clock.now += 30
        log.forget()
        assert len(log) == 0

    run(main())


def test_a_batch_finishes_at_one_time_and_keeps_the_limit() -> None:
    async def main() -> None:
        clock = Clock()
        log = DeliveryLog(ttl=60.0, limit=100, clock=clock)
        for first in range(0, 1000, 10):
            keys: list[str | None] = [f"k{n}" for n in range(first, first + 10)]
            claimed = await log.claim_all([*keys, None])
            assert claimed == [None] * 11
            clock.now += 0.001
            log.finish_all([*keys, None], None)
            assert len(log) <= 100
        assert await log.claim("k999") is not None  # the newest are kept
        assert await log.claim("k0") is None  # the oldest went for room

    run(main())


def test_a_failed_batch_is_forgotten_at_once() -> None:
    async def main() -> None:
        log = DeliveryLog()
        assert await log.claim_all(["a", "b"]) == [None, None]
        log.finish_all(["a", None, "b"], ValueError("sink broke"))
        assert await log.claim_all(["a", "b"]) == [None, None]  # tried again

    run(main())


def test_remember_marks_a_key_as_processed() -> None:
    async def main() -> None:
        log = DeliveryLog()
        log.remember("msg:owed")
        earlier = await log.claim("msg:owed")
        assert earlier is not None and earlier.done()
        log.finish("msg:owed", None)  # finishing a key nobody claimed changes nothing
        assert await log.claim("msg:owed") is not None

    run(main())


# --- durable claims (module rules 2 to 5) ----------------------------------------------------


@pytest.fixture(params=MSGID_BACKENDS)
def open_claims(request: pytest.FixtureRequest, msgid_db_path: Path) -> OpenClaims:
    """Claims of one process: msgid-map.db opened afresh, or a new client of one Redis
    prefix (what a restarted daemon, or another daemon, sees)."""
    if request.param == "redis":
        ids = RedisMsgIds(request.getfixturevalue("redis_runtime"))

        @contextmanager
        def on_redis(window: float, clock: FakeClock) -> Iterator[ClaimStore]:
            yield RedisClaims(ids, window, clock=clock)

        return on_redis

    @contextmanager
    def on_lmdb(window: float, clock: FakeClock) -> Iterator[ClaimStore]:
        store = LmdbMsgIdStore(msgid_db_path)
        try:
            yield DurableClaims(store, window, clock=clock)
        finally:
            store.close()

    return on_lmdb


def test_committed_claims_outlive_the_process_for_the_window(
        open_claims: OpenClaims, clock: FakeClock) -> None:
    window = 660.0

    async def first() -> None:
        with open_claims(window, clock) as claims:
            log = DeliveryLog(ttl=window, claims=claims)
            assert await log.claim_all(["msg:a", "msg:b", None]) == [None, None, None]
            await log.commit(["msg:a", None])  # a was delivered; b is still in flight
            log.finish("msg:a", None)
        # the process ends (its memory with it), b never finished

    async def restarted(expect_a_repeat: bool) -> None:
        with open_claims(window, clock) as claims:
            log = DeliveryLog(ttl=window, claims=claims)
            a, b = await log.claim_all(["msg:a", "msg:b"])
            assert (a is not None) == expect_a_repeat and b is None
            if a is not None:
                assert a.done() and a.exception() is None
                assert await log.claim("msg:a") is not None  # and now remembered in memory
            log.finish("msg:b", RuntimeError("not this time"))

    run(first())
    clock.advance(659)
    run(restarted(expect_a_repeat=True))
    clock.advance(2)  # the window has passed
    run(restarted(expect_a_repeat=False))


def test_a_failed_delivery_leaves_no_durable_claim(open_claims: OpenClaims,
                                                   clock: FakeClock) -> None:
    async def main() -> None:
        with open_claims(660.0, clock) as claims:
            log = DeliveryLog(ttl=660.0, claims=claims)
            assert await log.claim("msg:a") is None
            log.finish("msg:a", RuntimeError("socket gone"))  # never committed
        with open_claims(660.0, clock) as claims:
            log = DeliveryLog(ttl=660.0, claims=claims)
            assert await log.claim("msg:a") is None  # the redelivery tries again

    run(main())


def test_any_key_can_be_claimed_long_or_not_valid_unicode(open_claims: OpenClaims,
                                                           clock: FakeClock) -> None:
    keys = ["evt:" + "x" * 5000, "msg:\ud83d", "msg:é" * 100, "evt:" + "x" * 4999 + "y"]

    async def main() -> None:
        with open_claims(60.0, clock) as claims:
            await claims.record(keys[:3])
            assert await claims.known(keys) == set(keys[:3])

    run(main())


def test_memory_covers_every_live_claim_once_the_first_window_is_over(
        open_claims: OpenClaims, clock: FakeClock) -> None:
    """After the first window the store is not read (rule 4), so memory must hold each claim
    as long as the store does: from when its (slow) delivery finished, and entries dropped
    for room make the store be read again."""
    async def main() -> None:
        with open_claims(60.0, clock) as claims:
            await in_memory_and_store(DeliveryLog(ttl=60.0, limit=3, clock=clock,
                                                  claims=claims))

    async def in_memory_and_store(log: DeliveryLog) -> None:
        assert await log.claim("msg:slow") is None
        clock.advance(30)  # a slow delivery: finished and claimed 30 s after it came
        await log.commit(["msg:slow"])
        log.finish("msg:slow", None)
        clock.advance(40)  # 70 s after it came, 40 s after its claim
        assert await log.claim("msg:slow") is not None
        for key in ("k1", "k2", "k3", "k4"):  # k1 is dropped for room
            assert await log.claim(key) is None
            await log.commit([key])
            log.finish(key, None)
        assert await log.claim("k1") is not None  # found in the store
        assert await log.claim("k5") is None

    run(main())


class PassedOn:
    """Real claims, each call passed on (subclasses watch or hold some)."""

    def __init__(self, claims: DurableClaims | RedisClaims) -> None:
        self.claims = claims
        self.shared = claims.shared

    async def start(self, keys: list[str]) -> tuple[set[str], set[str]]:
        return await self.claims.start(keys)

    async def known(self, keys: list[str]) -> set[str]:
        return await self.claims.known(keys)

    def abandon(self, keys: list[str]) -> None:
        self.claims.abandon(keys)

    def held_for(self) -> float:
        return self.claims.held_for()

    async def record(self, keys: list[str]) -> None:
        await self.claims.record(keys)


class CountingLooks(PassedOn):
    """Real :class:`DurableClaims`, counting the looks into the store."""

    looks = 0

    async def start(self, keys: list[str]) -> tuple[set[str], set[str]]:
        self.looks += 1
        return await self.claims.start(keys)


def test_the_store_is_read_after_start_only_while_an_earlier_claim_lives(
        msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    """Rule 4: a store an earlier process left no live claim in holds nothing memory lacks,
    so a new key costs no look; one it left a claim in is looked into until that claim
    expires, and the claim is found."""
    async def main() -> None:
        claims = CountingLooks(DurableClaims(msgid_store, 60.0, clock=clock))
        first = DeliveryLog(ttl=60.0, clock=clock, claims=claims)
        assert await first.claim("msg:a") is None
        await first.commit(["msg:a"])
        first.finish("msg:a", None)
        assert claims.looks == 0  # a new store: nothing to find there
        clock.advance(20)  # a later process: msg:a's claim lives 40 s more
        later = DeliveryLog(ttl=60.0, clock=clock, claims=claims)
        assert await later.claim("msg:a") is not None
        assert claims.looks == 1
        clock.advance(39)
        assert await later.claim("msg:b") is None
        assert claims.looks == 2
        clock.advance(2)  # msg:a's claim expired: nothing of the earlier process is alive
        assert await later.claim("msg:c") is None
        assert claims.looks == 2

    run(main())


class HeldAfterStart(PassedOn):
    """Real :class:`RedisClaims` whose ``start`` calls after the first are held once Redis
    answered them (their marks are set) until ``go`` is set: the window between a batch's
    look at Redis and its decision, which the event loop may fill with another's failure."""

    def __init__(self, claims: RedisClaims) -> None:
        super().__init__(claims)
        self.starts = 0
        self.answered = asyncio.Event()
        self.go = asyncio.Event()

    async def start(self, keys: list[str]) -> tuple[set[str], set[str]]:
        self.starts += 1
        held = self.starts > 1
        result = await self.claims.start(keys)
        if held:
            self.answered.set()
            await self.go.wait()
        return result


def test_a_failed_delivery_leaves_the_mark_a_later_batch_here_delivers_under(
        redis_runtime: RedisRuntime, clock: FakeClock) -> None:
    """Batch A and batch B of one daemon both look up ``msg:a`` (B's look marks it again);
    A delivers it and fails while B's decision is still to come; B then delivers it. The
    in-flight mark must be there while B delivers (else another daemon would deliver a
    platform retry of it at the same time), and go once B's delivery fails too."""
    ids = RedisMsgIds(redis_runtime)
    mark_key = redis_runtime.prefix + "d:msg:a"

    async def main() -> None:
        claims = HeldAfterStart(RedisClaims(ids, 660.0, clock=clock))
        log = DeliveryLog(ttl=660.0, claims=claims)
        batch_a = asyncio.create_task(log.claim_all(["msg:a"]))
        batch_b = asyncio.create_task(log.claim_all(["msg:a"]))
        assert await batch_a == [None]  # A delivers
        await claims.answered.wait()  # B's look marked it again, B not decided yet
        log.finish("msg:a", RuntimeError("framework gone"))  # A's delivery failed
        claims.go.set()
        assert await batch_b == [None]  # B delivers it now: the redelivery A's failure allows
        assert redis_runtime.sync.get(mark_key) is not None  # under the mark
        log.finish("msg:a", RuntimeError("framework gone again"))
        assert redis_runtime.sync.get(mark_key) is None  # and nothing marks it now

    run(main())
