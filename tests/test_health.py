"""health.py: what /healthz reports, from what is known, without writing."""

from __future__ import annotations

import os
from pathlib import Path

from gensokyo_idmap.health import MIN_FREE_BYTES, disk_problem, low_space


def test_low_space_is_below_the_threshold() -> None:
    assert low_space(MIN_FREE_BYTES - 1)
    assert not low_space(MIN_FREE_BYTES)
    assert low_space(10, minimum=11) and not low_space(11, minimum=11)


def test_disk_problem_names_the_data_dir(tmp_path: Path) -> None:
    free = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
    assert disk_problem(tmp_path, minimum=1) is None
    problem = disk_problem(tmp_path, minimum=free + 10**12)
    assert problem is not None
    assert problem.startswith("disk full: ") and str(tmp_path) in problem
    assert disk_problem(tmp_path / "gone") == (
        f"cannot see the free space of {tmp_path / 'gone'}: No such file or directory")
