"""/healthz's server checks: PostgreSQL ``select 1`` and Redis ``PING`` on real servers, each
named when it is down (Redis: a private redis-server, stopped; PostgreSQL: a loopback proxy
in front of the shared server, cut or frozen), within the timeout even when one hangs."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gensokyo_idmap.health import server_problems
from gensokyo_idmap.store.postgres.ping import PgPing
from gensokyo_idmap.runtime.redis.connection import RedisRuntime

from .pg_proxy import PgProxy
from .redis_server import PrivateRedis
from .store_backends import PG_DSN

TIMEOUT = 0.5


def test_each_server_that_does_not_answer_is_named(tmp_path: Path) -> None:
    redis_server = PrivateRedis(tmp_path)
    redis_server.start()
    try:
        with PgProxy(PG_DSN) as proxy:
            found = asyncio.run(scenario(proxy, redis_server))
    finally:
        redis_server.stop()
    up, pg_cut, pg_frozen, both_back, redis_down, known = found
    assert up == []
    assert len(pg_cut) == 1 and pg_cut[0].startswith(f"postgresql at postgresql://127.0.0.1:"
                                                     f"{proxy.port}/")
    assert pg_frozen == [f"postgresql at {proxy.dsn('public')}: no answer within {TIMEOUT:g} s"]
    assert both_back == []
    assert len(redis_down) == 1 and redis_down[0].startswith(f"redis at {redis_server.url}: ")
    assert known == [f"postgresql at {proxy.dsn('public')}: its last write failed: disk full",
                     redis_down[0]]


async def scenario(proxy: PgProxy, redis_server: PrivateRedis) -> list[list[str]]:
    last_write: list[str | None] = [None]
    ping = PgPing(proxy.dsn("public"), known=lambda: last_write[0])
    runtime = RedisRuntime(redis_server.url, "gsk-health:")
    checks = [ping, runtime]
    found = [await server_problems(checks, TIMEOUT)]
    proxy.cut()
    found.append(await server_problems(checks, TIMEOUT))
    proxy.restore()
    proxy.freeze()
    found.append(await server_problems(checks, TIMEOUT))
    proxy.restore()
    found.append(await server_problems(checks, TIMEOUT))
    redis_server.stop()
    found.append(await server_problems(checks, TIMEOUT))
    last_write[0] = "its last write failed: disk full"
    found.append(await server_problems(checks, TIMEOUT))
    await ping.aclose()
    await runtime.aclose()
    return found
