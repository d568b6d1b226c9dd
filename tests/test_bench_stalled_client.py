"""Smoke test of bench/stalled_client.py: a tiny --quick run prints both daemons' figures,
all non-zero, and the ratio (the stalled client stayed connected through its flood, or
the script would have said so and exited 2)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_quick_run_prints_the_rates_and_the_ratio() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "stalled_client.py"), "--quick", "--events", "60"],
        cwd=ROOT, capture_output=True, text=True, timeout=180)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    for name in ("daemon", "daemon \\+ stalled client"):
        row = re.search(rf"^  {name} +([\d,]+)  longest wait for an acknowledgement ([\d,]+) ms",
                        out, re.MULTILINE)
        assert row is not None and int(row.group(1).replace(",", "")) > 0, (name, out)
    ratio = re.search(r"^  ratio with / without the stalled client +(\d+\.\d+) ", out,
                      re.MULTILINE)
    assert ratio is not None and float(ratio.group(1)) > 0, out
