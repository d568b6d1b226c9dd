"""The real OneBot frameworks the e2e tests drive, and one run of each against the daemon.

NoneBot2 (``tests/e2e/nonebot_app/bot.py``, its OneBot v11 adapter listening for the
daemon's reverse WebSocket) runs as a child of this interpreter; Koishi
(``tests/e2e/koishi_app``, ``koishi-plugin-adapter-onebot`` dialling the daemon's forward
WebSocket) runs under node, from the npm packages :func:`install_koishi` puts in
``build/koishi-e2e/``. Each records what it got as JSON lines (:class:`Records`), and its
output is kept in ``<tmp>/nonebot.log`` / ``<tmp>/koishi.log``.

:class:`NoneBotRun` and :class:`KoishiRun` are the harness of a test: the emulated
platform, ``gensokyo-idmap serve`` between it and the framework, the framework itself, a
wait until the daemon's gateway session is up and the framework is connected, and, after
the test's steps, everything stopped (the daemon gracefully, its exit code checked) and
the platform's sends kept. The pieces under them (:func:`start_nonebot`,
:func:`start_koishi` …) are for a test that runs something else around the framework (two
bots, the demo). Every wait is bounded by :data:`WAIT`; a framework that exits early fails
the wait at once, with its output.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest

from gensokyo_idmap.identity import OpenId, RawId
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.testing import (
    APP,
    DaemonProcess,
    EmulatedPlatform,
    daemon_config,
    free_port,
    until,
    until_listening,
    write_config,
)

from .jsonl_records import Records, run_context

WAIT = 20.0  # every single wait is bounded by this
#: The group and its member the tests' messages come from (OpenIDs of :data:`APP`).
GROUP = "A1B2C3D4E5F60718293A4B5C6D7E8F90"
USER = "0F1E2D3C4B5A69788796A5B4C3D2E1F0"

HERE = Path(__file__).resolve().parent
NONEBOT_APP = HERE / "nonebot_app" / "bot.py"
KOISHI_APP = HERE / "koishi_app"
INSTALL_DIR = HERE.parents[1] / "build" / "koishi-e2e"
LOCK_FILES = ("package.json", "package-lock.json")


# --- the framework processes ---------------------------------------------------------------


async def spawn(argv: Sequence[str], cwd: Path, env: dict[str, str],
                lines: list[str]) -> tuple[asyncio.subprocess.Process, asyncio.Task[None]]:
    """``argv`` as a process in ``cwd`` with ``env``; the task returned appends its output
    (stdout and stderr) to ``lines``."""
    process = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    assert process.stdout is not None

    async def pump(stream: asyncio.StreamReader) -> None:
        async for raw in stream:
            lines.append(raw.decode("utf-8", "replace").rstrip())

    return process, asyncio.create_task(pump(process.stdout))


async def stop_process(process: asyncio.subprocess.Process | None,
                       pumping: asyncio.Task[None] | None, lines: list[str],
                       log: Path) -> None:
    """Kill ``process`` if it still runs, wait for the rest of its output, and keep that
    in ``log``."""
    if process is not None and process.returncode is None:
        process.kill()
        await asyncio.wait_for(process.wait(), WAIT)
    if pumping is not None:
        await asyncio.wait_for(pumping, WAIT)
    log.write_text("\n".join(lines) + "\n", "utf-8")


def nonebot_missing() -> str | None:
    """Why NoneBot cannot run here (tried in a child: NoneBot stays out of this process)."""
    probe = subprocess.run(
        [sys.executable, "-c", "import nonebot, nonebot.adapters.onebot.v11, fastapi, uvicorn"],
        capture_output=True, text=True, timeout=60)
    if probe.returncode == 0:
        return None
    return (probe.stderr.strip().splitlines() or ["import failed"])[-1]


async def start_nonebot(port: int, token: str, records: Records, cwd: Path,
                        lines: list[str]) -> tuple[asyncio.subprocess.Process, asyncio.Task[None]]:
    """NoneBot's app as a process on 127.0.0.1:``port`` (reverse WS at /onebot/v11/ws,
    ``token`` required), recording into ``records``, started in ``cwd`` (an empty dir: it
    reads .env files there); the task returned appends its output to ``lines``."""
    env = {**os.environ, "HOST": "127.0.0.1", "PORT": str(port),
           "ONEBOT_ACCESS_TOKEN": token, "NB_RECORD_FILE": str(records.path),
           "API_TIMEOUT": "5", "LOG_LEVEL": "INFO", "PYTHONUNBUFFERED": "1"}
    return await spawn([sys.executable, str(NONEBOT_APP)], cwd, env, lines)


def node_missing() -> str | None:
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    return None if not missing else f"{' and '.join(missing)} not found on PATH"


def install_koishi() -> Path:
    """``npm ci`` of koishi_app into build/koishi-e2e, unless the same lock is installed
    there already; the directory holding ``node_modules``."""
    stamp = hashlib.sha256(b"".join((KOISHI_APP / name).read_bytes()
                                    for name in LOCK_FILES)).hexdigest()
    marker = INSTALL_DIR / ".installed"
    if marker.exists() and marker.read_text() == stamp and (INSTALL_DIR / "node_modules").is_dir():
        return INSTALL_DIR
    INSTALL_DIR.mkdir(parents=True, exist_ok=True)
    marker.unlink(missing_ok=True)
    for name in LOCK_FILES:
        shutil.copyfile(KOISHI_APP / name, INSTALL_DIR / name)
    done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                          cwd=INSTALL_DIR, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise AssertionError(f"npm ci failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    marker.write_text(stamp)
    return INSTALL_DIR


async def start_koishi(installed: Path, port: int, token: str, records: Records,
                       lines: list[str], *, script: str = "bot.cjs",
                       env: dict[str, str] | None = None
                       ) -> tuple[asyncio.subprocess.Process, asyncio.Task[None]]:
    """The Koishi bot (``koishi_app/<script>``, run from ``installed``) dialling the daemon's
    forward WS on 127.0.0.1:``port`` with ``token``, recording into ``records``, ``env``
    over its environment; the task returned appends its output to ``lines``."""
    env = {**os.environ, "KOISHI_RECORD_FILE": str(records.path),
           "KOISHI_ENDPOINT": f"ws://127.0.0.1:{port}", "KOISHI_SELF_ID": APP,
           "KOISHI_TOKEN": token, "NODE_PATH": str(installed / "node_modules"), **(env or {})}
    return await spawn(["node", str(KOISHI_APP / script)], installed, env, lines)


async def stop_koishi(koishi: asyncio.subprocess.Process | None,
                      pumping: asyncio.Task[None] | None, lines: list[str],
                      log_dir: Path) -> None:
    """Kill Koishi if it still runs, wait for the rest of its output, and keep that in
    ``log_dir/koishi.log``."""
    await stop_process(koishi, pumping, lines, log_dir / "koishi.log")


def log_entries(log: Path, component: str, event: str) -> list[dict[str, Any]]:
    """The daemon's JSON log lines (``log.format: json``) of ``[component] event``."""
    found = []
    for line in log.read_text("utf-8", "replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and (entry.get("component"), entry.get("event")) == (
                component, event):
            found.append(entry)
    return found


