"""docs/testing.md's example is a bot developer's pytest test: it runs here as one, in a
pytest process of its own, from a directory outside the repository (as a bot's tests would
be), so a change to ``gensokyo_idmap.testing`` that breaks it fails here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def example() -> str:
    blocks = re.findall(r"^```python\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.S | re.M)
    assert len(blocks) == 1, "docs/testing.md should hold exactly one python example"
    return blocks[0]


@pytest.mark.slow
def test_the_documented_example_passes_as_a_bots_own_test(tmp_path: Path) -> None:
    test_file = tmp_path / "test_my_bot.py"
    test_file.write_text(example(), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error",
         str(test_file)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout, result.stdout


def test_the_example_fails_when_the_bot_does_not_answer(tmp_path: Path) -> None:
    """The example can fail: with the bot's reply removed, its wait for the reply times out."""
    broken = example().replace('await ws.send_json({"action": "send_group_msg"',
                               'await ws.ping() or ({"action": "send_group_msg"')
    assert broken != example()
    test_file = tmp_path / "test_my_bot.py"
    test_file.write_text(broken.replace(", 10,\n", ", 2,\n"), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "the bot's reply at the platform" in result.stdout, result.stdout
