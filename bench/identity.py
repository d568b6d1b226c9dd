"""Identity-graph benchmark: the hot paths of gensokyo-idmap against plain py-lmdb ceilings.

Run: ``.venv/bin/python bench/identity.py [--quick] [--strict] [--profile]``

This is a benchmark script, not a test. One run prints every figure, the ceilings measured on
the same machine in the same run, and the ratios with their targets. The exit code is 0
unless ``--strict`` is given and a target is missed.

Figures
-------
resolve (known key)
    ``await graph.resolve([key], scene=scene)`` for random keys that were resolved before in
    the same scene. This is the read-only hot path: one read transaction, ``vuin_of`` and
    ``last_seen`` gets, no write. The store has N identities (100k, 20k with ``--quick``),
    each with one ``last_seen`` entry. structlog is configured first, as in production: debug
    ("identity hit") is filtered by ``make_filtering_bound_logger(INFO)`` and info records
    are dropped by a processor, so neither rendering nor printing is timed. The run checks
    that the phase made no commit.
allocate (64 callers)
    64 asyncio tasks, each resolving fresh keys (with a scene) in a loop, on the durable
    store (``sync=True``, ``metasync=True``: a call returns after the fsync of its batch).
    ``avg batch`` is (writes / batches) from ``store.commit_stats`` over the phase: how many
    callers one group commit served; ``us CPU each`` is this process's CPU time (event loop,
    writer thread, the kernel's share of the commits; the callers building keys too) per
    allocation, which other processes' disk load moves far less than the rate.
pick_identity
    ``graph.pick_identity(vuin, scene, usable=openid_of_app(app))`` over known vUINs, with the
    ``usable`` built per call as a request handler does. Served from ``last_seen``.

Ceilings (plain py-lmdb, a separate env file in the same temp dir, same keys)
-------------------------------------------------------------------------------
bare get, one read txn per get
    ``begin() + get() + abort()`` per op with pre-encoded keys: the least a standalone read
    can cost through py-lmdb. resolve must open a read transaction per call (it is a
    standalone request), so this is the fair ceiling for it. Target: resolve / this >= 0.3.
bare get, one txn for all gets
    One transaction around the whole loop: the cost of ``get`` alone. Printed for
    information (how much of a standalone read is the transaction itself).
one commit per write
    A durable env (``sync=True``), one write txn + put + commit per new key: what every write
    costs without group commit. Where allocation is fsync-bound, group commit beats this by
    about the average batch size; a ratio well below the batch size means allocation is bound
    by CPU (Python work per write, one GIL for the loop and the writer thread), not by fsync.
    Printed for information (the old target, allocate / this >= 20, is retired: the disk
    puts the ceiling below near 20 on most hours, see the next figure).
group commit of 64, no Python around it
    The same durable env, each transaction holding the writes of CALLERS allocations exactly
    as the store lays them out (identity_to_vuin, vuin_to_identity, last_seen with its cbor
    value, the counter in meta) from key texts built by an f-string, and nothing else: no
    event loop, no threads, no checks. No group commit serving CALLERS callers can beat it,
    because each of them waits for its batch and so at most CALLERS writes share a commit. Its ratio to one
    commit per write is therefore the highest ratio the allocation target can reach on this
    disk: a commit of 64 allocations dirties more pages than a commit of one put, and fsync
    time grows with them. Target: allocate / this >= 0.5 (the graph's Python, the event loop
    and the writer thread at most double the time of the same durable commits).

How it is measured
------------------
Read figures: a warm-up pass, then rounds (3) of untimed passes over the same random key
order, the four read figures interleaved in each round; ops/s is the best pass of each, so a
burst of load from other processes hurts every figure alike and the ratios stay fair. Each
round also times each op of half the order with ``time.perf_counter_ns``; p50/p99 come from
the pass with the lowest p50 (the timer's own ~0.1 us is in the latencies, not in ops/s). Write figures: 2 rounds, each a one-commit-per-write
run then an allocation run; the best round of each is shown (with its latencies and batches).
Peak RSS is ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` at the end. The temp dir comes from
``tempfile`` and is refused if it is a tmpfs, so fsyncs are real. ``--profile`` also prints a
cProfile of the resolve hot path (not part of the figures).
"""

from __future__ import annotations

import asyncio
import gc
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lmdb

# _common before the library: importing it configures structlog (see its docstring).
from _common import Result, Run, Table, latency_pass, throughput_pass

from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.idmap import IdentityGraph, openid_of_app
from gensokyo_idmap.store.lmdb.codec import encode_value
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore

APP_ID = "102005123"
CALLERS = 64
MAP_SIZE = 1 << 30  # sparse; big enough that no phase pays a map resize
SEED = 20240611


