"""Every benchmark script that ``make bench`` and ``make soak`` run can at least start.

The scripts run outside pytest, so an import that breaks (a module renamed, or a script
whose name shadows a package, as ``bench/migrate.py`` once shadowed ``migrate``) would only
show when someone runs ``make bench``. ``--help`` imports everything a script imports.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def scripts_the_makefile_runs() -> list[str]:
    makefile = (ROOT / "Makefile").read_text()
    return sorted(set(re.findall(r"\$\(BIN\)/python (bench/\w+\.py)", makefile)))


def test_the_makefile_runs_every_benchmark_script() -> None:
    listed = scripts_the_makefile_runs()
    on_disk = sorted(f"bench/{p.name}" for p in (ROOT / "bench").glob("[!_]*.py"))
    assert listed == on_disk


@pytest.mark.parametrize("script", scripts_the_makefile_runs())
def test_a_benchmark_script_starts(script: str) -> None:
    done = subprocess.run([sys.executable, script, "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout
