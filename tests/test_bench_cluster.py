"""Smoke test of bench/cluster.py: a --quick run on the test PostgreSQL prints every
allocation figure, all non-zero, and the ratio line (whatever its verdict: speed lives in
bench/, not in tests), and leaves no schema behind."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from .store_backends import PG_DSN, require_postgres

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_quick_run_prints_every_allocation_figure() -> None:
    require_postgres()
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "cluster.py"), "--quick",
                           "--dsn", PG_DSN], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    for figure in ("allocate, 64 callers, group commit", "1 txn per identity, 1 caller",
                   "1 txn per identity, 64 callers"):
        row = re.search(rf"^  {re.escape(figure)} +(\d+) +([\d,]+) ", out, re.MULTILINE)
        assert row is not None, f"no row for {figure}:\n{out}"
        assert int(row.group(1)) > 0 and int(row.group(2).replace(",", "")) > 0, row.group(0)
    assert re.search(r"group commit / 1 txn per identity .* target >= 10", out), out
    schema = re.search(r"schema (gsk_bench_\w+)", out)
    assert schema is not None, out
    with psycopg.connect(PG_DSN) as conn:
        left = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s",
                            (schema.group(1),)).fetchone()
    assert left == (0,), f"{schema.group(1)} was not dropped"
