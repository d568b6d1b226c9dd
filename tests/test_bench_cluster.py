"""Smoke test of bench/cluster.py: a --quick run on the test PostgreSQL and Redis prints every
allocation and inbound figure, all non-zero, and the ratio lines (whatever their verdict:
speed lives in bench/, not in tests), and leaves no schema and no Redis key behind."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from gensokyo_idmap.runtime.redis.connection import RedisRuntime

from .conftest import REDIS_URL
from .store_backends import PG_DSN, require_postgres

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_quick_run_prints_every_figure() -> None:
    require_postgres()
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "cluster.py"), "--quick",
                           "--dsn", PG_DSN, "--redis-url", REDIS_URL], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    for figure in ("allocate, 64 callers, group commit", "1 txn per identity, 1 caller",
                   "1 txn per identity, 64 callers", "daemon, LMDB",
                   "daemon, PostgreSQL + Redis", "1 daemon (PostgreSQL + Redis)",
                   "2 daemons (PostgreSQL + Redis)"):
        row = re.search(rf"^  {re.escape(figure)} +(\d+) +([\d,]+) ", out, re.MULTILINE)
        assert row is not None, f"no row for {figure}:\n{out}"
        assert int(row.group(1)) > 0 and int(row.group(2).replace(",", "")) > 0, row.group(0)
    assert re.search(r"group commit / 1 txn per identity .* target >= 10", out), out
    assert re.search(r"PostgreSQL \+ Redis / LMDB, known users .* target >= 0.7", out), out
    assert re.search(r"2 daemons / 1 daemon +\d", out), out
    prefix = re.search(r"prefix (gsk-bench-\w+:)", out)
    assert prefix is not None, out
    runtime = RedisRuntime(REDIS_URL, prefix.group(1))
    try:
        assert not list(runtime.scan("*")), f"keys of {prefix.group(1)} were left behind"
    finally:
        runtime.sync.close()
    schemas = re.findall(r"schema (gsk_bench_\w+)", out)
    assert len(schemas) == 2, out  # the allocation's and the inbound daemons'
    with psycopg.connect(PG_DSN) as conn:
        left = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = ANY(%s)",
                            (schemas,)).fetchone()
    assert left == (0,), f"{schemas} were not dropped"
