"""The real daemon for a test: a config for loopback, and ``gensokyo-idmap serve`` as a child
process the test starts, stops and kills.

The daemon runs as it ships (its console script, its own process and event loop), so a
test sees what a bot will see in production: real sockets, real files, real signals. Nothing
of the daemon is imported here; :func:`daemon_config` writes the same YAML a user writes.
"""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import sys
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import yaml

from gensokyo_idmap.testing.platform_emulator import APP, SECRET, EmulatedPlatform
from gensokyo_idmap.testing.wait import DEFAULT_TIMEOUT, until_listening

__all__ = ["DaemonProcess", "daemon_command", "daemon_config", "running_daemon",
           "write_config"]

#: OneBot settings for tests: no heartbeat noise among the events, quick reconnects.
TEST_ONEBOT: Mapping[str, Any] = {"heartbeat_interval_seconds": 60,
                                  "reconnect_interval_seconds": 0.1}
#: ``qq.token_url`` of a daemon given no platform: the discard port of loopback, where
#: nothing listens (a refusal at once, never a request to the real platform).
NO_PLATFORM_TOKEN_URL = "http://127.0.0.1:9/app/getAppAccessToken"


def daemon_config(data_dir: Path, *, platform: EmulatedPlatform | None = None,
                  app_id: str = APP, secret: str = SECRET, webhook: str = "",
                  onebot: Mapping[str, Any] | None = None, api: str = "",
                  log_level: str = "info", bots: Sequence[Mapping[str, Any]] = (),
                  **sections: Mapping[str, Any]) -> dict[str, Any]:
    """A daemon config (the dict a config file holds) for a test on loopback.

    ``platform``: take the gateway, token and OpenAPI from this emulated platform (else the
    gateway is off, and the token is asked of :data:`NO_PLATFORM_TOKEN_URL`). ``bots``:
    several bots instead of ``app_id`` / ``secret`` (the config's ``bots``; an entry each,
    :meth:`EmulatedPlatform.bot_entry` for a bot of its own emulated platform). ``webhook``
    / ``api``: their ``host:port`` (empty: off; the API is off by default so no test takes
    its well-known port). ``onebot``: that section, over
    :data:`TEST_ONEBOT`. Any other section (``idmap={"map_size_mb": 1}``) is merged in.
    """
    config: dict[str, Any] = {
        "bot": {"app_id": app_id, "secret": secret},
        "idmap": {"data_dir": str(data_dir)},
        "webhook": {"listen": webhook},
        "onebot": {**TEST_ONEBOT, **(onebot or {})},
        "api": {"listen": api},
        "log": {"level": log_level},
    }
    # without a platform, the token endpoint is a closed port on loopback: the daemon asks
    # for a token at start (a wrong secret shows then), and a test never reaches out
    config["qq"] = (platform.qq_config() if platform is not None
                    else {"token_url": NO_PLATFORM_TOKEN_URL})
    if bots:
        del config["bot"]
        config["bots"] = [dict(entry) for entry in bots]
    for name, section in sections.items():
        config.setdefault(name, {}).update(section)
    return config


def write_config(path: Path, config: Mapping[str, Any]) -> Path:
    """Write ``config`` to ``path`` as YAML; return ``path``."""
    path.write_text(yaml.safe_dump(dict(config)), encoding="utf-8")
    return path


def daemon_command(config: Path, command: Sequence[str] = ("serve",)) -> list[str]:
    """The command line of ``gensokyo-idmap serve --config config`` in this environment: the
    console script beside this interpreter, or the CLI through ``-c`` where none is.
    ``command``: another subcommand and its options (``("demo", "--pace", "0.2")``)."""
    script = Path(sys.executable).with_name("gensokyo-idmap")
    if script.exists():
        return [str(script), *command, "--config", str(config)]
    return [sys.executable, "-c", "from gensokyo_idmap.cli import main; main()",
            *command, "--config", str(config)]


