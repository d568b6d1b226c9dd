"""The daemon on ``idmap.backend: postgres`` while PostgreSQL goes away and comes back
(a loopback proxy in front of the shared server, cut, or frozen so that it accepts and never
answers, then restored): signed webhook events
are refused (503, not acknowledged), ``/healthz`` names PostgreSQL, actions that need a
reverse lookup fail with retcode 102; once it answers again all of it resumes by itself
and the refused event is delivered, once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession
from structlog.testing import capture_logs

from gensokyo_idmap.app import run_daemon
from gensokyo_idmap.config import Config
from gensokyo_idmap.testing import (
    APP,
    WebhookSender,
    daemon_config,
    framework_server,
    free_port,
    until_listening,
    ws_url,
)

from ..pg_proxy import PgProxy
from ..store_backends import PG_DSN, fresh_schema
from .test_inbound import SECRET, QueueFramework, group_message

RECOVERY_SECONDS = 60.0  # the pool reconnects with a backoff of its own


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema(create=True) as name:
        yield name


@pytest.mark.parametrize("fault", ["cut", "freeze"])
def test_postgres_down_refuses_events_and_lookups_and_everything_resumes(
        tmp_path: Path, schema: str, fault: str) -> None:
    webhook, onebot_api, api = free_port(), free_port(), free_port()
    framework = QueueFramework()

    async def post(session: ClientSession, body: bytes) -> int:
        sender = WebhookSender(f"http://127.0.0.1:{webhook}/qqbot", APP, SECRET,
                               session=session)
        return (await sender.post_raw(body, sender.headers(body))).status

    async def action(session: ClientSession, name: str, **params: Any) -> dict[str, Any]:
        async with session.post(f"http://127.0.0.1:{onebot_api}/{name}", json=params) as resp:
            answer: dict[str, Any] = await resp.json()
            return answer

    async def healthz(session: ClientSession) -> tuple[int, str]:
        async with session.get(f"http://127.0.0.1:{api}/healthz") as resp:
            return resp.status, await resp.text()

    async def main(proxy: PgProxy) -> None:
        server = await framework_server(framework.handle)
        config = Config.model_validate(daemon_config(
            tmp_path / "data", secret=SECRET, webhook=f"127.0.0.1:{webhook}",
            api=f"127.0.0.1:{api}",
            onebot={"reverse_ws": [ws_url(server)], "http_api": f"127.0.0.1:{onebot_api}"},
            idmap={"backend": "postgres", "postgres_dsn": proxy.dsn(schema)}))
        stop = asyncio.Event()
        daemon = asyncio.create_task(run_daemon(config, stop))
        try:
            async with ClientSession() as session:
                await until_listening(webhook, alive=lambda: daemon.done() and daemon.result())
                assert await post(session, group_message(1)) == 200
                first = await asyncio.wait_for(framework.received.get(), 10)
                group = first["group_id"]
                assert await healthz(session) == (204, "")
                assert (await action(session, "get_group_info", group_id=group))["retcode"] == 0

                getattr(proxy, fault)()
                assert await post(session, group_message(2)) == 503  # not acknowledged
                status, body = await healthz(session)
                assert status == 503 and f"postgresql at postgresql://127.0.0.1:{proxy.port}/" \
                    in body
                for name in ("get_group_info", "send_group_msg"):
                    answer = await action(session, name, group_id=group, message="hi")
                    assert (answer["status"], answer["retcode"]) == ("failed", 102), answer
                    assert "PostgreSQL at" in answer["message"]
                assert framework.received.empty()

                proxy.restore()
                deadline = time.monotonic() + RECOVERY_SECONDS
                while (status := await post(session, group_message(2))) != 200:
                    assert status == 503 and time.monotonic() < deadline
                    await asyncio.sleep(0.1)
                second = await asyncio.wait_for(framework.received.get(), 10)
                assert second["message"][1]["data"]["text"] == " hello 2"
                assert second["group_id"] == group
                assert await healthz(session) == (204, "")
                assert (await action(session, "get_group_info", group_id=group))["retcode"] == 0
                assert await post(session, group_message(2)) == 200  # a repeat: not again
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(framework.received.get(), 0.5)
        finally:
            stop.set()
            await asyncio.wait_for(daemon, 20)
            await server.close()

    with PgProxy(PG_DSN) as proxy, capture_logs() as logs:
        asyncio.run(asyncio.wait_for(main(proxy), 120))
    events = [e["event"] for e in logs]
    assert events.count("[idmap] postgresql unreachable") == 1  # said once per outage
    assert events.count("[idmap] postgresql reachable again") == 1
