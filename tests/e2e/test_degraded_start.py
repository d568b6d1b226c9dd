"""``gensokyo-idmap serve`` started while a server backend is down, as a process: Redis (the
runtime state, a private redis-server not started yet) or PostgreSQL (the graph, behind a
loopback proxy that is cut), each named by a URL holding a password.

The daemon starts degraded, not dead: it stays up and logs the outage once, ``/healthz``
answers 503 naming the server (without the password), a signed webhook callback is refused
(503: not acknowledged, so the platform sends it again); once the server answers the daemon
goes on by itself, and the callback sent again reaches the framework. A graph whose schema
is refused (a migration applied from other SQL) is an exit naming the DSN without its
password, whether the server answered at start or only later."""

from __future__ import annotations

import asyncio
import getpass
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from aiohttp import ClientSession

from gensokyo_idmap.testing import (
    APP,
    DaemonProcess,
    WebhookSender,
    daemon_config,
    framework_server,
    free_port,
    running_daemon,
    until,
    write_config,
    ws_url,
)

from ..pg_proxy import PgProxy
from ..redis_server import PrivateRedis
from ..store_backends import PG_DSN, fresh_schema
from .test_inbound import SECRET, QueueFramework, group_message

PASSWORD = "Pa55-w0rd-s3cret"
RECOVERY_SECONDS = 30.0  # the daemon asks again 1 s after a failure, up to every 5 s
RETRY_PAUSE = 0.1  # between two posts of the refused callback, as the platform retries
TEST_SECONDS = 120.0


@dataclass(frozen=True)
class Backend:
    """A server backend down at the daemon's start, and how to bring it up."""

    idmap: dict[str, Any]
    up: Callable[[], None]
    named: str  # how /healthz names it
    down_event: str  # the outage's log line
    up_event: str  # its end's


def with_password(dsn: str) -> str:
    """``dsn`` with a user and :data:`PASSWORD` (the test server trusts loopback: ignored)."""
    parts = urlsplit(dsn)
    user = parts.username or getpass.getuser()
    return urlunsplit(parts._replace(netloc=f"{user}:{PASSWORD}@{parts.hostname}:{parts.port}"))


@pytest.fixture(params=["redis", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "postgres":
        with fresh_schema(create=True) as schema, PgProxy(PG_DSN) as proxy:
            proxy.cut()
            yield Backend({"backend": "postgres", "postgres_dsn": with_password(proxy.dsn(schema))},
                          proxy.restore, f"postgresql at postgresql://***@127.0.0.1:{proxy.port}/",
                          "[idmap] postgresql unreachable", "[idmap] postgresql reachable again")
        return
    server = PrivateRedis(tmp_path, password=PASSWORD)
    try:
        yield Backend({"runtime_backend": "redis", "redis_url": server.url,
                       "redis_prefix": "gsk-degraded:"}, server.start,
                      f"redis at redis://***@127.0.0.1:{server.port}/0",
                      "[redis] unreachable, running degraded", "[redis] reachable again")
    finally:
        server.stop()


def log_events(log: Path) -> list[str]:
    """The event names of a daemon's JSON log (``log.format: json``), as the code logs them
    (``[component] event``)."""
    entries = [json.loads(line) for line in log.read_text("utf-8").splitlines()
               if line.startswith("{")]
    return [f"[{e['component']}] {e['event']}" if "component" in e else e["event"]
            for e in entries]


async def healthz(session: ClientSession, port: int) -> tuple[int, str]:
    async with session.get(f"http://127.0.0.1:{port}/healthz") as resp:
        return resp.status, await resp.text()


def test_a_daemon_started_while_its_server_is_down_runs_degraded_and_resumes(
        tmp_path: Path, backend: Backend) -> None:
    webhook, api = free_port(), free_port()
    framework = QueueFramework()

    async def main() -> Path:
        server = await framework_server(framework.handle)
        config = daemon_config(tmp_path / "data", secret=SECRET, webhook=f"127.0.0.1:{webhook}",
                               api=f"127.0.0.1:{api}", onebot={"reverse_ws": [ws_url(server)]},
                               idmap=backend.idmap, log={"format": "json"})
        try:
            async with running_daemon(config, tmp_path, listening=[webhook, api]) as daemon, \
                    ClientSession() as session:
                sender = WebhookSender(f"http://127.0.0.1:{webhook}/qqbot", APP, SECRET,
                                       session=session)

                async def post(body: bytes) -> int:
                    return (await sender.post_raw(body, sender.headers(body))).status

                await until(lambda: framework.connections, 20, "the framework connected",
                            alive=daemon.alive)
                status, body = await healthz(session, api)
                assert status == 503 and backend.named in body, body
                assert PASSWORD not in body
                for _ in range(3):  # refused each time, the outage logged once all the same
                    assert await post(group_message(1)) == 503
                assert framework.received.empty()
                daemon.alive()

                backend.up()
                for _ in range(int(RECOVERY_SECONDS / RETRY_PAUSE)):
                    status = await post(group_message(1))
                    if status == 200:
                        break
                    assert status == 503
                    daemon.alive()
                    await asyncio.sleep(RETRY_PAUSE)
                assert status == 200, daemon.tail()
                event = await asyncio.wait_for(framework.received.get(), 10)
                assert event["message"][1]["data"]["text"] == " hello 1"
                assert await healthz(session, api) == (204, "")
                daemon.alive()
                return daemon.log
        finally:
            await server.close()

    log = asyncio.run(asyncio.wait_for(main(), TEST_SECONDS))
    events = log_events(log)
    assert events.count(backend.down_event) == 1, events
    assert events.count(backend.up_event) == 1, events
    # said as the daemon started, not found out by the first event
    assert events.index(backend.down_event) < events.index("[app] ready")
    assert PASSWORD not in log.read_text("utf-8")


@pytest.mark.parametrize("answers", ["at_start", "later"])
def test_a_graph_whose_schema_is_refused_is_an_exit_naming_the_dsn(tmp_path: Path,
                                                                   answers: str) -> None:
    api = free_port()

    async def main(proxy: PgProxy, dsn: str) -> tuple[int, str]:
        config = daemon_config(tmp_path / "data", api=f"127.0.0.1:{api}",
                               idmap={"backend": "postgres", "postgres_dsn": dsn})
        daemon = DaemonProcess(write_config(tmp_path / "config.yml", config), tmp_path)
        if answers == "later":
            proxy.cut()
        process = await daemon.start()
        try:
            if answers == "later":  # up and serving, degraded, until the server answers
                await daemon.until_listening(api, 20)
                proxy.restore()
            code = await asyncio.wait_for(process.wait(), 60)
            return code, daemon.log.read_text("utf-8")
        finally:
            await daemon.close()

    with fresh_schema(create=True) as schema, PgProxy(PG_DSN) as proxy:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f"SET search_path TO {schema}")
            conn.execute("CREATE TABLE schema_migrations (version integer PRIMARY KEY, "
                         "name text NOT NULL, sha256 text NOT NULL)")
            conn.execute("INSERT INTO schema_migrations VALUES (1, 'identity_graph', %s)",
                         ("0" * 64,))
        code, log = asyncio.run(asyncio.wait_for(
            main(proxy, with_password(proxy.dsn(schema))), TEST_SECONDS))
    assert code != 0, log
    assert f"the identity graph at postgresql://***@127.0.0.1:{proxy.port}/test" in log, log
    assert "migration 0001 identity_graph was applied with SHA-256 000000000000" in log, log
    assert PASSWORD not in log
