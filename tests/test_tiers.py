"""The tiers: each folder of tests/ named in conftest.TIERS marks its tests with the folder's
name, so ``-m`` selects a tier (``-m "not e2e and not crash and not faults"``: the quick
one), while plain ``pytest`` (``make test``) still runs everything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .conftest import TIERS

ROOT = Path(__file__).resolve().parent.parent


def collected(marker_expression: str) -> list[str]:
    """The node ids ``pytest -m marker_expression`` would run."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-m", marker_expression], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_each_tier_selects_its_folder_and_the_quick_tier_none_of_them() -> None:
    for tier in TIERS:
        ids = collected(tier)
        assert ids, f"no test marked {tier}"
        assert all(node.startswith(f"tests/{tier}/") for node in ids), ids
    quick = collected(" and ".join(f"not {tier}" for tier in TIERS))
    assert quick and not any(node.startswith(tuple(f"tests/{t}/" for t in TIERS))
                             for node in quick)
    this = test_each_tier_selects_its_folder_and_the_quick_tier_none_of_them.__name__
    assert f"tests/test_tiers.py::{this}" in quick
