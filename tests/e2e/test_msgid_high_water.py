"""A virtual message id is never handed out twice, even when the disposable store is lost
(issue 29.2): a daemon gets signed webhook messages and hands their ids to a framework;
msgid-map.db is damaged (the daemon moves it aside), or Redis is flushed while the daemon
runs and restarted empty while it is stopped; the messages after get ids none of the
earlier ones had. One test per runtime store: msgid-map.db; Redis with the graph in
openid-map.db; Redis with the graph in PostgreSQL."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import ClientSession

from gensokyo_idmap.app import run_daemon
from gensokyo_idmap.config import Config
from gensokyo_idmap.qq.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, WebhookKey
from gensokyo_idmap.testing import daemon_config, framework_server, free_port, ws_url

from .. import redis_server
from ..redis_server import PrivateRedis
from ..store_backends import fresh_schema, schema_dsn
from .test_inbound import SECRET, QueueFramework, group_message

private_redis = redis_server.private_redis  # the fixture, for this module's tests
PER_SESSION = 3  # messages each daemon run stores between two losses


class Messages:
    """Signed group messages to one daemon's webhook, numbered on from the last one; the
    ids its framework got for them."""

    def __init__(self, port: int, framework: QueueFramework) -> None:
        self.port = port
        self.inbox = framework.received
        self.key = WebhookKey.from_secret(SECRET)
        self.sent = 0
        self.ids: list[int] = []

    async def post(self, session: ClientSession, body: bytes) -> int:
        ts = str(int(time.time()))
        async with session.post(
                f"http://127.0.0.1:{self.port}/qqbot", data=body,
                headers={TIMESTAMP_HEADER: ts, SIGNATURE_HEADER: self.key.sign_callback(ts, body)},
        ) as resp:
            return resp.status

    async def until_up(self, session: ClientSession) -> None:
        for _ in range(500):
            try:
                await self.post(session, b"{}")
                return
            except OSError:
                await asyncio.sleep(0.01)
        raise AssertionError("the daemon's webhook never answered")

    async def send(self, session: ClientSession, count: int = PER_SESSION) -> None:
        for _ in range(count):
            self.sent += 1
            assert await self.post(session, group_message(self.sent)) == 200
            frame = await asyncio.wait_for(self.inbox.get(), 10)
            self.ids.append(frame["message_id"])


#: The config of a daemon whose framework listens at the reverse-WS URL given.
MakeConfig = Callable[[str], Config]


def run_sessions(make_config: MakeConfig, port: int, between: list[Callable[[], None]],
                 during: Callable[[], None] | None = None) -> list[int]:
    """One daemon run per step of ``between`` and one more, each storing messages (and,
    with ``during``, doing it and storing more while the daemon runs); ``between`` runs
    while the daemon is stopped. The ids the framework got, in order."""
    framework = QueueFramework()
    messages = Messages(port, framework)

    async def one_run(session: ClientSession, config: Config) -> None:
        stop = asyncio.Event()
        daemon = asyncio.create_task(run_daemon(config, stop))
        try:
            await messages.until_up(session)
            await messages.send(session)
            if during is not None:
                during()
                await messages.send(session)
        finally:
            stop.set()
            await asyncio.wait_for(daemon, 20)

    async def main() -> None:
        server = await framework_server(framework.handle)
        config = make_config(ws_url(server))
        try:
            async with ClientSession() as session:
                for step in [*between, None]:
                    await one_run(session, config)
                    if step is not None:
                        step()
        finally:
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 120))
    return messages.ids


def assert_no_id_twice(ids: list[int], expected: int) -> None:
    assert len(ids) == expected
    repeated = sorted({vid for vid in ids if ids.count(vid) > 1})
    assert not repeated, f"message ids handed out twice: {repeated} (in order: {ids})"


def daemon(data_dir: Path, port: int, **idmap: Any) -> MakeConfig:
    return lambda url: Config.model_validate(daemon_config(
        data_dir, secret=SECRET, webhook=f"127.0.0.1:{port}",
        onebot={"reverse_ws": [url]}, idmap=idmap))


def test_a_damaged_msgid_store_moved_aside_hands_out_no_id_again(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    port = free_port()

    def damage() -> None:
        path = data_dir / "msgid-map.db"
        with path.open("r+b") as f:
            f.write(b"\xff" * 64)  # its meta pages: the daemon moves it aside at start

    ids = run_sessions(daemon(data_dir, port), port, between=[damage, damage])
    assert len(list(data_dir.glob("msgid-map.db.corrupt-*"))) == 2
    assert_no_id_twice(ids, 3 * PER_SESSION)


def on_redis(redis: PrivateRedis, data_dir: Path, port: int, **idmap: Any) -> MakeConfig:
    return daemon(data_dir, port, runtime_backend="redis", redis_url=redis.url,
                  redis_prefix="gsk-hw:", **idmap)


def flushed_and_restarted(redis: PrivateRedis, make_config: MakeConfig,
                          port: int) -> list[int]:
    """Messages; FLUSHALL while the daemon runs; more; the daemon stopped, Redis restarted
    empty, the daemon started again; messages, another FLUSHALL, more."""
    import redis as redis_py

    def flushall() -> None:
        client = redis_py.Redis.from_url(redis.url)
        try:
            client.flushall()  # our own server: nobody else's keys
        finally:
            client.close()

    def restart_empty() -> None:
        redis.stop()
        redis.start()  # no persistence: empty

    return run_sessions(make_config, port, between=[restart_empty], during=flushall)


def test_redis_flushed_or_restarted_empty_hands_out_no_id_again(
        tmp_path: Path, private_redis: PrivateRedis) -> None:
    port = free_port()
    redis = private_redis
    ids = flushed_and_restarted(redis, on_redis(redis, tmp_path / "data", port), port)
    assert_no_id_twice(ids, 4 * PER_SESSION)


def test_redis_with_the_graph_in_postgres_hands_out_no_id_again(
        tmp_path: Path, private_redis: PrivateRedis) -> None:
    port, redis = free_port(), private_redis
    with fresh_schema(create=True) as schema:
        config = on_redis(redis, tmp_path / "data", port, backend="postgres",
                          postgres_dsn=schema_dsn(schema))
        ids = flushed_and_restarted(redis, config, port)
    assert_no_id_twice(ids, 4 * PER_SESSION)

