"""Message-id map benchmark: store, lookup and the TTL sweep of msgid-map.db (issue 3).

Run: ``.venv/bin/python bench/msgid.py [--quick] [--strict] [--profile]``

This is a benchmark script, not a test. One run prints every figure and the sweep ratio with
its target. The exit code is 0 unless ``--strict`` is given and the target is missed.
``--quick`` scales the stores from 1,000,000 entries down to 100,000 (and the expired slice
from 10,000 down to 1,000) and shortens the timed phases (~15 s instead of ~2 min).

The stores
----------
Each store is a fresh msgid-map.db (``open_msgid_store``, ``sync=False`` as in production)
in a ``tempfile`` directory on a real disk (a tmpfs is refused), opened with a 2 GiB map so
no phase pays a map resize. It is populated fast, not through ``store_real``: ``MsgRecord``s
are written directly, ``view.put_record(r)`` for each of a chunk of 50,000 in one
``store.write_sync`` transaction, and ``msg_counter`` is set to N. Record i (virtual id i+1) looks like
traffic: a scattered 33-character real id (``ROBOT1.0_`` + hex), one AppID, one of 5,000
chats, "group" or "c2c", every other one inbound (so it also has a ``chat_recent`` key);
it was created at ``BASE + 3 ms * i`` and expires one TTL (3600 s) later, so all N are live
just after the last one was created, and at ``BASE + 3 ms * (k-1) + TTL + 1 ms`` exactly the
oldest k have expired. ``MsgIdMap`` gets a fake clock (a callable returning a fixed time the
bench sets), so nothing sleeps and the expired count is exact.

Figures
-------
store new, 64 callers
    64 asyncio tasks, each ``await msgids.store_real(fresh_real_id, MsgContext(...))`` in a
    loop until the phase deadline, on the store holding N live entries (clock: all live).
    Every real id is new, so each call allocates (counter + 1, probe, put the record's four
    or three keys), within the blocks of ids reserved in an ``openid-map.db`` beside it, as
    the daemon does (one fsynced write per 10,000 ids, asked for ahead on a thread).
    ``avg batch`` is writes / commits from ``store.commit_stats``: how many callers one
    write transaction served (group commit).
store new, 1 caller
    The same, one task awaiting each call before the next: one write transaction per call,
    plus the hop to the writer thread and back.
lookup known vid
    ``msgids.lookup(vid)`` for random virtual ids among the N stored (all live): one read
    transaction, a get and a cbor decode. Checked against the real id it was stored with.
sweep, k of N expired
    ``await msgids.sweep()`` (the call the daemon's sweeper task makes) with the clock where
    exactly k = 10,000 of N = 1,000,000 entries have expired. ``in fns`` is the time spent
    inside the sweep's write functions (walking ``expires_at``, reading and deleting each
    record's keys), measured on the writer thread by a thin proxy store; the rest is commits
    and the hops between the event loop and the writer thread. ``us/entry`` is the time per
    swept entry. After each sweep the bench checks that it returned k, that
    ``view.counts().live_or_unswept`` is N - k, and that ``expires_at`` holds nothing expired
    any more; then it puts the k swept records back, so every round sweeps the same store.
sweep, N of N expired
    The same with the clock where all N entries have expired (a fresh store per round, since
    the sweep empties it). Checked to return N and leave 0 entries.
ratio
    (N of N sweep time) / (k of N sweep time), best round of each. The sweep reads only what
    expired, so this is about N / k = 100 when the cost per swept entry is the same in both;
    it differs somewhat (page cache, commit sizes, noise on a small k), so the target is >= 20.

How it is measured
------------------
structlog is configured first, as in production, with a processor that drops every event,
so the info logs of store_real / lookup / sweep cost their production filtering but are
never rendered or printed. Store and lookup: a warm-up, then 3 interleaved rounds (64
callers, 1 caller, lookup), ops/s is the best round of each; lookup throughput comes from
an untimed pass and its p50/p99 from a pass timing each op of half the order
(``time.perf_counter_ns``, whose own ~0.1 us is in the latencies, not in ops/s); store
latencies are per call, from the best round. Sweeps: 3 rounds of the k sweep interleaved
with 2 of the N sweep (each N round populates its own store first, untimed); the best round
of each is shown and all rounds are listed. ``gc.collect()`` runs before each timed phase.
The store/lookup phases run last, on the k store, after its sweeps (it is back to N live
entries; the clock is set back to when all were live). Peak RSS is
``resource.getrusage(RUSAGE_SELF).ru_maxrss``: it counts the pages of the memory-mapped
env files this process touched, not only Python's heap, so the largest ``RssAnon`` and
``RssFile`` of ``/proc/self/status`` sampled after each populate, sweep and the store/lookup
phase are printed beside it (a sample can miss a short peak between two samples).
``--profile`` also prints a cProfile of one more k sweep, taken on the writer thread (not
part of the figures).
"""

