"""Moving the identity graph between backends: ``store copy`` on a 50,000-identity store.

Run: ``.venv/bin/python bench/store_copy.py [--identities N] [--dsn URL]``

This is a benchmark script, not a test. It builds an openid-map.db of N identities (default
50,000), each in a vUIN set of its own with one ``last_seen`` entry, plus N/50 aliases and
a migration marker, in a temp dir (one transaction, not timed). Then, into a schema of its
own of ``--dsn`` (``gsk_bench_copy_<random>``, dropped after), it times what the commands
do, each once (a copy goes into an empty target only):

lmdb → postgres
    ``store copy --to postgres``: the raw read of openid-map.db, the checks of every record,
    and the load (schema migrations, table locks, ``COPY`` of every table, the count check,
    the commit with its WAL flush).
postgres → lmdb
    ``store copy --to lmdb`` (what ``backup`` writes on a PostgreSQL graph, before its
    verify): one snapshot read, a new openid-map.db written in one transaction.
verify (postgres)
    ``verify`` on the PostgreSQL graph: the snapshot read and the graph checks.

Rows/s counts every row of every table read. Both copies must carry every row (the
program exits 1 otherwise). No target: a figure to print in the report and the commit.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg

from gensokyo_idmap.ops.store_copy import (
    copy_graph,
    read_lmdb_rows,
    verify_postgres,
    write_lmdb_rows,
)
from gensokyo_idmap.store.base import MIGRATION_MARKER, LastSeen
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore, LmdbView
from gensokyo_idmap.store.postgres.copy import load_rows, read_rows

APP = "102000001"


def build(path: Path, identities: int) -> None:
    def fill(view: LmdbView) -> None:
        for n in range(1, identities + 1):
            key = f"openid:QQ:{APP}:{n:032X}"
            view.set_vuin(key, n)
            view.add_identity(n, key)
            view.set_last_seen(n, f"QQ:{APP}:group:{n % 997:032X}", LastSeen(key, 1.7e9 + n))
        for n in range(identities // 50):
            view.set_alias(identities + 1 + n, 1 + n)
        view.set_vuin_counter(identities + identities // 50)
        view.set_meta(MIGRATION_MARKER, {"legacy_sha256": "0" * 64, "at": 1.7e9})

    store = LmdbIdentityStore(path, map_size=1 << 30)
    try:
        store.transact(fill)
    finally:
        store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--identities", type=int, default=50_000)
    parser.add_argument("--dsn", default="postgresql://127.0.0.1:5432/test")
    args = parser.parse_args()
    schema = f"gsk_bench_copy_{uuid.uuid4().hex[:12]}"
    failed = False
    print(f"store copy: {args.identities:,} identities; PostgreSQL at {args.dsn}, "
          f"schema {schema}")
    with tempfile.TemporaryDirectory(prefix="gsk-bench-copy-") as scratch:
        source = Path(scratch) / "openid-map.db"
        build(source, args.identities)
        try:
            there = copy_graph(lambda: read_lmdb_rows(source),
                               lambda rows: load_rows(args.dsn, rows, schema),
                               "openid-map.db", schema)
            back_path = Path(scratch) / "back" / "openid-map.db"
            back_path.parent.mkdir()
            back = copy_graph(lambda: read_rows(args.dsn, schema),
                              lambda rows: write_lmdb_rows(back_path, rows), schema,
                              "openid-map.db")
            started = time.perf_counter()
            verified = verify_postgres(args.dsn, schema)
            verify_seconds = time.perf_counter() - started
        finally:
            with psycopg.connect(args.dsn, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    for label, report in (("lmdb → postgres", there), ("postgres → lmdb", back)):
        rows = sum(report.read.values())
        print(f"{label:<17} {report.seconds:6.2f} s  {rows / report.seconds:>10,.0f} rows/s  "
              f"({report.read['identity_to_vuin']:,} identities, {rows:,} rows, "
              f"{len(report.uncarried)} not carried)")
        if not report.ok or report.read != report.written:
            print(f"  FAILED: read {report.read}, written {report.written}")
            failed = True
    print(f"{'verify (postgres)':<17} {verify_seconds:6.2f} s  "
          f"({'ok' if verified.ok else 'VIOLATIONS'})")
    return 1 if failed or not verified.ok else 0


if __name__ == "__main__":
    sys.exit(main())