# --- a run: platform, daemon, framework ----------------------------------------------------


class FrameworkRun(ABC):
    """One run of a framework against ``gensokyo-idmap serve`` fed by an emulated platform,
    everything in ``tmp_path`` (the daemon's data in ``data_dir``, its config and logs, the
    framework's records and log). :meth:`run` (or :meth:`running`, inside a test's own
    event loop) starts them and waits until the daemon's gateway session is up and the
    framework is connected; after the test's steps it stops the daemon (SIGTERM, exit code
    0) and the framework, and keeps what the platform was sent (:attr:`sends`).

    ``platform`` exists from the start, so a test can shape it (``bot_user``) before the
    run, and read it after. ``daemon`` is the daemon's process: a step may stop and start
    it again (:meth:`stop_daemon`); it must have exited with 0 when the steps end."""

    framework: ClassVar[str]  # its name in failure messages and in its log's name

    def __init__(self, tmp_path: Path, token: str) -> None:
        self.tmp_path, self.token = tmp_path, token
        self.data_dir = tmp_path / "data"
        self.records = Records(tmp_path / f"{self.framework.lower()}-records.jsonl")
        self.port = free_port()
        self.lines: list[str] = []
        self.platform = EmulatedPlatform()
        self.daemon = DaemonProcess(tmp_path / "config.yml", tmp_path)
        self.sends: list[tuple[str, Any]] = []
        self.process: asyncio.subprocess.Process | None = None
        self._pumping: asyncio.Task[None] | None = None

    def context(self) -> str:
        """What a failure shows: the tails of the framework's output, the daemon's logs and
        the records."""
        return run_context(self.framework, self.lines, self.tmp_path, self.records)

    def alive(self) -> None:
        """Raise AssertionError, with :meth:`context`, if the framework has exited."""
        if self.process is not None and self.process.returncode is not None:
            raise AssertionError(
                f"{self.framework} exited ({self.process.returncode})\n{self.context()}")

    async def after(self, what: str, *kinds: str, count: int = 1) -> None:
        """Wait until the framework recorded ``count`` entries of ``kinds`` together (or an
        error: Koishi's bot records one as ``error``, which the run then shows)."""
        await until(lambda: sum(len(self.records.of(kind)) for kind in kinds) >= count
                    or bool(self.records.of("error")),
                    WAIT, lambda: f"{what}\n{self.context()}", alive=self.alive)

    @abstractmethod
    def daemon_config(self, **config: Any) -> dict[str, Any]:
        """The daemon's config: this run's data dir and platform, its OneBot side for the
        framework, ``config`` (``api=``, more sections) merged in."""

    async def stop_daemon(self) -> None:
        """Stop the daemon gracefully (SIGTERM); it must exit with 0 within :data:`WAIT`."""
        try:
            code = await self.daemon.stop(signal.SIGTERM, WAIT)
        except TimeoutError:
            raise AssertionError(
                f"daemon ignored SIGTERM for {WAIT} s\n{self.context()}") from None
        assert code == 0, f"daemon exit code {code}\n{self.context()}"

    async def until_gateway(self) -> None:
        """Until the daemon's gateway session is established (an Identify, then READY: a
        dispatch pushed before that is only replayed on a Resume)."""
        platform = self.platform
        await until(lambda: bool(platform.identifies), WAIT,
                    lambda: f"gateway Identify\n{self.context()}", alive=self.daemon.alive)
        await until(lambda: all(shard.live() is not None for shard in platform.shards), WAIT,
                    lambda: f"the daemon's gateway session\n{self.context()}",
                    alive=self.daemon.alive)

    async def terminate(self) -> None:
        """Stop the framework gracefully (SIGTERM) and wait for the rest of its output."""
        assert self.process is not None and self._pumping is not None
        if self.process.returncode is None:
            self.process.terminate()
        await asyncio.wait_for(self.process.wait(), WAIT)
        await asyncio.wait_for(self._pumping, WAIT)

    @abstractmethod
    async def _start(self, token: str) -> None:
        """Start the framework, as a client of the daemon with ``token``."""

    @abstractmethod
    async def _up(self, connect: bool) -> None:
        """Start the daemon and the framework, in the order the framework needs; with
        ``connect``, until the framework has the connection."""

    async def _down(self) -> None:
        """Stop the daemon gracefully (its exit code checked), the framework too if it
        must go first."""
        if self.daemon.returncode is None:
            await self.stop_daemon()
        code = self.daemon.returncode  # a step may have stopped it: it too must say 0
        assert code == 0, f"daemon exit code {code}\n{self.context()}"

    @abstractmethod
    def _check(self) -> None:
        """What every run of this framework must have shown, once all is stopped."""

    @asynccontextmanager
    async def running(self, *, connect: bool = True, **config: Any
                      ) -> AsyncIterator[EmulatedPlatform]:
        """The platform, with the daemon (``config`` as for :meth:`daemon_config`) and the
        framework running and connected (unless not ``connect``); all stopped on the way
        out, the daemon's exit code and the framework's own checks on a clean way out."""
        await self.platform.start()
        try:
            write_config(self.daemon.config, self.daemon_config(**config))
            await self._up(connect)
            yield self.platform
            await self._down()
            self.sends.extend(self.platform.api_requests("POST", "/messages"))
        finally:
            await self.daemon.kill()
            await stop_process(self.process, self._pumping, self.lines,
                               self.tmp_path / f"{self.framework.lower()}.log")
            await self.platform.close()
        self._check()

    def run(self, steps: Callable[[EmulatedPlatform], Awaitable[None]], *,
            connect: bool = True, timeout: float = 120, **config: Any) -> None:
        """``steps`` in :meth:`running`, in an event loop of their own, all bounded by
        ``timeout`` seconds."""
        async def main() -> None:
            async with self.running(connect=connect, **config) as platform:
                await steps(platform)

        asyncio.run(asyncio.wait_for(main(), timeout))

    def vuins(self, *ids: OpenId | RawId) -> list[int | None]:
        """The vUINs of ``ids`` in the daemon's store (read after the run)."""
        store = LmdbIdentityStore(self.data_dir / "openid-map.db", readonly=True)
        try:
            with store.read() as view:
                return [view.vuin_of(identity.key) for identity in ids]
        finally:
            store.close()

    def logged(self, component: str, event: str) -> list[dict[str, Any]]:
        """The daemon's JSON log lines of ``[component] event`` in its last run (a run
        given ``log={"format": "json"}``)."""
        return log_entries(self.daemon.log, component, event)