@dataclass(frozen=True)
class Profile:
    identities: int
    read_ops: int  # ops per read pass
    read_rounds: int
    alloc_seconds: float
    commit_seconds: float
    write_rounds: int


FULL = Profile(identities=100_000, read_ops=100_000, read_rounds=3, alloc_seconds=3.0,
               commit_seconds=1.5, write_rounds=2)
QUICK = Profile(identities=20_000, read_ops=25_000, read_rounds=3, alloc_seconds=1.0,
                commit_seconds=0.5, write_rounds=2)


# --- key material -------------------------------------------------------------------------


def key_of(i: int) -> OpenId:
    return OpenId(APP_ID, f"U{i:010d}A7F3C9E1B2D4")


def key_text(i: int) -> str:
    """``key_of(i).key`` without building and checking an OpenId: the ceiling's fast path."""
    return f"openid:QQ:{APP_ID}:U{i:010d}A7F3C9E1B2D4"


def scene_of(i: int) -> str:
    return f"QQ:{APP_ID}:group:G{i % 5000:06d}B8E2"


# --- read passes ----------------------------------------------------------------------------
# A read figure is a function of a key index, sync or async (the resolve coroutine is awaited;
# it never suspends on a hit). Throughput: untimed passes, best of the rounds. Latency: one
# pass timing each op. The passes are in _common.


def open_bare_read_env(tmp: Path, keys: list[OpenId], vuins: list[int]
                       ) -> tuple[lmdb.Environment, Any, list[bytes]]:
    """The same identity_to_vuin keys and 8-byte values, in a plain env of its own."""
    env = lmdb.open(str(tmp / "bare-read.lmdb"), subdir=False, map_size=MAP_SIZE, max_dbs=4,
                    sync=False, metasync=False, readahead=False, meminit=False,
                    max_spare_txns=4)
    db = env.open_db(b"identity_to_vuin")
    raw = [k.key.encode() for k in keys]
    with env.begin(write=True) as txn:
        for k, v in zip(raw, vuins, strict=True):
            txn.put(k, v.to_bytes(8, "big"), db=db)
    env.sync(True)
    return env, db, raw


