"""The wheel, as a user gets it: built from this checkout's sources, installed with pip into a
fresh virtualenv in tmp_path (outside the checkout, no PYTHONPATH), then the console script
from there: ``--version``, ``init``, ``config check`` on what ``init`` wrote, ``demo`` in an
empty directory with no file given, and ``serve`` on the written config until its identity
API answers ``/healthz`` and ``/readyz`` names the missing secret, and its console answers in
Chinese (the compiled catalogs are in the wheel).

pip resolves the wheel's ranges itself, from the index this machine's pip is set up for (its
cache makes a second run quicker): the wheel is a library to pip, the lock files are only for
our own installs. The sources are copied first, since a build writes beside them (build/,
*.egg-info) and a test touches nothing outside tmp_path. Listeners are moved to free ports
and nothing is dialled out, through ``GSK_*`` variables, as the README's test does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

import gensokyo_idmap
from gensokyo_idmap.config_example import example_text
from gensokyo_idmap.testing import free_port

ROOT = Path(__file__).resolve().parents[2]
#: What a build reads from the checkout (pyproject.toml's packages, readme, license).
SOURCES = ("pyproject.toml", "MANIFEST.in", "README.md", "LICENSE", "CHANGELOG.md",
           "gensokyo_idmap", "migrate")
BUILD_TIMEOUT = 300.0
INSTALL_TIMEOUT = 600.0
COMMAND_TIMEOUT = 60.0
RUN_TIMEOUT = 60.0  # for demo and serve to show they work
#: A line the demo prints for something a simulated user said: ``21:51:23  [chat] Name: text``.
SAID = re.compile(r"^\d\d:\d\d:\d\d  \[[^\]]+\] \w+: ")


def build_wheel(where: Path) -> Path:
    pytest.importorskip("build", reason="`build` comes with requirements/dev.txt (make test)")
    source = where / "source"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copyfile(ROOT / name, source / name)
    # sdist first, then the wheel from the unpacked sdist: what an index would get
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir",
                    str(where / "dist"), str(source)], check=True, capture_output=True,
                   timeout=BUILD_TIMEOUT)
    wheels = list((where / "dist").glob("gensokyo_idmap-*.whl"))
    assert [w.name for w in wheels] == [
        f"gensokyo_idmap-{gensokyo_idmap.__version__}-py3-none-any.whl"]
    return wheels[0]


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without what would reach the checkout or configure the daemon."""
    env = {name: value for name, value in os.environ.items()
           if name not in ("PYTHONPATH", "VIRTUAL_ENV") and not name.startswith("GSK_")}
    return {**env, **extra}


def on_free_ports() -> tuple[dict[str, str], int]:
    """``GSK_*`` variables moving every listener to a free port and dialling nothing; the
    identity API's port."""
    api = free_port()
    return {"GSK_WEBHOOK__LISTEN": f"127.0.0.1:{free_port()}",
            "GSK_ONEBOT__FORWARD_WS": f"127.0.0.1:{free_port()}",
            "GSK_API__LISTEN": f"127.0.0.1:{api}",
            "GSK_ONEBOT__REVERSE_WS": "[]", "GSK_ONEBOT__HTTP_POST": "[]",
            "GSK_QQ__GATEWAY": "false"}, api


@contextmanager
def running(argv: list[str], cwd: Path, env: Mapping[str, str],
            logs: Path) -> Iterator[subprocess.Popen[str]]:
    """``argv`` as a process in ``cwd``, its stdout and stderr in files of ``logs``; killed
    if still there when the block ends (it ignored the test's signal, or an assert failed)."""
    logs.mkdir()
    with (logs / "stdout").open("w") as out, (logs / "stderr").open("w") as err:
        proc = subprocess.Popen(argv, cwd=cwd, env=dict(env), stdout=out, stderr=err,
                                text=True)
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=COMMAND_TIMEOUT)


def wait_for(what: str, ready: Callable[[], bool], proc: subprocess.Popen[str],
             logs: Path) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT
    while not ready():
        assert proc.poll() is None, f"exited {proc.returncode} before {what}\n{tails(logs)}"
        assert time.monotonic() < deadline, f"no {what} within {RUN_TIMEOUT} s\n{tails(logs)}"
        time.sleep(0.2)


