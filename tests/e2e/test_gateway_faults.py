"""Gateway events while a server backend is down: PostgreSQL (the graph, through a loopback
proxy that is cut) or Redis (the runtime state, a private redis-server that is stopped).
The event that arrives meanwhile is not processed, so the watermark stays before it and the
gateway stops reading (its heartbeats go on, it does not reconnect to the platform while the
server is away); once the server answers the daemon resumes the session by itself, the
platform replays, and the event reaches the framework, once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from gensokyo_idmap.app import run_daemon
from gensokyo_idmap.config import Config
from gensokyo_idmap.testing import (
    EmulatedPlatform,
    daemon_config,
    framework_server,
    group_message,
    until,
    ws_url,
)

from ..pg_proxy import PgProxy
from ..redis_server import PrivateRedis
from ..store_backends import PG_DSN, fresh_schema
from .test_inbound import QueueFramework

RECOVERY_SECONDS = 30.0  # the paused gateway asks the servers every 1 s, up to every 5 s
NOTHING_MORE_SECONDS = 0.5
#: How long the outage lasts, in the gateway's heartbeats (every 200 ms on the emulator):
#: long enough for a daemon that reconnected each second to do so several times.
OUTAGE_HEARTBEATS = 25


class Fault:
    """A server backend the test can take away and give back."""

    def __init__(self, idmap: dict[str, Any], down: Callable[[], None],
                 up: Callable[[], None]) -> None:
        self.idmap, self.down, self.up = idmap, down, up


@pytest.fixture(params=["postgres", "redis"])
def fault(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Fault]:
    if request.param == "postgres":
        with fresh_schema(create=True) as schema, PgProxy(PG_DSN) as proxy:
            yield Fault({"backend": "postgres", "postgres_dsn": proxy.dsn(schema)},
                        proxy.cut, proxy.restore)
        return
    redis_server = PrivateRedis(tmp_path)
    redis_server.start()
    try:
        yield Fault({"runtime_backend": "redis", "redis_url": redis_server.url,
                     "redis_prefix": "gsk-gw:"}, redis_server.stop, redis_server.start)
    finally:
        redis_server.stop()


def test_a_gateway_event_waits_out_a_backend_outage_and_arrives_once(
        tmp_path: Path, fault: Fault) -> None:
    framework = QueueFramework()

    async def main() -> tuple[list[str], int, int]:
        platform = EmulatedPlatform()
        await platform.start()
        server = await framework_server(framework.handle)
        config = Config.model_validate(daemon_config(
            tmp_path / "data", platform=platform, onebot={"reverse_ws": [ws_url(server)]},
            idmap=fault.idmap))
        stop = asyncio.Event()
        daemon = asyncio.create_task(run_daemon(config, stop))
        texts: list[str] = []

        async def next_text(timeout: float) -> str:
            event = await asyncio.wait_for(framework.received.get(), timeout)
            return "".join(segment["data"]["text"] for segment in event["message"]
                           if segment["type"] == "text").strip()

        try:
            await until(lambda: platform.identifies, 20, "the daemon on the gateway")
            await until(lambda: framework.connections, 20, "the framework connected")
            await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(1))
            texts.append(await next_text(20))
            fault.down()

            def sessions() -> int:  # each time the daemon (re)connected to the platform
                return len(platform.resumes) + len(platform.identifies)

            before = sessions()
            await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(2))
            # not processed: reading pauses while the server is away, heartbeats go on
            beats = len(platform.heartbeats)
            await until(lambda: len(platform.heartbeats) >= beats + OUTAGE_HEARTBEATS, 30,
                        "the outage's heartbeats")
            assert framework.received.empty()
            during = sessions() - before
            fault.up()
            texts.append(await next_text(RECOVERY_SECONDS))
            try:
                texts.append(await next_text(NOTHING_MORE_SECONDS))
            except TimeoutError:
                pass
            return texts, during, sessions() - before
        finally:
            stop.set()
            await asyncio.wait_for(daemon, 20)
            await server.close()
            await platform.close()

    with capture_logs() as logs:
        texts, during, in_all = asyncio.run(asyncio.wait_for(main(), 120))
    assert texts == ["m1", "m2"]  # the second after the outage, and only once
    assert during == 0  # no reconnect churn while the server was away
    assert in_all == 1  # one Resume, once it answered: the replay
    events = [e["event"] for e in logs]
    assert events.count("[qq] gateway paused: reading stops until the events can be "
                        "processed") == 1
    assert events.count("[qq] gateway resumes reading") == 1