from __future__ import annotations

import asyncio
import gc
import os
import random
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

# _common before the library: importing it configures structlog (see its docstring).
from _common import Result, Run, Table, latency_pass, print_heading, throughput_pass

from gensokyo_idmap.runtime.base import MsgRecord
from gensokyo_idmap.runtime.blocks import IdBlocks, reserve_in
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore, MsgIdView, open_msgid_store
from gensokyo_idmap.runtime.msgid import MsgContext, MsgIdMap
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore

T = TypeVar("T")

APP_ID = "102005123"
CALLERS = 64
CHATS = 5000
MAP_SIZE = 1 << 31  # sparse; big enough that no phase pays a map resize
CHUNK = 50_000  # records per populating write transaction
BASE_MS = 1_718_000_000_000  # creation time of record 0
STEP_MS = 3  # between two records' creation times
TTL_S = 3600
TTL_MS = TTL_S * 1000
SEED = 20240611
SWEEP_TARGET = 20.0


@dataclass(frozen=True)
class Profile:
    entries: int  # N: entries in each sweep store (and the store/lookup store)
    expired: int  # k: expired entries in the "few expired" sweep
    k_rounds: int
    n_rounds: int
    store_seconds: float  # per store phase per round
    lookup_ops: int  # ops per lookup throughput pass
    rounds: int  # store/lookup rounds


FULL = Profile(entries=1_000_000, expired=10_000, k_rounds=3, n_rounds=2, store_seconds=1.5,
               lookup_ops=100_000, rounds=3)
QUICK = Profile(entries=100_000, expired=1_000, k_rounds=3, n_rounds=2, store_seconds=0.5,
                lookup_ops=25_000, rounds=3)


@dataclass
class SweepResult:
    name: str
    expected: int
    times: list[float] = field(default_factory=list)
    fn_seconds: list[float] = field(default_factory=list)
    commits: list[int] = field(default_factory=list)

    def best(self) -> int:
        return min(range(len(self.times)), key=self.times.__getitem__)


# --- test material ------------------------------------------------------------------------


_RSS_PEAKS: dict[str, int] = {"RssAnon": 0, "RssFile": 0}



def _on_disk_mib(path: Path) -> float:
    """What the file takes on disk: opened with writemap it is as long as its (sparse) map."""
    return os.stat(path).st_blocks * 512 / 2**20

def sample_rss() -> None:
    """Note the anonymous (Python heap, LMDB dirty pages) and file-backed (mapped env files)
    parts of the current RSS; ru_maxrss only knows their peak sum."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                name, _, value = line.partition(":")
                if name in _RSS_PEAKS:
                    _RSS_PEAKS[name] = max(_RSS_PEAKS[name], int(value.split()[0]))
    except OSError:
        pass


class FakeClock:
    """A clock for MsgIdMap: returns whatever time the bench set (seconds)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def set_ms(self, now_ms: int) -> None:
        self.now = now_ms / 1000  # int(now * 1000) may round down by 1 ms: see STEP_MS


def record_of(i: int) -> MsgRecord:
    """Record i of a populated store: virtual id i+1, created BASE + 3 ms * i."""
    vid = i + 1
    h = (vid * 0x9E3779B97F4A7C15) & 0xFFFF_FFFF_FFFF_FFFF  # scatters the real ids' order
    created = BASE_MS + STEP_MS * i
    return MsgRecord(
        virtual_id=vid,
        real_id=f"ROBOT1.0_{h:016x}{vid:08x}",
        app_id=APP_ID,
        chat_kind="c2c" if vid % 3 == 0 else "group",
        target=f"G{(h >> 20) % CHATS:06d}B8E2A1C3D5F7",
        direction="in" if vid % 2 else "out",
        created_ms=created,
        expires_ms=created + TTL_MS,
    )