def stop(proc: subprocess.Popen[str], signum: int, logs: Path) -> None:
    proc.send_signal(signum)
    assert proc.wait(timeout=COMMAND_TIMEOUT) == 0, tails(logs)


def tails(logs: Path) -> str:
    return "\n".join(f"--- {name} ---\n" + "\n".join(
        (logs / name).read_text("utf-8", "replace").splitlines()[-30:])
        for name in ("stdout", "stderr"))


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(200 <= response.status < 300)  # /healthz: 204
    except (urllib.error.URLError, OSError):
        return False


def fetch(url: str) -> tuple[int, object]:
    """The status and JSON body of a GET, whatever the status."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


@pytest.mark.slow
def test_the_wheel_installs_and_runs_outside_the_checkout(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True,
                   timeout=COMMAND_TIMEOUT)
    installed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install",
                                "--quiet", str(wheel)], env=clean_env(), capture_output=True,
                               text=True, timeout=INSTALL_TIMEOUT)
    assert installed.returncode == 0, installed.stderr[-3000:]
    script = str(venv / "bin" / "gensokyo-idmap")

    def run(*args: str, cwd: Path = tmp_path) -> str:
        done = subprocess.run([script, *args], cwd=cwd, env=clean_env(), capture_output=True,
                              text=True, timeout=COMMAND_TIMEOUT)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    # the package runs from the venv, not from the checkout
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import gensokyo_idmap; print(gensokyo_idmap.__file__)"],
                           cwd=tmp_path, env=clean_env(), capture_output=True, text=True,
                           check=True, timeout=COMMAND_TIMEOUT).stdout
    assert Path(where.strip()).is_relative_to(venv), where

    assert run("--version") == f"gensokyo-idmap, version {gensokyo_idmap.__version__}\n"

    site = tmp_path / "site"
    site.mkdir()
    said = run("init", cwd=site)
    assert said.startswith("wrote config.yml\nfill in:\n") and "bot.secret" in said, said
    assert (site / "config.yml").read_text("utf-8") == example_text()
    assert run("config", "check", "config.yml", cwd=site).startswith("ok: config.yml")

    # demo: no file given, in an empty directory; its users talk, Ctrl-C ends it cleanly
    empty = tmp_path / "empty"
    empty.mkdir()
    moved, _ = on_free_ports()
    logs = tmp_path / "demo-logs"
    with running([script, "demo", "--seed", "1", "--pace", "0.2"], empty,
                 clean_env(**moved), logs) as demo:
        wait_for("user's message", lambda: any(
            SAID.match(line) for line in (logs / "stdout").read_text("utf-8").splitlines()),
                 demo, logs)
        stop(demo, signal.SIGINT, logs)
    assert (empty / "data-demo" / "openid-map.db").exists()

    # serve: the written config as it is, but for the ports; /healthz answers, and /readyz
    # says what init said to fill in (no secret yet: 503 naming bot.secret)
    moved, api = on_free_ports()
    logs = tmp_path / "serve-logs"
    with running([script, "serve", "--config", "config.yml"], site,
                 clean_env(**moved), logs) as daemon:
        wait_for("/healthz", lambda: answers(f"http://127.0.0.1:{api}/healthz"), daemon, logs)
        status, readiness = fetch(f"http://127.0.0.1:{api}/readyz")
        assert status == 503 and "bot.secret" in json.dumps(readiness), (status, readiness)
        # the console in Chinese: the compiled catalog came with the wheel
        asked = urllib.request.Request(f"http://127.0.0.1:{api}/ui/",
                                       headers={"Accept-Language": "zh-CN"})
        with urllib.request.urlopen(asked, timeout=5) as response:
            page = response.read().decode("utf-8")
        assert '<html lang="zh-CN">' in page and "<h1>概览</h1>" in page, page[:500]
        stop(daemon, signal.SIGTERM, logs)
    assert (site / "data" / "openid-map.db").exists()  # data_dir ./data, from where it ran
