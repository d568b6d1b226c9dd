"""What only a shared Redis has to show: several daemons on one prefix, FLUSHALL and a
Redis that goes away and comes back (a private redis-server for those two).

The contract the LMDB map keeps is tested on Redis too, by test_msgid.py,
test_msgid_stateful.py and bridge/test_dedup.py.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
from structlog.testing import capture_logs

from gensokyo_idmap.runtime.claims import DeliveryLog
from gensokyo_idmap.errors import StoreError
from gensokyo_idmap.runtime.msgid import INT32_MAX, MsgContext
from gensokyo_idmap.runtime.redis.state import (
    IN_FLIGHT_SECONDS,
    RedisClaims,
    RedisMsgIdMap,
    RedisReplyBudget,
)
from gensokyo_idmap.runtime.redis.scripts import RedisMsgIds
from gensokyo_idmap.runtime.redis.connection import RETRY_AFTER_SECONDS, RedisRuntime

from ...conftest import REDIS_URL, FakeClock, run, test_prefix
from ...test_backend_metrics import scraped
from ... import redis_server
from ...redis_server import PrivateRedis

private_redis = redis_server.private_redis  # the fixture, for this module's tests

APP = "102000001"
GROUP = MsgContext(APP, "group", "G1", "in")


class Daemons:
    """Runtimes of several "daemons" on one Redis and prefix; all keys go at the end."""

    def __init__(self, url: str = REDIS_URL, prefix: str | None = None) -> None:
        self.url = url
        self.prefix = prefix or test_prefix()
        self.runtimes: list[RedisRuntime] = []

    def runtime(self, clock: FakeClock | None = None) -> RedisRuntime:
        runtime = (RedisRuntime(self.url, self.prefix) if clock is None
                   else RedisRuntime(self.url, self.prefix, clock=clock))
        self.runtimes.append(runtime)
        return runtime

    def msgids(self, clock: FakeClock | None = None) -> RedisMsgIdMap:
        return RedisMsgIdMap(RedisMsgIds(self.runtime()), clock=clock or FakeClock())

    def close(self) -> None:
        if self.runtimes:
            try:
                self.runtimes[0].delete_all()
            except Exception:  # noqa: BLE001 - a stopped private server has nothing left
                pass
        for runtime in self.runtimes:
            runtime.sync.close()


@pytest.fixture
def daemons() -> Iterator[Daemons]:
    found = Daemons()
    yield found
    found.close()


def allocate_in_threads(maps: list[RedisMsgIdMap], reals: list[str], rounds: int
                        ) -> list[list[tuple[str, int]]]:
    """Each map on a thread (and event loop) of its own stores ``reals`` in batches, at the
    same time as the others: (real id, virtual id) per map, in the order stored."""
    results: list[list[tuple[str, int]]] = [[] for _ in maps]
    start = threading.Barrier(len(maps))

    def work(index: int) -> None:
        async def batches() -> None:
            start.wait()
            for r in range(rounds):
                chunk = reals[(index + r) % len(reals)::3][:20]
                ids = await maps[index].store_many([(real, GROUP) for real in chunk])
                results[index].extend(zip(chunk, ids, strict=True))

        asyncio.run(batches())

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(maps))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def assert_one_virtual_id_per_live_message(stored: list[list[tuple[str, int]]]) -> None:
    by_real: dict[str, set[int]] = {}
    for per_map in stored:
        for real, vid in per_map:
            by_real.setdefault(real, set()).add(vid)
    assert all(len(vids) == 1 for vids in by_real.values()), "a message got two ids"
    owners: dict[int, str] = {}
    for real, (vid,) in by_real.items():
        assert owners.setdefault(vid, real) == real, f"virtual id {vid} handed out twice"


# --- several daemons on one prefix --------------------------------------------------------


def test_two_daemons_allocating_at_once_never_share_a_virtual_id(daemons: Daemons) -> None:
    clock = FakeClock()
    a, b = daemons.msgids(clock), daemons.msgids(clock)
    reals = [f"R{i}" for i in range(300)]
    stored = allocate_in_threads([a, b], reals, rounds=15)
    assert all(stored)
    assert_one_virtual_id_per_live_message(stored)
    for real, vid in stored[0][:50]:  # and each daemon reads what the other wrote
        assert b.real_id_of(vid) == real and a.virtual_of(real) == vid


def test_a_message_received_by_one_daemon_is_the_reply_target_on_the_other(
        daemons: Daemons) -> None:
    clock = FakeClock()
    a, b = daemons.msgids(clock), daemons.msgids(clock)
    first = run(a.store_real("M1", GROUP))
    clock.advance(1)
    second = run(a.store_real("M2", GROUP))
    newest = b.latest_inbound(APP, "group", "G1", 300)
    assert newest is not None and (newest.virtual_id, newest.real_id) == (second, "M2")
    older = b.latest_inbound(APP, "group", "G1", 300, before=newest)
    assert older is not None and older.virtual_id == first
    assert b.newest_inbound(APP, ["group", "group-event"], "G1") == (
        newest.created_ms, second)


def test_the_counter_wraps_at_int32_max_and_skips_live_ids(daemons: Daemons) -> None:
    msgids = daemons.msgids()
    assert run(msgids.store_real("one")) == 1
    msgids._position = INT32_MAX - 1  # the daemon's own position (no mark here)
    assert [msgids.store_real_sync(real) for real in ("top", "wrapped")] == [INT32_MAX, 2]
    assert msgids.counts().counter == 2  # the last id handed out


def test_a_claim_on_one_daemon_is_a_repeat_on_the_other_whenever_it_comes(
        daemons: Daemons) -> None:
    """A webhook retry sent to another daemon, long after that daemon started (LMDB claims
    are read only in the first window after a start; shared ones always)."""
    clock = FakeClock()
    ids_a, ids_b = RedisMsgIds(daemons.runtime()), RedisMsgIds(daemons.runtime())

    async def main() -> None:
        a = DeliveryLog(ttl=300, clock=clock, claims=RedisClaims(ids_a, 300, clock=clock))
        b = DeliveryLog(ttl=300, clock=clock, claims=RedisClaims(ids_b, 300, clock=clock))
        clock.advance(1000)  # both daemons are well past their first window
        assert await a.claim("msg:retry") is None
        await a.commit(["msg:retry"])
        a.finish("msg:retry", None)
        repeat = await b.claim("msg:retry")
        assert repeat is not None and repeat.done()
        assert await b.claim("msg:other") is None
        clock.advance(301)
        fresh = DeliveryLog(ttl=300, clock=clock, claims=RedisClaims(ids_b, 300, clock=clock))
        assert await fresh.claim("msg:retry") is None  # the window has passed

    run(main())


def test_claims_asked_at_once_go_out_in_one_round_trip_and_are_decided_in_arrival_order(
        daemons: Daemons) -> None:
    """A flood of one-event webhook calls: their looks share one script call, and the first
    of two deliveries of one event to arrive is the one that processes it."""
    clock = FakeClock()
    ids = RedisMsgIds(daemons.runtime())

    async def main() -> None:
        log = DeliveryLog(ttl=300, clock=clock, claims=RedisClaims(ids, 300, clock=clock))
        assert await log.claim("msg:warm") is None  # connection open, script loaded
        trips = scraped("gensokyo_backend_round_trips", "redis")
        keys = [f"msg:{n}" for n in range(20)] + ["msg:3"]
        answers = await asyncio.gather(*(log.claim(key) for key in keys))
        assert scraped("gensokyo_backend_round_trips", "redis") == trips + 1
        assert answers[:20] == [None] * 20  # each processed here, the first msg:3 too
        repeat = answers[20]
        assert repeat is not None and not repeat.done()  # waits for the first msg:3
        log.finish("msg:3", None)
        await repeat

    run(main())


def test_stores_asked_at_once_go_out_in_one_round_trip_and_each_caller_gets_its_own_ids(
        daemons: Daemons) -> None:
    """A flood of one-event webhook calls: their message ids share one script call, in the
    order the calls came (each chat's newest message is the last one stored), and one real
    id asked for twice gets one virtual id."""
    msgids = daemons.msgids()

    async def main() -> None:
        await msgids.store_real("warm", GROUP)  # connection open, script loaded
        trips = scraped("gensokyo_backend_round_trips", "redis")
        calls = [[(f"r{n}", GROUP)] for n in range(20)]
        calls.append([("r3", GROUP), ("r-last", GROUP)])
        answers = await asyncio.gather(*(msgids.store_many(call) for call in calls))
        assert scraped("gensokyo_backend_round_trips", "redis") == trips + 1
        assert [len(answer) for answer in answers] == [len(call) for call in calls]
        firsts = [answer[0] for answer in answers[:20]]
        assert firsts == sorted(firsts) and len(set(firsts)) == 20  # in call order
        assert answers[20][0] == answers[3][0]  # the same real id: the same virtual id
        for call, answer in zip(calls, answers, strict=True):
            for (real, _), virtual in zip(call, answer, strict=True):
                assert msgids.real_id_of(virtual) == real
        newest = msgids.latest_inbound(APP, "group", "G1", 300)
        assert newest is not None and newest.virtual_id == answers[20][1]

    run(main())


def test_marks_stores_and_claims_asked_at_once_share_one_round_trip(
        daemons: Daemons) -> None:
    """What a flood asks for at one moment (events arriving, events translated, events
    delivered) goes to Redis in one pipeline, each with its own answer."""
    clock = FakeClock()
    ids = RedisMsgIds(daemons.runtime())
    msgids = RedisMsgIdMap(ids, clock=clock)
    claims = RedisClaims(ids, 300, clock=clock)

    async def main() -> None:
        await asyncio.gather(claims.start(["msg:warm"]), claims.record(["msg:warm"]),
                             msgids.store_real("warm", GROUP))  # scripts loaded
        trips = scraped("gensokyo_backend_round_trips", "redis")
        started, _, stored = await asyncio.gather(
            claims.start(["msg:new", "msg:warm"]), claims.record(["msg:done"]),
            msgids.store_many([("r1", GROUP)]))
        assert scraped("gensokyo_backend_round_trips", "redis") == trips + 1
        assert started == ({"msg:warm"}, set())
        assert msgids.real_id_of(stored[0]) == "r1"
        assert await claims.known(["msg:done", "msg:other"]) == {"msg:done"}

    run(main())


def test_a_store_failing_fails_every_caller_it_held_and_nothing_is_acknowledged(
        private_redis: PrivateRedis) -> None:
    """Stores that went out together fail together: each caller hears StoreError (its
    event is not acknowledged and comes again), logged once; none gets an id."""
    group = Daemons(private_redis.url)
    clock = FakeClock()
    runtime = group.runtime(clock=clock)
    msgids = RedisMsgIdMap(RedisMsgIds(runtime), clock=clock)

    async def main() -> list[list[int] | BaseException]:
        await msgids.store_real("warm", GROUP)
        private_redis.stop()
        return await asyncio.gather(
            *(msgids.store_many([(f"r{n}", GROUP)]) for n in range(5)),
            return_exceptions=True)

    try:
        with capture_logs() as logs:
            answers = run(main())
        assert all(isinstance(answer, StoreError) for answer in answers), answers
        down = [e for e in logs if e["event"] == "[redis] unreachable, running degraded"]
        assert len(down) == 1
    finally:
        group.close()


def test_a_repeat_while_another_daemon_delivers_is_refused_until_that_one_ends(
        daemons: Daemons) -> None:
    """Dedup rule 6: not acknowledged (the platform retries), never delivered twice; free
    again at once when the first delivery failed, or once a dead daemon's mark lapsed."""
    clock = FakeClock()
    ids_a, ids_b = RedisMsgIds(daemons.runtime()), RedisMsgIds(daemons.runtime())

    def delivery_log(ids: RedisMsgIds) -> DeliveryLog:
        return DeliveryLog(ttl=300, clock=clock, claims=RedisClaims(ids, 300, clock=clock))

    async def main() -> None:
        a, b = delivery_log(ids_a), delivery_log(ids_b)
        assert await a.claim("msg:slow") is None  # daemon A delivers it
        refused = await b.claim("msg:slow")
        assert refused is not None
        with pytest.raises(StoreError, match="another daemon"):
            await refused
        a.finish("msg:slow", RuntimeError("framework gone"))  # A failed: mark dropped
        assert await b.claim("msg:slow") is None  # the platform's next retry goes through on B
        await b.commit(["msg:slow"])
        b.finish("msg:slow", None)
        repeat = await delivery_log(ids_a).claim("msg:slow")
        assert repeat is not None and repeat.done() and repeat.exception() is None

        dead = delivery_log(ids_a)
        assert await dead.claim("msg:orphan") is None  # its daemon dies mid-delivery
        assert await b.claim("msg:orphan") is not None
        clock.advance(IN_FLIGHT_SECONDS)
        assert await delivery_log(ids_b).claim("msg:orphan") is None  # the mark has lapsed

    run(main())


def test_a_lease_is_renewed_only_by_its_holder_and_a_lapsed_one_is_taken_over(
        daemons: Daemons) -> None:
    """A mark is extended only under the token that set it; once it lapsed, another daemon
    takes the event, and the first one's late renewal leaves that daemon's mark alone
    (logged: a repeat may follow). Renewals here are called by hand, on a fake clock."""
    clock = FakeClock()
    ids_a, ids_b = RedisMsgIds(daemons.runtime()), RedisMsgIds(daemons.runtime())
    mark_key = daemons.prefix + "d:msg:k"
    lease_ms = int(IN_FLIGHT_SECONDS * 1000)

    def claims(ids: RedisMsgIds) -> RedisClaims:  # no renewing task within the test
        return RedisClaims(ids, 300, clock=clock, renew_every=3600)

    async def main() -> None:
        a, b = claims(ids_a), claims(ids_b)
        assert await a.start(["msg:k"]) == (set(), set())
        marked = daemons.runtimes[0].sync.get(mark_key)
        clock.advance(IN_FLIGHT_SECONDS - 1)
        now_ms = int(clock() * 1000)
        assert await ids_b.renew_claims(["msg:k"], now_ms, lease_ms, "busy:other") == {"msg:k"}
        assert daemons.runtimes[0].sync.get(mark_key) == marked  # not extended by another
        clock.advance(1)  # the lease lapsed: nobody renewed it
        assert await b.start(["msg:k"]) == (set(), set())  # B takes the event over
        taken = daemons.runtimes[0].sync.get(mark_key)
        assert taken is not None and taken != marked
        with capture_logs() as logs:
            await a.renew()  # A's renewal, too late
        assert daemons.runtimes[0].sync.get(mark_key) == taken
        assert not a.holds("msg:k") and b.holds("msg:k")
        assert [e["count"] for e in logs if "lapsed" in e["event"]] == [1]
        assert await a.start(["msg:k"]) == (set(), {"msg:k"})  # B's now, refused to A

    run(main())


def test_a_long_delivery_keeps_its_lease_by_renewal(daemons: Daemons) -> None:
    """Renewed, a mark outlives its first lease many times over: another daemon keeps
    being refused until the delivery ends (claimed: a known repeat there)."""
    clock = FakeClock()
    ids_a, ids_b = RedisMsgIds(daemons.runtime()), RedisMsgIds(daemons.runtime())

    async def main() -> None:
        a = RedisClaims(ids_a, 300, clock=clock, renew_every=3600)
        b = RedisClaims(ids_b, 300, clock=clock, renew_every=3600)
        assert await a.start(["msg:long"]) == (set(), set())
        for _ in range(10):  # ten leases long
            clock.advance(IN_FLIGHT_SECONDS / 2)
            await a.renew()
            clock.advance(IN_FLIGHT_SECONDS / 2)
            assert await b.start(["msg:long"]) == (set(), {"msg:long"})
        await a.record(["msg:long"])
        assert not a.holds("msg:long")
        assert await b.start(["msg:long"]) == ({"msg:long"}, set())

    run(main())


def test_the_renewing_task_keeps_marks_alive_and_stops_with_the_last(
        daemons: Daemons) -> None:
    """On the real clock, with a lease of 1 s renewed every 0.1 s: over three leases the
    other daemon is refused at every look; once the delivery failed the event is free at
    once, and nothing renews any more."""
    ids_a, ids_b = RedisMsgIds(daemons.runtime()), RedisMsgIds(daemons.runtime())

    async def main() -> None:
        a = RedisClaims(ids_a, 300, in_flight_seconds=1.0, renew_every=0.1)
        b = RedisClaims(ids_b, 300, in_flight_seconds=1.0, renew_every=0.1)
        assert await a.start(["msg:alive"]) == (set(), set())
        for _ in range(12):
            await asyncio.sleep(0.25)
            assert await b.start(["msg:alive"]) == (set(), {"msg:alive"})
        a.abandon(["msg:alive"])
        assert await b.start(["msg:alive"]) == (set(), set())
        b.abandon(["msg:alive"])
        await asyncio.sleep(0.3)  # both renewing tasks see nothing held and end
        assert not [task for task in asyncio.all_tasks()
                    if task is not asyncio.current_task()
                    and "_keep_renewing" in repr(task.get_coro())]

    run(main())


def test_replies_counted_on_one_daemon_count_on_the_other(daemons: Daemons) -> None:
    ids_a, ids_b = RedisMsgIds(daemons.runtime()), RedisMsgIds(daemons.runtime())
    a = RedisReplyBudget(ids_a, seq_base=1000)
    b = RedisReplyBudget(ids_b, seq_base=2000)
    assert [a.take("M1", 300) for _ in range(3)] == [1001, 1002, 1003]
    assert [b.take("M1", 300) for _ in range(2)] == [2004, 2005]
    assert a.exhausted("M1") and b.exhausted("M1") and not a.exhausted("M2")
    b.use_up("M3", 300)
    assert a.exhausted("M3")


def test_each_bots_replies_are_counted_apart_and_shared_across_daemons(
        daemons: Daemons) -> None:
    """Issue 34.4: two bots given one platform message id each have its five replies
    (their counts under their scopes), and each bot's count is still one across daemons;
    the choice of the newest message takes the scope too."""
    clock = FakeClock()
    a_ids, b_ids = daemons.msgids(clock), daemons.msgids(clock)
    other = "102000002"
    run(a_ids.store_many([("M1", GROUP), ("M1", MsgContext(other, "group", "G2", "in"))]))
    first = {daemon: RedisReplyBudget(ids.ids, seq_base=base, wall_clock=clock,
                                      scope=f"{APP}:")
             for daemon, ids, base in (("a", a_ids, 1000), ("b", b_ids, 2000))}
    second = RedisReplyBudget(b_ids.ids, seq_base=3000, wall_clock=clock, scope=f"{other}:")
    assert [first["a"].take("M1", 300) for _ in range(3)] == [1001, 1002, 1003]
    assert first["b"].take_newest((APP, "group", "G1"), no_walk, 300) == ("M1", 2004)
    assert second.used("M1") == 0 and first["b"].used("M1") == 4
    assert [second.take_newest((other, "group", "G2"), no_walk, 300) for _ in range(5)] == [
        ("M1", 3000 + n) for n in range(1, 6)]
    assert second.exhausted("M1") and not first["a"].exhausted("M1")
    second.use_up("M1", 300)
    assert first["a"].take("M1", 300) == 1005
    runtime = daemons.runtimes[0]
    assert {key.decode() for key in runtime.scan("b:*")} == {
        f"{daemons.prefix}b:{APP}:M1", f"{daemons.prefix}b:{other}:M1"}


def no_walk(below: object) -> None:
    raise AssertionError("on Redis the choice is the script's, not a walk from here")


def test_the_newest_message_with_replies_left_is_one_choice_across_daemons(
        daemons: Daemons) -> None:
    """N messages, 5 x N sends through two daemons in turn: every one answers a message,
    newest first, each message five times; a message spent by a reply segment on one is
    stepped over on the other. More messages than ``m:c`` keeps (256)."""
    clock = FakeClock()
    a_ids, b_ids = daemons.msgids(clock), daemons.msgids(clock)
    budgets = [RedisReplyBudget(a_ids.ids, seq_base=1000, wall_clock=clock),
               RedisReplyBudget(b_ids.ids, seq_base=2000, wall_clock=clock)]
    n = 300
    run(a_ids.store_many([(f"M{i}", GROUP) for i in range(1, n + 1)]))
    chat = (APP, "group", "G1")
    assert budgets[1].take("M299", 300) == 2001  # a reply segment on daemon b
    taken = [budgets[k % 2].take_newest(chat, no_walk, 300) for k in range(5 * n - 1)]
    expected = [f"M{i}" for i in range(n, 0, -1) for _ in range(5)]
    expected.remove("M299")
    assert [t[0] for t in taken if t is not None] == expected
    counts = [(t[1] % 1000) for t in taken if t is not None]
    assert counts[:6] == [1, 2, 3, 4, 5, 2]  # M300 five times, then M299 from its second
    assert budgets[0].take_newest(chat, no_walk, 300) is None  # all spent
    assert budgets[0].take_newest((APP, "group", "G2"), no_walk, 300) is None
    # the candidates lapse with the window: a message received later is the only one
    clock.advance(301)
    run(b_ids.store_many([("LATE", GROUP), ("OUT", MsgContext(APP, "group", "G1", "out"))]))
    assert budgets[0].take_newest(chat, no_walk, 300) == ("LATE", 1001)
    runtime = daemons.runtimes[0]
    assert runtime.sync.zcard(f"{daemons.prefix}m:a:{APP}\0group\0G1") == 1


def test_daemons_choosing_at_once_never_give_a_message_a_sixth_reply(
        daemons: Daemons) -> None:
    clock = FakeClock()
    msgids = daemons.msgids(clock)
    run(msgids.store_many([(f"M{i}", GROUP) for i in range(1, 41)]))
    budgets = [RedisReplyBudget(RedisMsgIds(daemons.runtime()), wall_clock=clock)
               for _ in range(4)]
    taken: list[tuple[str, int] | None] = []

    def work(budget: RedisReplyBudget) -> None:
        for _ in range(60):
            taken.append(budget.take_newest((APP, "group", "G1"), no_walk, 300))

    threads = [threading.Thread(target=work, args=(budget,)) for budget in budgets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    found = [t for t in taken if t is not None]
    assert len(found) == 200 and taken.count(None) == 40
    assert sorted(found) == sorted((f"M{i}", k) for i in range(1, 41) for k in range(1, 6))


def test_every_key_starts_with_the_prefix(daemons: Daemons) -> None:
    msgids = daemons.msgids()
    run(msgids.store_many([("P1", GROUP), ("P2", MsgContext(APP, "c2c", "U1", "out"))]))
    run(RedisClaims(msgids.ids).record(["msg:P1"]))
    RedisReplyBudget(msgids.ids).take("P1", 300)
    runtime = daemons.runtimes[0]
    mine = {key.decode() for key in runtime.scan("*")}
    # ctr, 2 records, 2 real ids, 1 chat and its reply candidates, the recent messages'
    # list, 1 claim, 1 reply count
    assert len(mine) == 10
    assert all(key.startswith(daemons.prefix) for key in mine)
    assert all(runtime.sync.pttl(key) > 0 for key in mine if not key.endswith("m:ctr"))


# --- FLUSHALL and a Redis that goes away (a private server) -------------------------------


def test_after_flushall_both_daemons_keep_going_and_no_id_is_handed_out_twice(
        private_redis: PrivateRedis) -> None:
    group = Daemons(private_redis.url)
    try:
        clock = FakeClock()
        a, b = group.msgids(clock), group.msgids(clock)
        before = allocate_in_threads([a, b], [f"old{i}" for i in range(60)], rounds=4)
        assert_one_virtual_id_per_live_message(before)
        claims = RedisClaims(a.ids, 300, clock=clock)
        run(claims.record(["msg:old0"]))

        group.runtimes[0].sync.flushall()  # our own server: nobody else's keys

        (old_real, old_vid) = before[0][0]
        assert a.lookup(old_vid) is None and b.virtual_of(old_real) is None  # unknown now
        assert run(claims.known(["msg:old0"])) == set()
        after = allocate_in_threads([a, b], [f"new{i}" for i in range(60)], rounds=4)
        assert_one_virtual_id_per_live_message(after)
        assert b.real_id_of(after[0][0][1]) == after[0][0][0]
    finally:
        group.close()


def test_redis_down_degrades_logged_once_and_comes_back_by_itself(
        private_redis: PrivateRedis) -> None:
    group = Daemons(private_redis.url)
    clock = FakeClock()
    runtime = group.runtime(clock=clock)
    ids = RedisMsgIds(runtime)
    msgids = RedisMsgIdMap(ids, clock=clock)
    claims = RedisClaims(ids, 300, clock=clock)
    budget = RedisReplyBudget(ids, seq_base=0, clock=clock)
    try:
        vid = run(msgids.store_real("before", GROUP))
        with capture_logs() as logs:
            private_redis.stop()
            with pytest.raises(StoreError, match="redis"):  # not acknowledged: sent again
                run(msgids.store_many([("during", GROUP)]))
            assert "redis unreachable" in str(runtime.health())  # what /healthz names
            # within the retry pause nothing asks Redis: the fallbacks answer at once
            assert msgids.lookup(vid) is None
            assert msgids.latest_inbound(APP, "group", "G1", 300) is None
            assert run(claims.known(["msg:x"])) == set()
            run(claims.record(["msg:x"]))
            assert [budget.take("M", 300) for _ in range(2)] == [1, 2]  # its own counts
            with pytest.raises(StoreError, match="redis"):
                msgids.store_real_sync("during", GROUP)
            clock.advance(RETRY_AFTER_SECONDS)
            assert msgids.lookup(vid) is None  # asked again: still down
            private_redis.start()
            clock.advance(RETRY_AFTER_SECONDS)
            # an empty server again; the daemon's position goes on (id 1 is not handed out
            # a second time)
            assert run(msgids.store_real("after", GROUP)) == 2
        down = [e for e in logs if e["event"] == "[redis] unreachable, running degraded"]
        back = [e for e in logs if e["event"] == "[redis] reachable again"]
        assert len(down) == 1 and len(back) == 1
        assert runtime.health() is None
    finally:
        group.close()