class NoneBotRun(FrameworkRun):
    """A run of the NoneBot app (``nonebot_app/bot.py``), the daemon dialling it by reverse
    WS with ``token``; NoneBot requires ``nonebot_token`` (default: the daemon's). Skips the
    test, saying so, when NoneBot cannot be imported."""

    framework = "NoneBot"

    def __init__(self, tmp_path: Path, token: str, *, nonebot_token: str | None = None) -> None:
        missing = nonebot_missing()
        if missing is not None:
            pytest.skip(f"NoneBot2 / nonebot-adapter-onebot not importable (pip install -e "
                        f"'.[test]'): {missing}")
        super().__init__(tmp_path, token)
        self.nonebot_token = token if nonebot_token is None else nonebot_token
        self.url = f"ws://127.0.0.1:{self.port}/onebot/v11/ws"

    def connections(self, app: str = APP) -> int:
        """How often NoneBot said bot ``app`` connected (a reconnection counts again)."""
        return sum(1 for line in self.lines if re.search(rf"Bot {app}\b.* connected", line))

    def daemon_config(self, **config: Any) -> dict[str, Any]:
        return daemon_config(self.data_dir, platform=self.platform, onebot={
            "reverse_ws": [self.url], "access_token": self.token,
            "reconnect_interval_seconds": 0.2}, **config)

    async def _start(self, token: str) -> None:
        self.process, self._pumping = await start_nonebot(
            self.port, token, self.records, self.tmp_path, self.lines)

    async def restart(self, token: str) -> None:
        """NoneBot stopped (SIGTERM) and started again, now requiring ``token``."""
        await self.terminate()
        await self._start(token)

    async def _up(self, connect: bool) -> None:
        await self._start(self.nonebot_token)
        await until_listening(self.port, WAIT, alive=self.alive)
        await self.daemon.start()
        await self.until_gateway()
        if connect:
            await until(lambda: self.connections() >= 1, WAIT,
                        lambda: f"NoneBot connection\n{self.context()}", alive=self.alive)

    def _check(self) -> None:
        """Nothing: what NoneBot got, each test checks."""


