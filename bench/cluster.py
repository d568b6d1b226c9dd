"""Cluster benchmark: the identity graph on PostgreSQL (issue 17).

Run: ``.venv/bin/python bench/cluster.py [--quick] [--strict] [--dsn URL] [--redis-url URL]``

A benchmark script, not a test: one run prints every figure and the ratios with their
targets; the exit code is 0 unless ``--strict`` is given and a target is missed. It works in
a schema of its own (``gsk_bench_<random>``) of ``--dsn`` (default
``postgresql://127.0.0.1:5432/test``), dropped at the end.

Figures (new-identity allocation; every call returns after its commit is durable:
``synchronous_commit`` on)
------------------------------------------------------------------------------------
allocate, 64 callers, group commit
    64 asyncio tasks, each resolving fresh keys (with a scene) in a loop through
    ``IdentityGraph.resolve`` on a ``PgIdentityStore``: the daemon's path, and the same
    phase as bench/identity.py's on LMDB (its code). ``avg batch`` is writes /
    transactions over the phase (how many callers one transaction served).
1 transaction per identity, 1 caller
    The same write function of the graph (``idmap._apply_resolution``), each in a
    transaction of its own (``PgIdentityStore.transact``: SERIALIZABLE, commit, retried on
    conflict), one after the other: what each new identity costs without group commit.
1 transaction per identity, 64 callers
    The same, from 64 threads at once, each with its own pooled connection: without group
    commit, concurrency buys little, since every allocation updates the one counter row and
    all but one of the transactions that touched it at once are aborted and re-run
    (``retries``).

Target: allocate (64 callers, group commit) / the faster of the two one-transaction-per-
identity figures >= 10.

How it is measured: rounds (2, 1 with ``--quick``) of each phase, interleaved; the best
round of each figure is kept, with its own latencies (p50/p99 of each call).

Figures (inbound, known users, webhook; bench/inbound.py's machinery)
---------------------------------------------------------------------
Real ``gensokyo-idmap serve`` processes, each with its emulated platform and a forward-WS
consumer in this process, as in bench/inbound.py (its ``Target``, warm-up, latency pass and
``post_all``): every known user is seen once in a warm-up, then floods of
``GROUP_AT_MESSAGE_CREATE`` from those users, signed before the clock starts, 32 deliveries
in flight per daemon (8000 events a flood, 500 with ``--quick``).

daemon, LMDB / daemon, PostgreSQL + Redis
    The same flood on the LMDB daemon (openid-map.db, msgid-map.db) and on a daemon with
    ``idmap.backend: postgres`` (a schema of its own, ``<schema>_inbound``) and
    ``idmap.runtime_backend: redis`` (``--redis-url``, a prefix of its own, deleted at the
    end). events/s from the flood; p50/p99 from a pass of events sent one at a time, each
    after the previous one arrived (post to arrival at the consumer).
1 daemon / 2 daemons on the webhook
    The PostgreSQL + Redis daemon alone, then it and a second daemon on the same schema and
    prefix, the flood dealt out in turn to both (each with its own 32 in flight): events/s,
    and p50/p99 of each event under that load (post to arrival).
cpu
    Each inbound row's note: CPU of the daemon process(es) and of this process (which
    signs, posts and consumes) during its floods, as a share of one core.

Target: PostgreSQL + Redis / LMDB events/s >= 0.7. Two daemons against one is printed for
information: on a machine with few cores both share them with this process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import secrets
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import _common  # noqa: F401 - logging set-up and sys.path, before gensokyo_idmap
import aiohttp
import inbound
import psycopg
from _common import Result, Run, Table, cpu_seconds
from identity import CALLERS, FreshKeys, allocate_round, key_of, scene_of
from inbound import WINDOW, Events, Target, daemon_command, dispatcher, one_at_a_time, post_all

from gensokyo_idmap.errors import StoreError
from gensokyo_idmap.idmap import IdentityGraph, _apply_resolution
from gensokyo_idmap.runtime.redis.connection import RedisRuntime
from gensokyo_idmap.store.postgres.identity import PgIdentityStore


@dataclass(frozen=True)
class Profile:
    rounds: int
    seconds: float


FULL = Profile(rounds=2, seconds=5.0)
QUICK = Profile(rounds=1, seconds=1.0)


def per_identity_round(store: PgIdentityStore, fresh: FreshKeys, seconds: float,
                       callers: int) -> tuple[int, float, list[int], str]:
    """``callers`` threads, each allocating one identity per transaction until the deadline."""
    lat: list[int] = []
    clock = time.perf_counter_ns
    deadline = clock() + int(seconds * 1e9)
    retries0 = store.retries
    gave_up = 0
    taking = threading.Lock()  # FreshKeys is for one event loop, not for threads

    def caller() -> None:
        nonlocal gave_up
        while clock() < deadline:
            with taking:
                i = fresh.take()
            key = key_of(i).key
            a = clock()
            try:
                res = store.transact(partial(_apply_resolution, keys=[key], scene=scene_of(i),
                                             scene_key=key, now=time.time()))
            except StoreError:  # conflicted MAX_ATTEMPTS times in a row: not an identity
                gave_up += 1
                continue
            lat.append(clock() - a)
            assert res.created, res

    t0 = clock()
    with ThreadPoolExecutor(callers) as pool:
        for future in [pool.submit(caller) for _ in range(callers)]:
            future.result()
    elapsed = (clock() - t0) / 1e9
    lat.sort()
    return len(lat), elapsed, lat, (f"{store.retries - retries0} retries after conflicts"
                                    + (f", {gave_up} gave up" if gave_up else ""))

# --- inbound: PostgreSQL + Redis against LMDB, one daemon against two -----------------------

LMDB = "daemon, LMDB"
PG = "daemon, PostgreSQL + Redis"
ONE = "1 daemon (PostgreSQL + Redis)"
TWO = "2 daemons (PostgreSQL + Redis)"
INBOUND_TARGET = 0.7
INBOUND_TIMEOUT = 600.0  # the whole inbound measurement, daemons started and stopped


@dataclass
class Inbound:
    """The inbound figures, and the CPU each used during its floods: [servers, this
    process, wall] seconds."""

    results: dict[str, Result] = field(default_factory=lambda: {
        name: Result(name) for name in (LMDB, PG, ONE, TWO)})
    cpu: dict[str, list[float]] = field(default_factory=dict)

    def note_cpu(self) -> None:
        for name, (servers, bench, wall) in self.cpu.items():
            result = self.results[name]
            cpu = f"cpu: daemon(s) {servers / wall:.0%}, bench {bench / wall:.0%}"
            result.note = f"{result.note}; {cpu}" if result.note else cpu


async def spread_flood(targets: list[Target], events: Events, count: int, timeout: float
                       ) -> tuple[int, float, list[int]]:
    """``count`` known-user webhook events dealt out in turn to ``targets`` (each with
    inbound.WINDOW deliveries in flight), all signed before the clock starts: (arrived,
    seconds from the first post to the last arrival, each event's post-to-arrival ns,
    sorted)."""
    share = count // len(targets)
    plans = [dispatcher(target, "webhook", events, "known", share) for target in targets]
    sent: dict[int, int] = {}
    for target, (numbers, _, _) in zip(targets, plans, strict=True):
        target.consumer.expect(numbers)
    t0 = time.perf_counter_ns()
    posts = []
    for target, (numbers, _, prepared) in zip(targets, plans, strict=True):
        assert target.sender is not None
        posts.append(post_all(target.sender, prepared, sent, numbers))
    await asyncio.wait_for(asyncio.gather(*posts), timeout)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.gather(*(t.consumer.all_in.wait() for t in targets)),
                               timeout)
    arrived = {n: target.consumer.arrived[n]
               for target, (numbers, _, _) in zip(targets, plans, strict=True)
               for n in numbers if n in target.consumer.arrived}
    if not arrived:
        raise RuntimeError(f"nothing arrived from {[t.name for t in targets]} in {timeout:g}s")
    return (len(arrived), (max(arrived.values()) - t0) / 1e9,
            sorted(arrived[n] - sent[n] for n in arrived))


async def timed_flood(figures: Inbound, name: str, targets: list[Target], events: Events,
                      prof: inbound.Profile, *, loaded: str | None = None) -> None:
    """One flood of ``prof.events`` on ``targets`` into figure ``name``, and into figure
    ``loaded`` too with the flood's own latencies (under load) when it is its best round."""
    pids = [t.proc.pid for t in targets if t.proc is not None]
    c0, b0, w0 = sum(map(cpu_seconds, pids)), cpu_seconds(None), time.perf_counter()
    n, seconds, lat = await spread_flood(targets, events, prof.events, prof.flood_timeout)
    cpu = figures.cpu.setdefault(name, [0.0, 0.0, 0.0])
    cpu[0] += sum(map(cpu_seconds, pids)) - c0
    cpu[1] += cpu_seconds(None) - b0
    cpu[2] += time.perf_counter() - w0
    for figure in [name] if loaded in (None, name) else [name, loaded]:
        result = figures.results[figure]
        if n < prof.events - prof.events % len(targets):
            result.note = f"only {n} of {prof.events} arrived"
        if result.keep_best(n, seconds) and figure == loaded:
            result.lat_ns = lat


