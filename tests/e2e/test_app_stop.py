"""Stopping: the process ends once it logged ``[app] stopped``, and no listener holds the stop.

A real ``gensokyo-idmap serve`` (through tests/e2e/slow_dns_child.py, whose name server never
answers for one host) dials a reverse-WS framework by that name, so a name lookup is running
on a worker thread when SIGTERM comes. The daemon stops, logs ``[app] stopped``, and must then
exit on its own: the lookup (60 s) must not keep the process alive. The waits are bounded;
the bound after ``stopped`` (10 s) is far below the lookup's 60 s and far above the
fraction of a second an exit takes, so the outcome does not depend on the machine's speed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
CHILD = HERE / "slow_dns_child.py"
WAIT = 30.0  # for the child to start, and to stop after the signal
EXIT_AFTER_STOPPED = 10.0


def _wait_for(what: str, done: object, log: Path, child: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + WAIT
    while not done():  # type: ignore[operator]
        if child.poll() is not None:
            raise AssertionError(f"the daemon exited ({child.returncode}) before {what}:\n"
                                 f"{log.read_text(errors='replace')[-2000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {WAIT:g}s:\n"
                                 f"{log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.05)


def test_nothing_holds_the_process_after_it_logged_stopped(tmp_path: Path) -> None:
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({
        "bot": {"app_id": "102000001"},
        "idmap": {"data_dir": str(tmp_path / "data")},
        "webhook": {"listen": ""},
        "api": {"listen": ""},
        "onebot": {"reverse_ws": ["ws://slow-dns.invalid:8080/ws"], "forward_ws": "",
                   "reconnect_interval_seconds": 0.1},
        "log": {"level": "info"},
    }))
    log = tmp_path / "daemon.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GSK_")}
    with log.open("wb") as out:
        child = subprocess.Popen([sys.executable, str(CHILD), "serve", "--config", str(config)],
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env)
    try:
        text = lambda: log.read_text(errors="replace")  # noqa: E731
        _wait_for("name lookup", lambda: "slow-dns: resolving" in text(), log, child)
        _wait_for("[app] ready", lambda: "[app] ready" in text(), log, child)
        child.send_signal(signal.SIGTERM)
        _wait_for("[app] stopped", lambda: "[app] stopped" in text(), log, child)
        try:
            code = child.wait(EXIT_AFTER_STOPPED)
        except subprocess.TimeoutExpired:
            raise AssertionError("the process is still there after logging [app] stopped: "
                                 "something left running holds it") from None
        assert code == 0, text()[-2000:]
        assert "[app] stopped" in text().strip().splitlines()[-1], text()[-2000:]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_request_that_never_ends_holds_a_listener_for_seconds_not_a_minute() -> None:
    """A listener's clean-up (the stop sequence) waits a bounded time for requests in flight.

    A handler that never returns stands for what was seen under load: a forward-WS framework
    reconnecting while the server stopped left a connection the clean-up waited a full
    minute (aiohttp's default) for. The bound below (30 s) is far above SHUTDOWN_SECONDS and
    far below that minute.
    """
    from aiohttp import ClientSession, ClientTimeout, web

    from gensokyo_idmap.app import SHUTDOWN_SECONDS, _listen
    from gensokyo_idmap.http_guard import ConnectionPlan, Deadlines

    from gensokyo_idmap.testing.loopback import free_port

    async def stuck(request: web.Request) -> web.Response:
        entered.set()
        await asyncio.Event().wait()  # never
        raise AssertionError("unreachable")

    async def scenario() -> None:
        port = free_port()
        plan = ConnectionPlan.for_listeners(Deadlines(10, 60), ["test"], most=10, first=None)
        runner = await _listen([web.get("/", stuck)], f"127.0.0.1:{port}", "test", plan)
        async with ClientSession(timeout=ClientTimeout(total=60)) as session:
            request = asyncio.create_task(session.get(f"http://127.0.0.1:{port}/"))
            await asyncio.wait_for(entered.wait(), WAIT)
            await asyncio.wait_for(runner.cleanup(), 30)
            await asyncio.gather(request, return_exceptions=True)  # cut short: no answer

    entered = asyncio.Event()
    assert SHUTDOWN_SECONDS < 30
    asyncio.run(scenario())