class KoishiRun(FrameworkRun):
    """A run of the Koishi bot (``koishi_app/bot.cjs``) dialling the daemon's forward WS
    with ``token``. Its checks: Koishi's bot recorded no error, and its log holds no
    warning (``[W]``) or error (``[E]``). Skips the test, saying so, when node or npm is
    absent; installs the npm packages (once per lock file) otherwise."""

    framework = "Koishi"

    def __init__(self, tmp_path: Path, token: str) -> None:
        missing = node_missing()
        if missing is not None:
            pytest.skip(f"the Koishi e2e test needs Node.js and npm ({missing}; "
                        "apt-get install nodejs npm)")
        self.installed = install_koishi()
        super().__init__(tmp_path, token)

    def daemon_config(self, **config: Any) -> dict[str, Any]:
        return daemon_config(self.data_dir, platform=self.platform, onebot={
            "forward_ws": f"127.0.0.1:{self.port}", "access_token": self.token}, **config)

    async def _start(self, token: str) -> None:
        self.process, self._pumping = await start_koishi(
            self.installed, self.port, token, self.records, self.lines)

    async def _up(self, connect: bool) -> None:
        await self.daemon.start()
        await self.until_gateway()
        await self.daemon.until_listening(self.port, WAIT)
        await self._start(self.token)
        if connect:
            await self.after("Koishi connected", "ready")

    async def _down(self) -> None:
        await self.terminate()  # first: the daemon going away is a warning in Koishi's log
        await super()._down()

    def _check(self) -> None:
        assert self.records.of("error") == [], self.context()
        warnings = [line for line in self.lines if "[W]" in line or "[E]" in line]
        assert warnings == [], self.context()
