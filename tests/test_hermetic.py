"""Tests run in their own temp dir (tests/conftest.py), so a relative default such as the
data dir ``./data`` never reads or writes the checkout."""

from __future__ import annotations

from pathlib import Path


def test_each_test_runs_in_its_own_temp_dir(tmp_path: Path) -> None:
    checkout = Path(__file__).resolve().parents[1]
    assert Path.cwd().resolve() == tmp_path.resolve()
    assert not Path.cwd().resolve().is_relative_to(checkout)
    assert not Path("pyproject.toml").exists()