async def bench_reads(graph: IdentityGraph, env: lmdb.Environment, db: Any, raw: list[bytes],
                      keys: list[OpenId], scenes: list[str], vuins: list[int],
                      order: list[int], rounds: int) -> dict[str, Result]:
    # Sanity: a known key resolves to its vUIN without creating; pick returns the scene's key.
    res = await graph.resolve([keys[order[0]]], scene=scenes[order[0]])
    assert res.vuin == vuins[order[0]] and not res.created, res
    got = graph.pick_identity(vuins[order[0]], scenes[order[0]], usable=openid_of_app(APP_ID))
    assert got == keys[order[0]], (got, keys[order[0]])

    begin = env.begin

    def bare_per_txn(i: int) -> object:
        txn = begin()
        value = txn.get(raw[i], db=db)
        txn.abort()
        return value

    one_txn = env.begin()
    one_get = one_txn.get

    def bare_one_txn(i: int) -> object:
        return one_get(raw[i], db=db)

    def resolve_known(i: int) -> Any:
        return graph.resolve([keys[i]], scene=scenes[i])

    def pick(i: int) -> object:
        return graph.pick_identity(vuins[i], scenes[i], usable=openid_of_app(APP_ID))

    figures: list[tuple[str, Callable[[int], Any], bool]] = [
        ("bare get, 1 txn per get", bare_per_txn, False),
        ("resolve known key", resolve_known, True),
        ("bare get, 1 txn for all", bare_one_txn, False),
        ("pick_identity", pick, False),
    ]
    results = {name: Result(name) for name, _, _ in figures}
    before = graph.store.commit_stats  # type: ignore[attr-defined]
    try:
        for name, fn, is_async in figures:  # warm-up: fault in the pages of both envs
            await throughput_pass(fn, is_async, order[: len(order) // 4])
        half = order[: len(order) // 2]
        for _ in range(rounds):  # interleaved, so a noisy moment hurts every figure alike
            for name, fn, is_async in figures:
                r = results[name]
                r.keep_best(len(order), await throughput_pass(fn, is_async, order))
                r.keep_best_latencies(await latency_pass(fn, is_async, half))
    finally:
        one_txn.abort()
    after = graph.store.commit_stats  # type: ignore[attr-defined]
    results["resolve known key"].note = (
        "read-only: 0 commits" if after == before else f"WROTE: {before} -> {after}")
    return results


# --- write passes -------------------------------------------------------------------------


async def populate(graph: IdentityGraph, keys: list[OpenId], scenes: list[str]) -> list[int]:
    """Resolve every key once in its scene, 1024 callers at a time."""
    vuins = [0] * len(keys)
    todo = iter(range(len(keys)))

    async def worker() -> None:
        for i in todo:
            vuins[i] = (await graph.resolve([keys[i]], scene=scenes[i])).vuin

    await asyncio.gather(*(worker() for _ in range(1024)))
    return vuins


class FreshKeys:
    """Indices of keys never resolved before (above the populated range)."""

    def __init__(self, first: int) -> None:
        self.next = first

    def take(self) -> int:
        i = self.next
        self.next += 1
        return i


async def allocate_round(graph: IdentityGraph, store: LmdbIdentityStore, fresh: FreshKeys,
                         seconds: float) -> tuple[int, float, list[int], str]:
    """CALLERS tasks resolving fresh keys until the deadline; durable on each return."""
    lat: list[int] = []
    clock = time.perf_counter_ns
    deadline = clock() + int(seconds * 1e9)

    async def caller() -> None:
        while clock() < deadline:
            i = fresh.take()
            key, scene = key_of(i), scene_of(i)
            a = clock()
            res = await graph.resolve([key], scene=scene)
            lat.append(clock() - a)
            assert res.created, res

    b0, w0 = store.commit_stats
    cpu0 = time.process_time()
    t0 = clock()
    await asyncio.gather(*(caller() for _ in range(CALLERS)))
    elapsed = (clock() - t0) / 1e9
    cpu = time.process_time() - cpu0
    b1, w1 = store.commit_stats
    batches, writes = b1 - b0, w1 - w0
    note = (f"{batches} commits, avg batch {writes / batches if batches else float('nan'):.1f}, "
            f"{cpu / max(1, len(lat)) * 1e6:.1f} us CPU each")
    lat.sort()
    return len(lat), elapsed, lat, note


def timed_commits(seconds: float, commit_once: Callable[[], int]) -> tuple[int, float, list[int]]:
    """Call ``commit_once`` (one durable commit; returns the writes it held) until the
    deadline: (writes, seconds, latency of each commit in ns, sorted)."""
    clock = time.perf_counter_ns
    lat: list[int] = []
    t0 = clock()
    deadline = t0 + int(seconds * 1e9)
    n = 0
    while clock() < deadline:
        a = clock()
        n += commit_once()
        lat.append(clock() - a)
    lat.sort()
    return n, (clock() - t0) / 1e9, lat


def group_ceiling_round(env: lmdb.Environment, dbs: tuple[Any, Any, Any, Any],
                        fresh: FreshKeys, seconds: float) -> tuple[int, float, list[int]]:
    """Durable transactions of CALLERS allocations' writes each, in plain py-lmdb."""
    forward, reverse, last_seen, meta = dbs
    assert key_text(first := fresh.next) == key_of(first).key, "key_text out of step with key_of"

    def commit_once() -> int:
        with env.begin(write=True) as txn:
            for _ in range(CALLERS):
                i = fresh.take()
                key = key_text(i)
                k, v = key.encode(), i.to_bytes(8, "big")
                txn.put(k, v, db=forward)
                txn.put(v, k, db=reverse)
                txn.put(v + scene_of(i).encode(), encode_value([key, time.time()]), db=last_seen)
            txn.put(b"vuin_counter", encode_value(i), db=meta)
        return CALLERS

    return timed_commits(seconds, commit_once)


def commit_per_write_round(env: lmdb.Environment, db: Any, fresh: FreshKeys, seconds: float
                           ) -> tuple[int, float, list[int]]:
    """One durable write transaction + put + commit per new key."""

    def commit_once() -> int:
        i = fresh.take()
        txn = env.begin(write=True, db=db)
        txn.put(key_of(i).key.encode(), i.to_bytes(8, "big"))
        txn.commit()
        return 1

    return timed_commits(seconds, commit_once)


async def bench_writes(graph: IdentityGraph, store: LmdbIdentityStore, tmp: Path,
                       first_new: int, prof: Profile) -> tuple[Result, Result, Result]:
    env = lmdb.open(str(tmp / "bare-write.lmdb"), subdir=False, map_size=MAP_SIZE, max_dbs=4,
                    sync=True, metasync=True, readahead=False, meminit=False)
    db = env.open_db(b"identity_to_vuin")
    group_env = lmdb.open(str(tmp / "bare-group.lmdb"), subdir=False, map_size=MAP_SIZE,
                          max_dbs=4, sync=True, metasync=True, readahead=False, meminit=False)
    group_dbs = (group_env.open_db(b"identity_to_vuin"),
                 group_env.open_db(b"vuin_to_identity", dupsort=True),
                 group_env.open_db(b"last_seen"), group_env.open_db(b"meta"))
    alloc = Result(f"allocate, {CALLERS} callers")
    commit = Result("1 commit per write (sync)")
    ceiling = Result(f"{CALLERS} allocations per commit")
    ceiling.note = "py-lmdb alone: the most 64 callers can get"
    fresh = FreshKeys(first_new)
    bare_fresh = FreshKeys(first_new)
    group_fresh = FreshKeys(first_new)
    try:
        for _ in range(prof.write_rounds):  # interleaved, best round of each kept
            n, secs, lat = commit_per_write_round(env, db, bare_fresh, prof.commit_seconds)
            if commit.keep_best(n, secs):
                commit.lat_ns = lat
            n, secs, lat = group_ceiling_round(group_env, group_dbs, group_fresh,
                                               prof.commit_seconds)
            if ceiling.keep_best(n, secs):
                ceiling.lat_ns = lat
            n, secs, lat, note = await allocate_round(graph, store, fresh, prof.alloc_seconds)
            if alloc.keep_best(n, secs):
                alloc.lat_ns, alloc.note = lat, note
    finally:
        env.close()
        group_env.close()
    return alloc, commit, ceiling


# --- output -------------------------------------------------------------------------------


def profile_hot_path(graph: IdentityGraph, keys: list[OpenId], scenes: list[str],
                     order: Sequence[int]) -> None:
    import cProfile
    import pstats

    async def loop() -> None:
        for i in order:
            await graph.resolve([keys[i]], scene=scenes[i])

    prof = cProfile.Profile()
    prof.enable()
    asyncio.run(loop())
    prof.disable()
    print("\n--- cProfile: resolve(known key), by tottime ---")
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


def main() -> int:
    run = Run(__doc__, quick="smaller store, shorter phases",
              strict="exit 1 if a target is missed", profile="also cProfile the resolve hot path")
    prof = QUICK if run.quick else FULL
    rng = random.Random(SEED)

    with run.temp_dir("idmap-bench-", "identity", tmpfs_why="where fsync is free") as tmp:
        n = prof.identities
        keys = [key_of(i) for i in range(n)]
        scenes = [scene_of(i) for i in range(n)]
        order = [rng.randrange(n) for _ in range(prof.read_ops)]
        store = LmdbIdentityStore(tmp / "openid-map.db", map_size=MAP_SIZE)
        graph = IdentityGraph(store)
        bare_env = None
        try:
            t = time.perf_counter()
            vuins = asyncio.run(populate(graph, keys, scenes))
            print(f"populated {n:,} identities with scenes in {time.perf_counter() - t:.1f}s "
                  f"({store.commit_stats[0]} commits); {prof.read_ops:,} ops per read pass, "
                  f"best of {prof.read_rounds} interleaved rounds")
            bare_env, bare_db, raw = open_bare_read_env(tmp, keys, vuins)
            gc.collect()
            reads = asyncio.run(bench_reads(graph, bare_env, bare_db, raw, keys, scenes, vuins,
                                            order, prof.read_rounds))
            bare_env.close()
            bare_env = None
            alloc, commit, ceiling = asyncio.run(bench_writes(graph, store, tmp, n, prof))
            if run.profile:
                profile_hot_path(graph, keys, scenes, order)
        finally:
            if bare_env is not None:
                bare_env.close()
            store.close()

    table = Table(name=28, rate=12, us=10)
    table.print_header()
    for r in (reads["resolve known key"], reads["pick_identity"], alloc):
        print(table.row(r))
    print("  ceilings (plain py-lmdb, same disk):")
    for r in (reads["bare get, 1 txn per get"], reads["bare get, 1 txn for all"], commit,
              ceiling):
        print(table.row(r))

    def ratio(label: str, num: Result, den: Result, target: float | None) -> None:
        value = num.ops_per_s / den.ops_per_s
        if target is None:
            verdict = "(info)"
        else:
            verdict = f"target >= {target:g}  {run.verdict(value, target)}"
        print(f"  {label:<46} {value:>8.3f}   {verdict}")

    print("\nratios (ops/s / ops/s):")
    ratio("resolve known / bare get (1 txn per get)", reads["resolve known key"],
          reads["bare get, 1 txn per get"], 0.3)
    ratio("resolve known / bare get (1 txn for all)", reads["resolve known key"],
          reads["bare get, 1 txn for all"], None)
    ratio("pick_identity / bare get (1 txn per get)", reads["pick_identity"],
          reads["bare get, 1 txn per get"], None)
    ratio(f"allocate ({CALLERS} callers) / 1 commit per write", alloc, commit, None)
    ratio(f"{CALLERS} per commit (py-lmdb) / 1 commit per write", ceiling, commit, None)
    ratio(f"allocate ({CALLERS} callers) / {CALLERS} per commit", alloc, ceiling, 0.5)

    print(f"\npeak RSS {run.peak_rss_mib():.1f} MiB; {run.summary()} "
          f"(other processes skew the figures; ratios come from interleaved passes)")
    return run.exit_code()


if __name__ == "__main__":
    sys.exit(main())