async def measure_inbound(lmdb: Target, pg: Target, pg2: Target, prof: inbound.Profile
                          ) -> Inbound:
    figures = Inbound()
    events = Events(prof)
    targets = [lmdb, pg, pg2]
    connector = aiohttp.TCPConnector(limit=WINDOW * 4)
    async with aiohttp.ClientSession(connector=connector) as http:
        try:
            for target in targets:
                await target.platform.start()
                await target.start(http)
                await inbound.warm_up(target, events, prof)
            for round_ in range(prof.rounds):
                pair = [(LMDB, lmdb), (PG, pg)]
                for name, target in pair if round_ % 2 == 0 else pair[::-1]:
                    await timed_flood(figures, name, [target], events, prof,
                                      loaded=ONE if name == PG else None)
                    figures.results[name].keep_best_latencies(await one_at_a_time(
                        target, "webhook", events, "known", prof.latency_events,
                        prof.flood_timeout))
                await timed_flood(figures, TWO, [pg, pg2], events, prof, loaded=TWO)
        finally:
            for target in targets:
                await target.close()
    return figures


def run_inbound(dsn: str, redis_url: str, schema: str, quick: bool, rounds: int) -> Inbound:
    """The inbound figures: the daemons started in a temp dir, on schema ``schema``
    (created here, dropped after) and a Redis prefix of their own (deleted after)."""
    prof = dataclasses.replace(inbound.QUICK if quick else inbound.FULL, rounds=rounds)
    prefix = f"gsk-bench-{secrets.token_hex(6)}:"
    shared = {"backend": "postgres", "postgres_dsn": f"{dsn}?options=-csearch_path%3D{schema}",
              "runtime_backend": "redis", "redis_url": redis_url, "redis_prefix": prefix}
    print(f"inbound: {prof.events:,} known-user webhook events per flood, "
          f"{prof.latency_events} one at a time, {prof.known_users} users in {prof.groups} "
          f"groups, {prof.rounds} round(s); schema {schema}, Redis {redis_url} prefix {prefix}")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}".encode())
    runtime = RedisRuntime(redis_url, prefix)
    try:
        with tempfile.TemporaryDirectory(prefix="idmap-bench-cluster-") as tmpdir:
            tmp = Path(tmpdir)
            lmdb = Target(LMDB, daemon_command, tmp)
            pg = Target(PG, daemon_command, tmp, idmap=shared)
            pg2 = Target("2nd daemon", daemon_command, tmp, idmap=shared)
            try:
                figures = asyncio.run(asyncio.wait_for(measure_inbound(lmdb, pg, pg2, prof),
                                                       INBOUND_TIMEOUT))
            except (RuntimeError, TimeoutError, OSError, aiohttp.ClientError) as err:
                for target in (lmdb, pg, pg2):
                    print(f"--- {target.name} log, last lines:\n{target.log_tail()}")
                raise RuntimeError(f"the inbound benchmark failed: {err!r}") from err
    finally:
        runtime.delete_all()
        runtime.sync.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE".encode())
    figures.cpu[ONE] = figures.cpu[PG]
    figures.note_cpu()
    return figures


