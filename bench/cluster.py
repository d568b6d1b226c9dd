"""Cluster benchmark: the identity graph on PostgreSQL (issue 17).

Run: ``.venv/bin/python bench/cluster.py [--quick] [--strict] [--dsn URL]``

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

Still to come in this script (issue 17, other parts): known-user inbound events/s on
PostgreSQL + Redis against the LMDB daemon, and one against two daemons on the webhook.

How it is measured: rounds (2, 1 with ``--quick``) of each phase, interleaved; the best
round of each figure is kept, with its own latencies (p50/p99 of each call).
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

import _common  # noqa: F401 - logging set-up and sys.path, before gensokyo_idmap
import psycopg
from _common import Result, Run, Table
from identity import CALLERS, FreshKeys, allocate_round, key_of, scene_of

from gensokyo_idmap.errors import StoreError
from gensokyo_idmap.idmap import IdentityGraph, _apply_resolution
from gensokyo_idmap.store.pg_identity import PgIdentityStore


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


def main() -> int:
    dsn_parser = argparse.ArgumentParser(add_help=False)
    dsn_parser.add_argument("--dsn", default="postgresql://127.0.0.1:5432/test")
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
    print(f"\n{run.summary()}")
    return run.exit_code()


if __name__ == "__main__":
    raise SystemExit(main())
