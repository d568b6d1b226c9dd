"""Gateway events while a server backend is down: PostgreSQL (the graph, through a loopback
proxy that is cut) or Redis (the runtime state, a private redis-server that is stopped).
The event that arrives meanwhile is not processed, so the watermark stays before it and the
connection ends (nothing is read past it); the daemon resumes the session by itself, the
platform replays, and once the server answers the event reaches the framework, once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

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

RECOVERY_SECONDS = 60.0  # reconnects back off (doubling from 1 s) while the fault lasts
NOTHING_MORE_SECONDS = 0.5


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

    async def main() -> tuple[list[str], int]:
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
            resumes = len(platform.resumes)
            await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(2))
            # not processed: the connection ends and is resumed, the event replayed
            await until(lambda: len(platform.resumes) > resumes, 20, "a resume")
            assert framework.received.empty()
            fault.up()
            texts.append(await next_text(RECOVERY_SECONDS))
            try:
                texts.append(await next_text(NOTHING_MORE_SECONDS))
            except TimeoutError:
                pass
            return texts, len(platform.resumes) - resumes
        finally:
            stop.set()
            await asyncio.wait_for(daemon, 20)
            await server.close()
            await platform.close()

    texts, resumes = asyncio.run(asyncio.wait_for(main(), 120))
    assert texts == ["m1", "m2"]  # the second after the outage, and only once
    assert resumes >= 1
