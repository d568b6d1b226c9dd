"""``gensokyo_backend_up`` of the server backends: a real redis-server (stopped, then
started again) and PostgreSQL behind a loopback proxy (cut, then restored), asked at each
scrape of a real /metrics."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
from aiohttp import web

from gensokyo_idmap.api.server import ApiServer
from gensokyo_idmap.api.settings import ApiSettings
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.runtime.msgid import MsgIdMap
from gensokyo_idmap.store.postgres.ping import PgPing
from gensokyo_idmap.runtime.redis.connection import RedisRuntime

from ..conftest import run
from ..pg_proxy import PgProxy
from ..redis_server import PrivateRedis
from ..store_backends import PG_DSN
from .test_server import metric


def test_each_server_backend_is_up_while_it_answers(
        tmp_path: Path, graph: IdentityGraph, msgids: MsgIdMap, identity_db_path: Path,
        msgid_db_path: Path) -> None:
    redis_server = PrivateRedis(tmp_path)
    redis_server.start()
    runtime = RedisRuntime(redis_server.url, "gsk-backend-up:")

    async def main(proxy: PgProxy) -> list[tuple[float | None, float | None, float | None]]:
        ping = PgPing(proxy.dsn("public"))
        server = ApiServer(graph, msgids, ApiSettings(
            app_id="102000001", identity_path=identity_db_path, msgid_path=msgid_db_path),
            servers=[(graph.store, ping), (runtime, runtime)])
        runner = web.AppRunner(server.application(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        url = f"http://127.0.0.1:{runner.addresses[0][1]}/metrics"
        found = []
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as s:
                async def scrape() -> None:
                    async with s.get(url) as resp:
                        assert resp.status == 200
                        text = await resp.text()
                    found.append(tuple(metric(text, f'gensokyo_backend_up{{backend="{b}"}}')
                                       for b in ("postgres", "redis", "lmdb")))

                await scrape()
                redis_server.stop()
                await scrape()
                proxy.cut()
                await scrape()
                proxy.restore()
                redis_server.start()
                await scrape()
        finally:
            await runner.cleanup()
            await ping.aclose()
            await runtime.aclose()
        return found

    try:
        with PgProxy(PG_DSN) as proxy:
            found = run(asyncio.wait_for(main(proxy), 60))
    finally:
        redis_server.stop()
    # the graph is on "PostgreSQL" here: the LMDB message ids are the lmdb backend
    assert found == [(1, 1, 1), (1, 0, 1), (0, 0, 1), (1, 1, 1)]
