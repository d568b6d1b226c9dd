"""Two daemons with ``idmap.runtime_backend: redis`` on one private redis-server, signed
webhook events, a framework on each: a retry sent to the other daemon is not delivered
twice, and while Redis is down events are refused (503, not acknowledged) and delivered
once it is back; none is lost."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from aiohttp import ClientSession
from structlog.testing import capture_logs

from gensokyo_idmap.app import run_daemon
from gensokyo_idmap.config import Config
from gensokyo_idmap.qq.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, WebhookKey

from gensokyo_idmap.testing import daemon_config, framework_server, free_port, ws_url

from ..redis_server import PrivateRedis
from .test_inbound import SECRET, QueueFramework, group_message

NOTHING_MORE_SECONDS = 0.5  # how long a framework is watched for an event that must not come


def redis_daemon(data_dir: Path, webhook_port: int, framework_url: str,
                 redis_url: str) -> Config:
    return Config.model_validate(daemon_config(
        data_dir, secret=SECRET, webhook=f"127.0.0.1:{webhook_port}",
        onebot={"reverse_ws": [framework_url]},
        idmap={"runtime_backend": "redis", "redis_url": redis_url,
               "redis_prefix": "gsk-e2e:"}))


def test_two_daemons_share_dedup_and_message_ids_and_survive_redis_going_away(
        tmp_path: Path) -> None:
    redis_server = PrivateRedis(tmp_path)
    redis_server.start()
    key = WebhookKey.from_secret(SECRET)
    ports = [free_port(), free_port()]
    inboxes: list[asyncio.Queue[dict[str, Any]]] = []
    frameworks_seen: list[QueueFramework] = []

    async def post(session: ClientSession, daemon: int, body: bytes) -> int:
        ts = str(int(time.time()))
        async with session.post(
                f"http://127.0.0.1:{ports[daemon]}/qqbot", data=body,
                headers={TIMESTAMP_HEADER: ts, SIGNATURE_HEADER: key.sign_callback(ts, body)},
        ) as resp:
            return resp.status

    async def nothing_more(daemon: int) -> None:
        try:
            extra = await asyncio.wait_for(inboxes[daemon].get(), NOTHING_MORE_SECONDS)
        except TimeoutError:
            return
        raise AssertionError(f"daemon {daemon} delivered again: {extra.get('message_id')}")

    async def main() -> None:
        frameworks_seen.extend([QueueFramework(), QueueFramework()])
        inboxes.extend(framework.received for framework in frameworks_seen)
        frameworks = [await framework_server(framework.handle) for framework in frameworks_seen]
        stop = asyncio.Event()
        daemons = [asyncio.create_task(run_daemon(redis_daemon(
            tmp_path / f"data{i}", ports[i], ws_url(frameworks[i]), redis_server.url), stop))
            for i in (0, 1)]
        try:
            async with ClientSession() as session:
                for daemon in (0, 1):  # both are up once their webhook answers
                    for _ in range(500):
                        try:
                            await post(session, daemon, b"{}")
                            break
                        except OSError:
                            await asyncio.sleep(0.01)
                assert await post(session, 0, group_message(1)) == 200
                first = await asyncio.wait_for(inboxes[0].get(), 10)
                assert first["message_id"] == 1
                # the platform's retry lands on the other daemon: acknowledged, not delivered
                assert await post(session, 1, group_message(1)) == 200
                await nothing_more(1)
                # a new message on daemon B skips the id alive on Redis
                assert await post(session, 1, group_message(2)) == 200
                assert (await asyncio.wait_for(inboxes[1].get(), 10))["message_id"] == 2

                redis_server.stop()
                assert await post(session, 0, group_message(3)) == 503  # not acknowledged
                await nothing_more(0)
                redis_server.start()  # empty: what Redis held was disposable
                for _ in range(100):  # the daemon asks again a second after a failure
                    status = await post(session, 0, group_message(3))
                    if status == 200:
                        break
                    assert status == 503
                    await asyncio.sleep(0.1)
                assert status == 200
                third = await asyncio.wait_for(inboxes[0].get(), 10)
                assert third["message"][1]["data"]["text"] == " hello 3"
                # the daemon's own position goes on: a Redis that lost everything does not
                # send its ids back to 1. (These daemons each keep their graph, and so
                # their high-water mark, in an openid-map.db of their own: id 2, which
                # daemon B handed out, is not known to A. Sharing a PostgreSQL graph
                # shares the mark: docs/stores.md.)
                assert third["message_id"] == 2
                await nothing_more(0)
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*daemons), 20)
            for framework in frameworks:
                await framework.close()

    try:
        with capture_logs() as logs:
            asyncio.run(asyncio.wait_for(main(), 90))
    finally:
        redis_server.stop()
    down = [e for e in logs if e["event"] == "[redis] unreachable, running degraded"]
    assert len(down) == 1  # one daemon saw the outage, and said so once