class DaemonProcess:
    """``gensokyo-idmap serve`` on one config file, run as often as the test says: each run
    is a new process with its stderr (the daemon's log) in a file of its own, and its
    stdout in another (:attr:`output`). ``command``: another subcommand and its options
    (``("demo", "--pace", "0.2")``: the demo, whose stdout is what its users and the bot
    said), ``--config`` added. ``cwd``: the directory it runs in (else the test's), where
    relative paths in its options and config are read.

    The process gets this environment without the ``GSK_…`` variables, so its settings are
    the config file's alone (a developer's shell may set them for a daemon of their own).
    ``open_files``: its limit of open files (``RLIMIT_NOFILE``, soft and hard), else this
    process's."""

    def __init__(self, config: Path, logs: Path, command: Sequence[str] = ("serve",),
                 cwd: Path | None = None, *, open_files: int | None = None) -> None:
        self.config = config
        self.logs = logs
        self.command = tuple(command)
        self.cwd = cwd
        self.open_files = open_files
        self.runs = 0
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def log(self) -> Path:
        """The log file of the current (or last) run."""
        return self.logs / f"daemon-{self.runs}.log"

    @property
    def output(self) -> Path:
        """The stdout of the current (or last) run."""
        return self.logs / f"daemon-{self.runs}.out"

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.returncode

    async def start(self) -> asyncio.subprocess.Process:
        """Start the next run (the previous one must have ended)."""
        if self.returncode is None and self.proc is not None:
            raise RuntimeError("the daemon is still running: stop or kill it first")
        self.runs += 1
        env = {name: value for name, value in os.environ.items()
               if not name.startswith("GSK_")}
        limit = self.open_files

        def limited() -> None:  # in the child, before it runs the daemon
            if limit is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

        with self.log.open("wb") as log, self.output.open("wb") as output:
            self.proc = await asyncio.create_subprocess_exec(
                *daemon_command(self.config, self.command), stdout=output, stderr=log,
                env=env, cwd=self.cwd, preexec_fn=None if limit is None else limited)
        return self.proc

    def send_signal(self, signum: int) -> None:
        """Send ``signum`` to the running daemon."""
        if self.proc is None or self.proc.returncode is not None:
            raise RuntimeError(f"no daemon running to send signal {signum} to")
        self.proc.send_signal(signum)

    async def stop(self, signum: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        """Send ``signum`` (a graceful stop by default) and wait for the exit: its code."""
        self.send_signal(signum)
        assert self.proc is not None
        return await asyncio.wait_for(self.proc.wait(), timeout)

    async def kill(self) -> None:
        """SIGKILL the daemon if it runs (a stopped one is continued first, so it dies)."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            await self.proc.wait()

    async def close(self, timeout: float = 20.0) -> int | None:
        """Stop the daemon if it runs (SIGTERM; SIGKILL if it has not exited after
        ``timeout`` seconds): the exit code of the last run (None if there was none)."""
        if self.proc is not None and self.proc.returncode is None:
            try:
                await self.stop(signal.SIGTERM, timeout)
            except TimeoutError:
                await self.kill()
        return self.returncode

    def alive(self) -> None:
        """Raise AssertionError, with the log's tail, if the current run has exited."""
        if self.returncode is not None:
            raise AssertionError(f"the daemon exited with {self.returncode}\n{self.tail()}")

    async def until_listening(self, port: int, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Until the daemon accepts connections on 127.0.0.1:``port``; fails at once if it
        exits meanwhile."""
        await until_listening(port, timeout, alive=self.alive)

    def tail(self, lines: int = 30) -> str:
        """The last ``lines`` of the current run's log, for a failure message."""
        return log_tail(self.log, lines)


def log_tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` of a log file (``<no log>`` if it cannot be read)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "<no log>"


@asynccontextmanager
async def running_daemon(config: Mapping[str, Any], workdir: Path, *,
                         listening: Iterable[int] = (),
                         timeout: float = DEFAULT_TIMEOUT) -> AsyncIterator[DaemonProcess]:
    """``gensokyo-idmap serve`` on ``config`` (written to ``workdir/config.yml``), running
    once the ports in ``listening`` accept connections; stopped with SIGTERM on the way out
    (killed if it does not exit within ``timeout``). Its log is ``workdir/daemon-1.log``."""
    daemon = DaemonProcess(write_config(workdir / "config.yml", config), workdir)
    await daemon.start()
    try:
        for port in listening:
            await daemon.until_listening(port, timeout)
        yield daemon
    finally:
        await daemon.close(timeout)