def all_live_ms(n: int) -> int:
    """A time when all n records exist and none has expired (just after the last one)."""
    assert STEP_MS * (n - 1) < TTL_MS
    return BASE_MS + STEP_MS * (n - 1) + 1


def expired_ms(k: int) -> int:
    """A time when exactly the oldest k records have expired.

    1 ms past the k-th expiry and STEP_MS - 1 ms before the next, so float rounding in the
    clock (seconds) cannot move an entry across the line.
    """
    return BASE_MS + STEP_MS * (k - 1) + TTL_MS + 1


def _put_chunk(chunk: list[MsgRecord], view: MsgIdView) -> None:
    for record in chunk:
        view.put_record(record)


def populate(store: LmdbMsgIdStore, first: int, n: int) -> None:
    """Put records first .. first+n-1 in transactions of CHUNK records."""
    for lo in range(first, first + n, CHUNK):
        chunk = [record_of(i) for i in range(lo, min(first + n, lo + CHUNK))]
        store.write_sync(partial(_put_chunk, chunk))  # put_record each, one write txn
    sample_rss()


def new_store(path: Path, n: int) -> tuple[LmdbMsgIdStore, float]:
    store = open_msgid_store(path, map_size=MAP_SIZE)
    t = time.perf_counter()
    populate(store, 0, n)
    store.write_sync(lambda v: v.set_msg_counter(n))
    elapsed = time.perf_counter() - t
    with store.read() as view:
        counts = view.counts()
    assert counts.live_or_unswept == n and counts.counter == n, counts
    return store, elapsed


class TimedStore:
    """The store, with the time spent inside write functions (on the writer thread) summed.

    Two perf_counter calls per write transaction; the sweep runs one per 10,000 entries.
    With a profiler, each write function also runs under it (the writer thread's work is
    invisible to a profiler started on the main thread).
    """

    def __init__(self, inner: LmdbMsgIdStore, profiler: Any = None) -> None:
        self.inner = inner
        self.fn_ns = 0
        self.profiler = profiler

    def _wrap(self, fn: Callable[[Any], T]) -> Callable[[Any], T]:
        def run(view: Any) -> T:
            t = time.perf_counter_ns()
            try:
                if self.profiler is not None:
                    return self.profiler.runcall(fn, view)  # type: ignore[no-any-return]
                return fn(view)
            finally:
                self.fn_ns += time.perf_counter_ns() - t
        return run

    def read(self) -> Any:
        return self.inner.read()

    def write(self, fn: Callable[[Any], T]) -> Awaitable[T]:
        return self.inner.write(self._wrap(fn))

    def write_sync(self, fn: Callable[[Any], T]) -> T:
        return self.inner.write_sync(self._wrap(fn))

    def close(self) -> None:
        self.inner.close()


# --- sweeps -------------------------------------------------------------------------------


def timed_sweep(store: LmdbMsgIdStore, now_ms: int, expect_swept: int, expect_left: int,
                result: SweepResult, profiler: Any = None) -> None:
    """One ``await msgids.sweep()`` at now_ms, timed and checked."""
    timed = TimedStore(store, profiler)
    msgids = MsgIdMap(timed, clock=FakeClock(now_ms / 1000), ttl_seconds=TTL_S)
    b0 = store.commit_stats[0]
    gc.collect()

    async def run() -> tuple[int, float]:
        t = time.perf_counter()
        swept = await msgids.sweep()
        return swept, time.perf_counter() - t

    swept, elapsed = asyncio.run(run())
    sample_rss()
    with store.read() as view:
        left = view.counts().live_or_unswept
        still = view.expired(now_ms, 1)
    assert swept == expect_swept, f"{result.name}: swept {swept}, expected {expect_swept}"
    assert left == expect_left, f"{result.name}: {left} left, expected {expect_left}"
    assert not still, f"{result.name}: expires_at still holds {still}"
    if profiler is None:
        result.times.append(elapsed)
        result.fn_seconds.append(timed.fn_ns / 1e9)
        result.commits.append(store.commit_stats[0] - b0)