def main() -> int:
    dsn_parser = argparse.ArgumentParser(add_help=False)
    dsn_parser.add_argument("--dsn", default="postgresql://127.0.0.1:5432/test")
    dsn_parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    known, rest = dsn_parser.parse_known_args()
    import sys

    sys.argv[1:] = rest
    run = Run(__doc__, quick="shorter phases", strict="exit 1 if a target is missed",
              profile="(no profile in this script)")
    prof = QUICK if run.quick else FULL
    schema = f"gsk_bench_{secrets.token_hex(6)}"
    print(f"gensokyo-idmap cluster benchmark ({'quick' if run.quick else 'full'}): "
          f"psycopg {psycopg.__version__}, PostgreSQL at {known.dsn}, schema {schema}")
    grouped = Result(f"allocate, {CALLERS} callers, group commit")
    alone = Result("1 txn per identity, 1 caller")
    alone_many = Result(f"1 txn per identity, {CALLERS} callers")
    try:
        store = PgIdentityStore(known.dsn, schema=schema, pool_size=CALLERS + 4)
        try:
            with psycopg.connect(known.dsn) as conn:
                row = conn.execute("SHOW server_version").fetchone()
                print(f"server {row[0] if row else '?'}; {prof.rounds} round(s) of "
                      f"{prof.seconds:g}s per figure")
            graph = IdentityGraph(store)
            fresh = FreshKeys(0)  # a schema of its own: every key is new
            for _ in range(prof.rounds):
                n, secs, lat, note = per_identity_round(store, fresh, prof.seconds, 1)
                if alone.keep_best(n, secs):
                    alone.lat_ns, alone.note = lat, note
                n, secs, lat, note = per_identity_round(store, fresh, prof.seconds, CALLERS)
                if alone_many.keep_best(n, secs):
                    alone_many.lat_ns, alone_many.note = lat, note
                n, secs, lat, note = asyncio.run(
                    allocate_round(graph, store, fresh, prof.seconds))
                if grouped.keep_best(n, secs):
                    grouped.lat_ns, grouped.note = lat, note
            with store.read() as view:
                counts = view.counts()
            assert counts.identities == counts.vuins, "a vUIN names two identities"
        finally:
            store.close()
    finally:
        with psycopg.connect(known.dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE".encode())

    table = Table(name=36, rate=10, us=10)
    table.print_header()
    for r in (grouped, alone, alone_many):
        print(table.row(r))
    baseline = max(alone, alone_many, key=lambda r: r.ops_per_s)
    value = grouped.ops_per_s / baseline.ops_per_s
    print("\nratios (ops/s / ops/s):")
    print(f"  {'group commit / 1 txn per identity (the faster)':<50} {value:>8.2f}   "
          f"target >= 10  {run.verdict(value, 10)}")

    figures = run_inbound(known.dsn, known.redis_url, f"{schema}_inbound", run.quick,
                          prof.rounds)
    results = figures.results
    print("\ninbound, known users, webhook (events/s from a flood; p50/p99: one at a time)")
    table = Table(name=36, rate=10, us=10)
    table.print_header()
    for name in (LMDB, PG):
        print(table.row(results[name]))
    print("\none against two daemons on the webhook (p50/p99: each event under the flood)")
    table.print_header()
    for name in (ONE, TWO):
        print(table.row(results[name]))
    value = results[PG].ops_per_s / results[LMDB].ops_per_s
    two = results[TWO].ops_per_s / results[ONE].ops_per_s
    print("\nratios (events/s / events/s):")
    print(f"  {'PostgreSQL + Redis / LMDB, known users':<50} {value:>8.2f}   "
          f"target >= {INBOUND_TARGET:g} {run.verdict(value, INBOUND_TARGET)}")
    print(f"  {'2 daemons / 1 daemon':<50} {two:>8.2f}   (info)")
    print(f"\n{run.summary()}")
    return run.exit_code()


if __name__ == "__main__":
    raise SystemExit(main())
