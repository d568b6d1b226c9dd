"""Smoke test of bench/inbound.py: a tiny --quick run prints every figure line, all non-zero,
the cost of confirmation by ping included."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = [(via, who) for via in ("gateway", "webhook") for who in ("known", "new")]
EVENTS = 40


@pytest.mark.slow
def test_quick_run_prints_every_scenario_for_daemon_and_bare_relay() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "inbound.py"), "--quick", "--events", str(EVENTS)],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    for via, who in SCENARIOS:
        for target in ("daemon", "bare relay"):
            row = re.search(rf"^  {via}, {who} users  {target} +(\d+) +([\d,]+) +([\d.]+) "
                            rf"+([\d.]+) ", out, re.MULTILINE)
            assert row is not None, f"no row for {via}/{who}/{target}:\n{out}"
            events, rate, p50, p99 = row.groups()
            assert int(events) == EVENTS, row.group(0)  # every event arrived
            assert int(rate.replace(",", "")) > 0, row.group(0)
            assert 0 < float(p50) <= float(p99), row.group(0)
        ratio = re.search(rf"^  {via}, {who} users +(\d+\.\d+) ", out, re.MULTILINE)
        assert ratio is not None and float(ratio.group(1)) > 0, f"no ratio for {via}/{who}"
    # confirmation by ping on and off, same run, same scenario
    off = re.search(r"^  gateway, known users  daemon, confirm on write +(\d+) +([\d,]+) ",
                    out, re.MULTILINE)
    assert off is not None and int(off.group(1)) == EVENTS, out
    for figure in ("gateway, known users, ping-confirmed", "gateway, known users, confirm on "
                   "write", "ratio confirmed / on write"):
        line = re.search(rf"^  {figure} +([\d,.]+)", out, re.MULTILINE)
        assert line is not None and float(line.group(1).replace(",", "")) > 0, (figure, out)


@pytest.mark.slow
def test_bots_run_prints_cpu_per_event_and_memory_per_idle_bot() -> None:
    """``--bots N`` (issue 34.6): each transport's rows for the daemons of 1 bot and of N,
    as fast as each goes and at one pace, every event arrived, their CPU ratios (the paced
    one against its target), and the idle RSS of 1 and N + 1 bots with the figure per extra
    bot."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "inbound.py"), "--bots", "3", "--quick",
         "--events", str(EVENTS)], cwd=ROOT, capture_output=True, text=True, timeout=240)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    for via in ("gateway", "webhook"):
        for name in ("1 bot", "3 bots", "3 bots, all on one"):
            # as fast as each goes, then at one pace: every event arrived in both
            rows = re.findall(rf"^  {via}, {name} +(\d+) +([\d,]+) +([\d.]+)$", out, re.M)
            assert [int(events) for events, _, _ in rows] == [EVENTS, EVENTS], (via, name, out)
        # a few events may take less CPU than one clock tick: a ratio of nan then
        flat_out = re.search(rf"^  {via} +(\d+\.\d+|nan)  \(information: each at its own "
                             r"rate\)$", out, re.M)
        assert flat_out is not None, (via, out)
        paced = re.search(rf"^  {via} +(\d+\.\d+|nan)  target <= 1.05  (PASS|MISS)  "
                          r"\(at [\d,]+ events/s", out, re.M)
        assert paced is not None, (via, out)
    for name in ("1 bot", "4 bots"):
        assert re.search(rf"^  {name} +\d+\.\d$", out, re.M), (name, out)
    per_bot = re.search(r"^  per extra bot +(-?\d+\.\d+)  target <= 3  (PASS|MISS)$", out,
                        re.M)
    assert per_bot is not None, out


@pytest.mark.slow
def test_against_a_ref_runs_its_daemon_beside_this_trees() -> None:
    """``--against REF``: the ref's daemon (unpacked from git) takes the same floods, every
    event arrives, and the ratios of this tree over it are printed."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "inbound.py"), "--quick", "--events", str(EVENTS),
         "--scenario", "gateway:known", "--against", "HEAD"],
        cwd=ROOT, capture_output=True, text=True, timeout=180)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    row = re.search(r"^  gateway, known users  daemon at HEAD +(\d+) +([\d,]+) ", out, re.M)
    assert row is not None and int(row.group(1)) == EVENTS, out
    heading = out.index("ratio daemon / daemon at HEAD")
    ratio = re.search(r"^  gateway, known users +(\d+\.\d+) +(\d+\.\d+)x +(\d+\.\d+x|n/a)$",
                      out[heading:], re.M)
    assert ratio is not None and float(ratio.group(1)) > 0 < float(ratio.group(2)), out