def bench_sweeps(tmp: Path, prof: Profile, profile: bool
                 ) -> tuple[LmdbMsgIdStore, SweepResult, SweepResult, list[str], Any]:
    n, k = prof.entries, prof.expired
    notes: list[str] = []
    few = SweepResult(f"sweep, {k:,} of {n:,} expired", k)
    every = SweepResult(f"sweep, {n:,} of {n:,} expired", n)
    store_k, secs = new_store(tmp / "msgid-k.db", n)
    notes.append(f"populated {n:,} entries in {secs:.1f}s "
                 f"({_on_disk_mib(tmp / 'msgid-k.db'):.0f} MiB env file on disk)")
    for r in range(max(prof.k_rounds, prof.n_rounds)):  # interleaved
        if r < prof.k_rounds:
            timed_sweep(store_k, expired_ms(k), k, n - k, few)
            populate(store_k, 0, k)  # put the swept ones back: N entries, k expired, again
        if r < prof.n_rounds:
            path = tmp / f"msgid-n{r}.db"
            store_n, secs = new_store(path, n)
            notes.append(f"populated {n:,} entries in {secs:.1f}s (for the {n:,} sweep)")
            try:
                timed_sweep(store_n, expired_ms(n), n, 0, every)
            finally:
                store_n.close()
            for leftover in (path, path.with_name(path.name + "-lock")):
                leftover.unlink(missing_ok=True)
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        timed_sweep(store_k, expired_ms(k), k, n - k, few, profiler=profiler)
        populate(store_k, 0, k)
    return store_k, few, every, notes, profiler


# --- store and lookup ---------------------------------------------------------------------


class FreshIds:
    """Real ids never stored before."""

    def __init__(self) -> None:
        self.next = 0

    def take(self) -> str:
        i = self.next
        self.next += 1
        h = (i * 0xC2B2AE3D27D4EB4F) & 0xFFFF_FFFF_FFFF_FFFF
        return f"ROBOT1.0_{h:016x}N{i:07x}"


async def store_round(msgids: MsgIdMap, fresh: FreshIds, callers: int, seconds: float,
                      ) -> tuple[int, float, list[int]]:
    lat: list[int] = []
    clock = time.perf_counter_ns
    deadline = clock() + int(seconds * 1e9)
    floor = msgids.counts().counter

    async def caller(c: int) -> None:
        while clock() < deadline:
            real = fresh.take()
            target = f"G{(fresh.next * 7919) % CHATS:06d}B8E2A1C3D5F7"
            a = clock()
            vid = await msgids.store_real(real, MsgContext(APP_ID, "group", target, "in"))
            lat.append(clock() - a)
            assert vid > floor, (vid, floor)

    t0 = clock()
    await asyncio.gather(*(caller(c) for c in range(callers)))
    elapsed = (clock() - t0) / 1e9
    lat.sort()
    return len(lat), elapsed, lat


