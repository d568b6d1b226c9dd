"""gensokyo_backend_*: round trips, pool waits and errors per server backend, counted where
the drivers send and read by /metrics at scrape time (real PostgreSQL, real redis-server)."""

from __future__ import annotations

import re
import threading
from pathlib import Path

from gensokyo_idmap import counters, metrics
from gensokyo_idmap.errors import StoreError
from gensokyo_idmap.store.postgres.identity import PgIdentityStore
from gensokyo_idmap.runtime.redis.connection import RedisRuntime

from .pg_proxy import PgProxy
from .redis_server import PrivateRedis
from .store_backends import PG_DSN, fresh_schema


def scraped(name: str, backend: str) -> float:
    text = metrics.render().decode()
    found = re.search(rf'^{name}_total{{backend="{backend}"}} (\S+)$', text, re.M)
    assert found is not None, f"{name} {backend} not in /metrics"
    return float(found.group(1))


def test_postgres_round_trips_pool_waits_and_errors_are_counted() -> None:
    with fresh_schema(create=True) as schema, PgProxy(PG_DSN) as proxy:
        store = PgIdentityStore(proxy.dsn(schema), pool_size=1)
        try:
            trips = scraped("gensokyo_backend_round_trips", "postgres")
            store.probe("openid:QQ:1:x", None)
            assert scraped("gensokyo_backend_round_trips", "postgres") == trips + 1

            waits = scraped("gensokyo_backend_pool_waits", "postgres")
            held = store.getconn()  # the pool's one connection: the next caller waits
            waiting = threading.Thread(target=lambda: store.probe("openid:QQ:1:y", None))
            waiting.start()
            while store._pool.get_stats().get("requests_waiting", 0) == 0:  # noqa: SLF001
                waiting.join(0.01)
            store.putconn(held)
            waiting.join()
            assert scraped("gensokyo_backend_pool_waits", "postgres") == waits + 1

            errors = scraped("gensokyo_backend_errors", "postgres")
            proxy.cut()
            try:
                store.probe("openid:QQ:1:z", None)
            except StoreError:
                pass
            assert scraped("gensokyo_backend_errors", "postgres") >= errors + 1
        finally:
            store.close()


def test_redis_round_trips_and_errors_are_counted(tmp_path: Path) -> None:
    redis_server = PrivateRedis(tmp_path)
    redis_server.start()
    runtime = RedisRuntime(redis_server.url, "gsk-metrics:")
    try:
        runtime.sync.ping()  # the connection's own set-up commands are behind us
        trips = scraped("gensokyo_backend_round_trips", "redis")
        runtime.softly(lambda: runtime.sync.get(runtime.key("x")), None, "nothing")
        with runtime.sync.pipeline() as pipe:  # one send for the whole pipeline
            pipe.get(runtime.key("a")).get(runtime.key("b")).execute()
        assert scraped("gensokyo_backend_round_trips", "redis") == trips + 2
        errors = counters.BACKEND_ERRORS.labels("redis").value
        redis_server.stop()
        runtime.softly(lambda: runtime.sync.get(runtime.key("x")), None, "nothing")
        assert scraped("gensokyo_backend_errors", "redis") == errors + 1
    finally:
        runtime.sync.close()
        redis_server.stop()
