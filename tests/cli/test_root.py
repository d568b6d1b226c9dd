"""The root's ``--config`` reaches the commands that have one of their own (``serve``,
``demo``): ``gensokyo-idmap --config FILE serve`` runs as ``serve --config FILE`` does,
and a ``--config`` given after the command wins. Each run is the real CLI in a child
process, refused by the command's own start-up check of the file it read (so nothing is
left running), whose message names which file that was."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-c", "from gensokyo_idmap.cli import main; main()"]
#: what serve refuses in each file (ops/config_check.py), which tells the files apart
OPEN_API = "api.listen: a listener on a non-loopback address needs api.token"
BARE_GATEWAY = "qq.gateway: the gateway needs bot.app_id and bot.secret"
NO_WEBHOOK = "webhook.listen: the demo platform posts its events to the webhook"


def _run(*args: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GSK_")}
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60, env=env)
    return done.returncode, done.stderr


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    texts = {"open_api.yml": 'api:\n  listen: "0.0.0.0:1"\n',
             "bare_gateway.yml": "qq:\n  gateway: true\n",
             "no_webhook.yml": 'webhook:\n  listen: ""\n'}
    for name, text in texts.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return {name: str(tmp_path / name) for name in texts}


@pytest.mark.parametrize("where", ["root", "command"])
def test_serve_reads_the_config_given_before_or_after_it(files: dict[str, str],
                                                         where: str) -> None:
    args = (["--config", files["open_api.yml"], "serve"] if where == "root" else
            ["serve", "--config", files["open_api.yml"]])
    code, err = _run(*args)
    assert (code, OPEN_API in err) == (2, True), err


def test_the_commands_config_wins_over_the_roots(files: dict[str, str]) -> None:
    code, err = _run("--config", files["open_api.yml"], "serve",
                     "--config", files["bare_gateway.yml"])
    assert (code, BARE_GATEWAY in err, OPEN_API in err) == (2, True, False), err


def test_serve_without_any_config_is_refused_as_before() -> None:
    code, err = _run("serve")
    assert code == 2 and "Missing option '--config'" in err, err


def test_demo_reads_the_roots_config_over_its_default(files: dict[str, str]) -> None:
    """The demo's default (examples/config.yml) does not exist in the test's directory:
    the file it refuses is the root's."""
    code, err = _run("--config", files["no_webhook.yml"], "demo")
    assert (code, NO_WEBHOOK in err) == (2, True), err