def bench_store_lookup(store: LmdbMsgIdStore, prof: Profile, rng: random.Random,
                       marks: LmdbIdentityStore) -> tuple[Result, Result, Result]:
    n = prof.entries
    blocks = IdBlocks(partial(reserve_in, marks))  # the high-water mark, as in the daemon
    msgids = MsgIdMap(store, clock=FakeClock(all_live_ms(n) / 1000), ttl_seconds=TTL_S,
                      blocks=blocks)
    order = [rng.randrange(1, n + 1) for _ in range(prof.lookup_ops)]
    for vid in order[:200]:  # sanity: known ids resolve to what was stored
        got = msgids.lookup(vid)
        assert got is not None and got == record_of(vid - 1), (vid, got)
    many = Result(f"store new, {CALLERS} callers")
    one = Result("store new, 1 caller")
    look = Result("lookup known vid")
    fresh = FreshIds()
    lookup = msgids.lookup  # the lookup passes (in _common) call it for each vid of an order

    async def store_phase(r: Result, callers: int, seconds: float, keep: bool) -> None:
        b0, w0 = store.commit_stats
        before = msgids.counts().live_or_unswept
        ops, secs, lat = await store_round(msgids, fresh, callers, seconds)
        b1, w1 = store.commit_stats
        after = msgids.counts().live_or_unswept
        assert after == before + ops, (before, ops, after)
        if keep and r.keep_best(ops, secs):
            r.lat_ns = lat
            r.note = f"{b1 - b0} commits, avg batch {(w1 - w0) / max(1, b1 - b0):.1f}"

    async def all_rounds() -> None:
        await store_phase(many, CALLERS, prof.store_seconds / 4, keep=False)  # warm-up
        await store_phase(one, 1, prof.store_seconds / 4, keep=False)
        await throughput_pass(lookup, False, order[: len(order) // 4])
        half = order[: len(order) // 2]
        for _ in range(prof.rounds):  # interleaved, so a noisy moment hurts each alike
            gc.collect()
            await store_phase(many, CALLERS, prof.store_seconds, keep=True)
            gc.collect()
            await store_phase(one, 1, prof.store_seconds, keep=True)
            gc.collect()
            look.keep_best(len(order), await throughput_pass(lookup, False, order))
            look.keep_best_latencies(await latency_pass(lookup, False, half))

    asyncio.run(all_rounds())
    blocks.close()
    sample_rss()
    look.note = f"random among {n:,} live"
    return many, one, look


# --- output -------------------------------------------------------------------------------


def fmt_sweep(s: SweepResult) -> str:
    i = s.best()
    secs = s.times[i]
    rounds = ", ".join(f"{t:.3f}" for t in s.times)
    return (f"  {s.name:<38} {secs:>9.3f} {secs / s.expected * 1e6:>9.2f} "
            f"{s.fn_seconds[i]:>9.3f} {s.commits[i]:>7}   rounds: {rounds}")


def main() -> int:
    run = Run(__doc__, quick="100,000 entries (1,000 expired) instead of 1,000,000 (10,000)",
              strict="exit 1 if the target is missed",
              profile="also cProfile one more few-expired sweep (writer thread)")
    prof = QUICK if run.quick else FULL
    rng = random.Random(SEED)

    with run.temp_dir("msgid-bench-", "msgid", tmpfs_why="not a disk") as tmp:
        store_k, few, every, notes, profiler = bench_sweeps(tmp, prof, run.profile)
        try:
            for note in notes:
                print(note)
            marks = LmdbIdentityStore(tmp / "openid-map.db")
            try:
                many, one, look = bench_store_lookup(store_k, prof, rng, marks)
            finally:
                marks.close()
            grown = store_k.commit_stats
        finally:
            store_k.close()
        print(f"store/lookup on the {prof.entries:,}-entry store after its sweeps "
              f"({_on_disk_mib(tmp / 'msgid-k.db'):.0f} MiB env file on disk at the end); "
              f"best of {prof.rounds} interleaved rounds; {grown[0]:,} commits in all")

    table = Table(name=26, rate=10, us=9)
    table.print_header()
    for r in (many, one, look):
        print(table.row(r))

    print_heading(f"  {'sweep (await msgids.sweep())':<38} {'seconds':>9} {'us/entry':>9} "
                  f"{'in fns s':>9} {'commits':>7}")
    print(fmt_sweep(few))
    print(fmt_sweep(every))

    few_s, every_s = few.times[few.best()], every.times[every.best()]
    ratio = every_s / few_s
    print(f"\n  sweep ratio ({prof.entries:,} expired / {prof.expired:,} expired, "
          f"best rounds): {ratio:.1f}x   (ideal {prof.entries / prof.expired:.0f}x)   "
          f"target >= {SWEEP_TARGET:g}x  {run.verdict(ratio, SWEEP_TARGET)}")

    if profiler is not None:
        import pstats

        print(f"\n--- cProfile: one more sweep of {prof.expired:,} expired, writer thread, "
              "by tottime ---")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(20)

    print(f"\npeak RSS {run.peak_rss_mib():.1f} MiB; sampled after each phase, at most "
          f"{_RSS_PEAKS['RssAnon'] / 1024:.1f} MiB anonymous (heap) and "
          f"{_RSS_PEAKS['RssFile'] / 1024:.1f} MiB file-backed (mapped env files)")
    print(f"{run.summary()} (other processes skew the figures)")
    return run.exit_code()


if __name__ == "__main__":
    sys.exit(main())
