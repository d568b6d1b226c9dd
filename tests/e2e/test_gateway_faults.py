"""Gateway events while a server backend is down: PostgreSQL (the graph, through a loopback
proxy that is cut) or Redis (the runtime state, a private redis-server that is stopped).
The event that arrives meanwhile is not processed, so the watermark stays before it and the
gateway stops reading (its heartbeats go on, it does not reconnect to the platform while the
server is away); once the server answers the daemon resumes the session by itself, the
platform replays, and the event reaches the framework, once. The same with the server down
from the daemon's start: Redis pauses the session at its first event, PostgreSQL (where the
session is saved) holds it back until the graph opens."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
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
    free_port,
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
PAUSED = "[qq] gateway paused: reading stops until the events can be processed"


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


class GatewayDaemon:
    """The daemon under test in this process, on the gateway of an emulated platform, with a
    reverse-WS framework."""

    def __init__(self, platform: EmulatedPlatform, framework: QueueFramework,
                 task: asyncio.Task[None]) -> None:
        self.platform, self.framework, self.task = platform, framework, task

    def alive(self) -> None:
        """Raise what ended the daemon, if it ended."""
        if self.task.done():
            self.task.result()

    async def next_text(self, timeout: float) -> str:
        """The text of the next message event the framework gets."""
        event = await asyncio.wait_for(self.framework.received.get(), timeout)
        return "".join(segment["data"]["text"] for segment in event["message"]
                       if segment["type"] == "text").strip()

    async def texts_after(self, timeout: float) -> list[str]:
        """The next message's text, and any that comes within :data:`NOTHING_MORE_SECONDS`
        after it (a repeat would)."""
        texts = [await self.next_text(timeout)]
        try:
            texts.append(await self.next_text(NOTHING_MORE_SECONDS))
        except TimeoutError:
            pass
        return texts


@asynccontextmanager
async def gateway_daemon(data_dir: Path, idmap: dict[str, Any], *,
                         api: bool = False) -> AsyncIterator[GatewayDaemon]:
    """The daemon on ``idmap`` (and its API when ``api``: it is on by default in a real
    config), running until the block ends."""
    platform = EmulatedPlatform()
    await platform.start()
    framework = QueueFramework()
    server = await framework_server(framework.handle)
    config = Config.model_validate(daemon_config(
        data_dir, platform=platform, onebot={"reverse_ws": [ws_url(server)]},
        api=f"127.0.0.1:{free_port()}" if api else "", idmap=idmap))
    stop = asyncio.Event()
    task = asyncio.create_task(run_daemon(config, stop))
    try:
        yield GatewayDaemon(platform, framework, task)
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)
        await server.close()
        await platform.close()


def test_a_gateway_event_waits_out_a_backend_outage_and_arrives_once(
        tmp_path: Path, fault: Fault) -> None:
    async def main() -> tuple[list[str], int, int]:
        async with gateway_daemon(tmp_path / "data", fault.idmap) as daemon:
            platform = daemon.platform
            await until(lambda: platform.identifies, 20, "the daemon on the gateway")
            await until(lambda: daemon.framework.connections, 20, "the framework connected")
            await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(1))
            texts = [await daemon.next_text(20)]
            fault.down()

            def sessions() -> int:  # each time the daemon (re)connected to the platform
                return len(platform.resumes) + len(platform.identifies)

            before = sessions()
            await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(2))
            # not processed: reading pauses while the server is away, heartbeats go on
            beats = len(platform.heartbeats)
            await until(lambda: len(platform.heartbeats) >= beats + OUTAGE_HEARTBEATS, 30,
                        "the outage's heartbeats")
            assert daemon.framework.received.empty()
            during = sessions() - before
            fault.up()
            texts += await daemon.texts_after(RECOVERY_SECONDS)
            return texts, during, sessions() - before

    with capture_logs() as logs:
        texts, during, in_all = asyncio.run(asyncio.wait_for(main(), 120))
    assert texts == ["m1", "m2"]  # the second after the outage, and only once
    assert during == 0  # no reconnect churn while the server was away
    assert in_all == 1  # one Resume, once it answered: the replay
    events = [e["event"] for e in logs]
    assert events.count(PAUSED) == 1
    assert events.count("[qq] gateway resumes reading") == 1


@pytest.mark.parametrize("fault", ["redis"], indirect=True)
def test_a_gateway_daemon_started_while_redis_is_down_pauses_and_takes_the_event_once(
        tmp_path: Path, fault: Fault) -> None:
    """Redis down from the start (the API on, as by default): the gateway session begins
    (nothing of it lives in Redis), the first event pauses reading as during any outage,
    and once Redis answers the daemon resumes by itself and the event arrives, once."""
    fault.down()

    async def main() -> tuple[list[str], int]:
        async with gateway_daemon(tmp_path / "data", fault.idmap, api=True) as daemon:
            platform = daemon.platform
            await until(lambda: platform.identifies, 20, "the daemon on the gateway",
                        alive=daemon.alive)
            await until(lambda: daemon.framework.connections, 20, "the framework connected")
            await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(1))
            beats = len(platform.heartbeats)
            await until(lambda: len(platform.heartbeats) >= beats + OUTAGE_HEARTBEATS, 30,
                        "the outage's heartbeats", alive=daemon.alive)
            assert daemon.framework.received.empty()
            fault.up()
            return await daemon.texts_after(RECOVERY_SECONDS), len(platform.resumes)

    with capture_logs() as logs:
        texts, resumes = asyncio.run(asyncio.wait_for(main(), 120))
    assert texts == ["m1"]
    assert resumes == 1  # the replay, once Redis answered
    events = [e["event"] for e in logs]
    assert events.count("[redis] unreachable, running degraded") == 1
    assert events.index("[redis] unreachable, running degraded") < events.index("[app] ready")
    assert events.count(PAUSED) == 1
    assert events.count("[qq] gateway resumes reading") == 1


def test_a_gateway_daemon_started_while_postgres_is_down_begins_its_session_once_it_answers(
        tmp_path: Path) -> None:
    """PostgreSQL down from the start (the API on): the gateway session saved there is read
    once the graph opens (not asked for, and complained about, meanwhile); then events
    flow, each once."""

    async def main(proxy: PgProxy, schema: str) -> list[str]:
        proxy.cut()
        idmap = {"backend": "postgres", "postgres_dsn": proxy.dsn(schema)}
        async with gateway_daemon(tmp_path / "data", idmap, api=True) as daemon:
            platform = daemon.platform
            await until(lambda: daemon.framework.connections and platform.tokens_issued, 20,
                        "the framework connected, the gateway discovered", alive=daemon.alive)
            # the daemon asked the server at start and twice since (1 s apart, then 2 s)
            await until(lambda: proxy.accepted >= 3, 20, "three attempts", alive=daemon.alive)
            assert not platform.identifies
            proxy.restore()
            await until(lambda: platform.identifies, RECOVERY_SECONDS,
                        "the daemon on the gateway", alive=daemon.alive)
            await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(1))
            return await daemon.texts_after(20)

    with fresh_schema(create=True) as schema, PgProxy(PG_DSN) as proxy, \
            capture_logs() as logs:
        texts = asyncio.run(asyncio.wait_for(main(proxy, schema), 120))
    assert texts == ["m1"]
    events = [e["event"] for e in logs]
    assert events.count("[idmap] postgresql unreachable") == 1
    assert events.count("[idmap] postgresql reachable again") == 1
    assert "[qq] gateway session not readable" not in events
