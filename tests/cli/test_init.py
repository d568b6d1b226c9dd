"""``gensokyo-idmap --version`` and ``gensokyo-idmap init [DIR]``.

``main`` configures structlog for stderr, so every test resets structlog afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest
import structlog
from click.testing import CliRunner

import gensokyo_idmap
from gensokyo_idmap.cli import main
from gensokyo_idmap.config_example import example_text


@pytest.fixture(autouse=True)
def _structlog_defaults() -> Iterator[None]:
    yield
    structlog.reset_defaults()


def test_version_is_the_package_s_and_the_distribution_s() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output == f"gensokyo-idmap, version {gensokyo_idmap.__version__}\n"
    # pyproject.toml takes its version from the package: one place to change it
    assert version("gensokyo-idmap") == gensokyo_idmap.__version__


def test_init_writes_the_example_and_says_what_to_fill_in(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["init", "site"])
    assert result.exit_code == 0, result.output
    written = Path("site") / "config.yml"
    assert written.read_text(encoding="utf-8") == example_text()
    lines = result.stdout.splitlines()
    assert lines[0] == f"wrote {written}"
    for key in ("bot.app_id", "bot.secret", "webhook.listen", "qq.gateway", "idmap.data_dir"):
        assert any(key in line for line in lines), (key, result.stdout)
    assert f"then: gensokyo-idmap config check {written}" in lines
    # what it wrote passes the check it names
    checked = CliRunner().invoke(main, ["config", "check", str(written)])
    assert checked.exit_code == 0, checked.output


def test_init_defaults_to_here_and_keeps_a_filled_in_file(tmp_path: Path) -> None:
    assert CliRunner().invoke(main, ["init"]).exit_code == 0
    Path("config.yml").write_text("bot: {secret: filled-in}\n", encoding="utf-8")
    again = CliRunner().invoke(main, ["init"])
    assert again.exit_code == 2
    assert "holds a config.yml already (--force replaces it)" in again.stderr
    assert Path("config.yml").read_text(encoding="utf-8") == "bot: {secret: filled-in}\n"
    forced = CliRunner().invoke(main, ["--json", "init", "--force"])
    assert forced.exit_code == 0, forced.output
    assert json.loads(forced.stdout)["file"] == "config.yml"
    assert Path("config.yml").read_text(encoding="utf-8") == example_text()
