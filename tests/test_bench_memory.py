"""Smoke test of bench/memory.py: a --quick run with a short quiet phase prints every point
of the daemon and the bare relay, the growth per person and per group, where the memory
is, the tables (or that the daemon has no memory section) and a verdict per target."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_quick_run_prints_every_point_and_a_verdict_per_target() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "memory.py"), "--quick", "--quiet-minutes", "0.2",
         "--no-imports"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "idmap.msgid_ttl_seconds 300 (shipped 3600)" in out  # the shortened windows
    for point in ("idle", "after 2,000 events from 1,000 new users",
                  "after 5,000 events from 5,000 new groups", "after 0.2 min of known users only"):
        row = re.search(rf"^  daemon, {point} +([\d.]+) +([\d.]+) +([\d.]+)$", out, re.M)
        assert row is not None, (point, out)
        rss, anon, file = map(float, row.groups())
        assert rss > 0 and anon > 0 and abs(rss - anon - file) < 0.2, row.group(0)
    for point in ("idle", "after 2,000 events from 1,000 new users"):
        assert re.search(rf"^  bare relay, {point} +[\d.]+ ", out, re.M), (point, out)
    for growth in ("per new person", "per new group"):
        assert re.search(rf"^  {growth} \(.*\) +-?[\d,]+ +-?[\d,]+ +-?[\d,]+$", out, re.M), out
    assert re.search(r"^  anon: \[heap\] \(main malloc arena\) +[\d.]+", out, re.M), out
    tables = out.split("caches and per-chat tables", 1)[1]
    assert "n/a (no memory section)" in tables or re.search(r" entries +KiB", tables), out
    verdicts = re.findall(r"target <= [\d.]+  (PASS|MISS)", out)
    assert len(verdicts) == 3, out  # the fourth is information: the windows did not turn over
    assert "(info: the windows turn over after" in out
