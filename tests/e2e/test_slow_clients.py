"""Slow and idle clients against the real daemon (``gensokyo-idmap serve`` as a process, every
HTTP listener on: the webhook, the identity API, the OneBot HTTP API, the forward WS).

- Slowloris (half a request head, then a byte now and then) and slow bodies (a whole head,
  then a body that trickles) on every listener are closed after ``http.header_timeout_seconds``
  and ``http.body_timeout_seconds``, with a counted log line and no traceback; fresh requests
  are answered meanwhile.
- Under a limit of 1,024 open files, 1,100 slowloris connections spread over the listeners
  leave signed webhook callbacks (the emulated platform's) and ``/healthz`` answered, and the
  log small: the caps keep the listeners below the limit (no ``EMFILE``), the webhook's cap
  is the largest, and a listener at its cap makes room for a fresh request.

Bounds are for failures only (a connection still open after far more than its deadline).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import ClientSession, ClientTimeout

from gensokyo_idmap.testing import (
    DaemonProcess,
    WebhookSender,
    daemon_config,
    free_port,
    group_message,
    until,
    write_config,
)

from ..conftest import run

APP = "102000001"
SECRET = "slow-clients-secret-Qe4"
LISTENERS = ("webhook", "api", "onebot_http", "forward_ws")
#: A POST route of each listener that reads its body (the forward WS has none).
POST_PATHS = {"webhook": "/qqbot", "api": "/v1/resolve", "onebot_http": "/send_msg"}
HALF_HEAD = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


def daemon(tmp_path: Path, http: dict[str, Any], **options: Any) -> tuple[DaemonProcess,
                                                                          dict[str, int]]:
    ports = {name: free_port() for name in LISTENERS}
    config = daemon_config(
        tmp_path / "data", app_id=APP, secret=SECRET, webhook=f"127.0.0.1:{ports['webhook']}",
        api=f"127.0.0.1:{ports['api']}",
        onebot={"http_api": f"127.0.0.1:{ports['onebot_http']}",
                "forward_ws": f"127.0.0.1:{ports['forward_ws']}"},
        http=http)
    return DaemonProcess(write_config(tmp_path / "config.yml", config), tmp_path,
                         **options), ports


@dataclass
class SlowClient:
    """One connection that sends ``first`` and then one byte every ``drip`` seconds, until
    the daemon closes it (``closed``) or it is told to stop; ``answer``: what came back."""

    port: int
    first: bytes
    drip: float
    closed: bool = False
    answer: bytes = b""
    opened: bool = False

    async def run(self, stop: asyncio.Event) -> None:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        except OSError:
            return
        self.opened = True
        try:
            writer.write(self.first)
            while not stop.is_set():
                try:
                    data = await asyncio.wait_for(reader.read(4096), self.drip)
                except TimeoutError:
                    writer.write(b"a")  # the drip: never the end of the head or body
                    continue
                if not data:
                    break
                self.answer += data
            else:
                return
        except OSError:  # reset by the daemon
            pass
        finally:
            writer.close()
        self.closed = True


@asynccontextmanager
async def serving(process: DaemonProcess, ports: dict[str, int], clients: Sequence[SlowClient]
                  ) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """The daemon started and listening, with ``clients`` running at it; yields a check that
    a signed callback is acknowledged and /healthz answers (each on a fresh connection).
    The clients and the daemon are stopped on the way out."""
    stop = asyncio.Event()
    await process.start()
    tasks: list[asyncio.Task[None]] = []
    try:
        for port in ports.values():
            await process.until_listening(port, 20)
        tasks += [asyncio.create_task(client.run(stop)) for client in clients]
        async with ClientSession(timeout=ClientTimeout(total=10)) as session:
            sender = WebhookSender(f"http://127.0.0.1:{ports['webhook']}/qqbot", APP, SECRET,
                                   session=session, timeout=10)

            async def answered() -> None:
                delivery = await sender.dispatch("GROUP_AT_MESSAGE_CREATE",
                                                 group_message(sender.seq + 1))
                assert delivery.status == 200, delivery
                async with session.get(f"http://127.0.0.1:{ports['api']}/healthz") as resp:
                    assert resp.status == 204, resp.status

            yield answered
        process.alive()
    finally:
        stop.set()
        await asyncio.gather(*tasks)
        await process.close()


def test_slowloris_and_slow_bodies_are_closed_after_their_timeouts(tmp_path: Path) -> None:
    process, ports = daemon(tmp_path, {"header_timeout_seconds": 1, "body_timeout_seconds": 2})
    heads = [SlowClient(ports[name], HALF_HEAD, 0.2) for name in LISTENERS for _ in range(10)]
    bodies = [SlowClient(ports[name], (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: 4096\r\n\r\n{{").encode(), 0.2)
        for name, path in POST_PATHS.items() for _ in range(10)]

    async def main() -> None:
        async with serving(process, ports, heads + bodies) as answered:
            await answered()  # while they drip
            await until(lambda: all(c.closed for c in heads + bodies), 30, lambda: (
                f"the daemon to close every slow client; open: "
                f"{sum(not c.closed for c in heads)} heads, "
                f"{sum(not c.closed for c in bodies)} bodies\n{process.tail()}"),
                alive=process.alive)
            await answered()  # and after

    run(main())
    assert all(c.opened for c in heads + bodies)
    assert not any(c.answer for c in heads + bodies)  # cut, not answered
    log = process.log.read_text(errors="replace")
    closed = [line for line in log.splitlines() if "[http] connections closed" in line]
    assert any("no_head_in_time" in line for line in closed), log
    assert any("no_body_in_time" in line for line in closed), log
    assert "Traceback" not in log, log


def test_a_daemon_at_its_open_files_limit_keeps_answering_a_flood(tmp_path: Path) -> None:
    """1,100 slowloris connections, 275 on each listener, against a daemon limited to 1,024
    open files. Before the caps, the listeners took every descriptor: accepts failed with
    EMFILE (a traceback each, a million in minutes), callbacks and /healthz went unanswered.
    The header timeout here is long, so the flood stands throughout: only the caps help."""
    process, ports = daemon(tmp_path, {"header_timeout_seconds": 300,
                                       "body_timeout_seconds": 300}, open_files=1024)
    flood = [SlowClient(ports[LISTENERS[n % 4]], HALF_HEAD, 1.0) for n in range(1100)]

    async def main() -> None:
        async with serving(process, ports, flood) as answered:
            await until(lambda: all(c.opened for c in flood), 30, "the flood's connections",
                        alive=process.alive)
            for _ in range(20):
                await answered()
                await asyncio.sleep(0.1)
            held = [c for c in flood if not c.closed]
        # the webhook held its whole share of the flood (its cap is the largest); the
        # others made room for the fresh requests
        assert len([c for c in held if c.port == ports["webhook"]]) == 275
        assert len(held) < len(flood)

    run(main())
    log = process.log.read_text(errors="replace")
    lines = log.splitlines()
    assert "Traceback" not in log and "Too many open files" not in log, log[-3000:]
    assert len([line for line in lines if "out of file descriptors" in line]) <= 2, log
    assert len(lines) < 200 and len(log) < 64_000, (len(lines), len(log))
    limits = next(line for line in lines if "[http] connection limits" in line)
    assert "open_files_limit=1024" in limits, limits
