"""Two daemons' identity caches over one PostgreSQL graph, kept true by Redis pub/sub
(``cached_identity_store``): a rebind on daemon A reaches daemon B's cache within a second,
and an invalidation that never arrives (Redis restarted, or a channel B never hears)
leaves nothing stale past the cache's age bound.

Each "daemon" is a store instance of its own (its own pool, cache and Redis connections)
on the same schema and prefix; Redis is a private redis-server on a free port.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from click.testing import CliRunner
from structlog.testing import capture_logs

from gensokyo_idmap.app import run_daemon
from gensokyo_idmap.cli import main
from gensokyo_idmap.config import Config, load_config
from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.identity_backend import cached_identity_store, open_identity_store
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.store.identity_cache import CachedIdentityStore

from gensokyo_idmap.testing import free_port

from .conftest import APP_ID, run, test_prefix
from . import redis_server
from .redis_server import PrivateRedis
from . import test_app_postgres
from .store_backends import PG_DSN
from .test_app import wait_for_event

schema = test_app_postgres.schema  # the fixture: a schema of the test's own, created

private_redis = redis_server.private_redis  # the fixture, for this module's tests

ALICE = OpenId(APP_ID, "A11CE000000000000000000000000000")
BOB = OpenId(APP_ID, "B0B00000000000000000000000000000")
CAROL = OpenId(APP_ID, "CA201000000000000000000000000000")
GROUP = f"QQ:{APP_ID}:group:G1"
#: The bound the issue sets for a rebind to reach every daemon.
SEEN_WITHIN = 1.0
#: The age bound of these tests' caches (short, so the test of it is).
MAX_AGE = 2.0
#: Scheduling slack on a loaded 2-core machine, beyond a bound, before a test gives up.
SLACK = 1.0


def daemon(schema: str, redis_url: str, prefix: str, stack: ExitStack) -> IdentityGraph:
    """One daemon's graph: its own store on ``schema``, its own cache on ``redis_url``."""
    config = Config.model_validate({"idmap": {
        "backend": "postgres", "postgres_dsn": f"{PG_DSN}?options=-csearch_path%3D{schema}",
        "redis_url": redis_url, "redis_prefix": prefix,
        "identity_cache_max_age_seconds": MAX_AGE}})
    store = cached_identity_store(config, open_identity_store(config))
    assert isinstance(store, CachedIdentityStore)
    stack.callback(store.close)
    return IdentityGraph(store)


def cache_of(graph: IdentityGraph) -> Any:
    assert isinstance(graph.store, CachedIdentityStore)
    return graph.store.cache


def until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds:g} s: {what}")
        time.sleep(0.005)


def pair(schema: str, stack: ExitStack, url_a: str, url_b: str | None = None
         ) -> tuple[IdentityGraph, IdentityGraph, int, int]:
    """Daemons A and B on one prefix (B on ``url_b`` if given); Alice and Bob resolved on
    A and cached on B (served there from memory): A, B and their vUINs."""
    prefix = test_prefix()
    a = daemon(schema, url_a, prefix, stack)
    b = daemon(schema, url_b or url_a, prefix, stack)
    alice = run(a.resolve([ALICE], scene=GROUP)).vuin
    bob = run(a.resolve([BOB], scene=GROUP)).vuin
    until(lambda: cache_of(a).live and cache_of(b).live, 10, "both caches subscribed")
    for _ in range(2):
        assert b.known([ALICE], GROUP) == alice and b.known([BOB], GROUP) == bob
    assert cache_of(b).hits >= 2
    return a, b, alice, bob


def a_bind_is_heard(mover: IdentityGraph, watcher: IdentityGraph) -> None:
    """Carol resolved on ``mover`` and cached on ``watcher``; Alice bound to her on
    ``mover``: ``watcher`` sees it within a second."""
    carol = run(mover.resolve([CAROL], scene=GROUP)).vuin
    assert watcher.known([CAROL], GROUP) == carol
    assert watcher.known([ALICE], None) != carol
    run(mover.bind(ALICE, carol))
    until(lambda: watcher.known([ALICE], None) == carol, SEEN_WITHIN,
          "the watcher sees Alice's key moved by the other daemon")


def test_a_rebind_on_one_daemon_reaches_the_cache_of_another_within_a_second(
        schema: str, private_redis: PrivateRedis) -> None:
    with ExitStack() as stack:
        a, b, alice, bob = pair(schema, stack, private_redis.url)
        run(a.rebind(alice, bob))
        until(lambda: b.known([ALICE], None) == bob, SEEN_WITHIN,
              "daemon B sees Alice's key on Bob's vUIN")
        a_bind_is_heard(b, a)  # and the other way round


def test_after_a_redis_restart_no_stale_identity_outlives_the_age_bound(
        schema: str, private_redis: PrivateRedis) -> None:
    with ExitStack() as stack:
        a, b, alice, bob = pair(schema, stack, private_redis.url)
        private_redis.stop()  # the invalidation of this rebind is lost with it
        run(a.rebind(alice, bob))
        private_redis.start()  # same port: the subscriptions come back by themselves
        until(lambda: b.known([ALICE], None) == bob, MAX_AGE + SLACK,
              "daemon B sees the rebind it was never told of")
        until(lambda: cache_of(a).live and cache_of(b).live, 10, "both caches back")
        a_bind_is_heard(a, b)  # the channel works again


def test_an_invalidation_never_heard_leaves_nothing_stale_past_the_age_bound(
        schema: str, tmp_path: Path) -> None:
    """B listens on a Redis A does not publish to: B never hears of the rebind, nothing
    tells it its channel is deaf; only the age bound can end the stale answer."""
    with ExitStack() as stack:
        servers = [PrivateRedis(tmp_path / name) for name in ("a", "b")]
        for server in servers:
            server.workdir.mkdir()
            server.start()
            stack.callback(server.stop)
        a, b, alice, bob = pair(schema, stack, servers[0].url, servers[1].url)
        run(a.rebind(alice, bob))
        until(lambda: b.known([ALICE], None) == bob, MAX_AGE + SLACK,
              "daemon B's stale entry ends by age")
        assert cache_of(b).live and cache_of(b).invalidations == 0


def test_the_daemon_caches_and_hears_a_bind_made_by_the_cli(
        schema: str, private_redis: PrivateRedis, tmp_path: Path) -> None:
    """``serve`` on PostgreSQL + Redis answers known people from its cache; ``identity bind``
    run as a command on the same config reaches that cache within a second."""
    dsn = f"{PG_DSN}?options=-csearch_path%3D{schema}"
    port = free_port()
    config_file = tmp_path / "config.yml"
    config_file.write_text(yaml.safe_dump({
        "bot": {"app_id": APP_ID},
        "idmap": {"data_dir": str(tmp_path / "data"), "backend": "postgres",
                  "postgres_dsn": dsn, "redis_url": private_redis.url,
                  "redis_prefix": test_prefix()},
        "api": {"listen": f"127.0.0.1:{port}"}}), encoding="utf-8")
    config = load_config(config_file, environ={})

    async def scenario() -> None:
        stop = asyncio.Event()
        with capture_logs() as logs:
            task = asyncio.create_task(run_daemon(config, stop))
            await wait_for_event(logs, "[app] ready")
            await wait_for_event(logs, "[idmap] identity cache live")
            async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as http:
                async def resolve(key: OpenId) -> int:
                    async with http.post("/v1/resolve", json={"keys": [key.key]}) as resp:
                        assert resp.status == 200, await resp.text()
                        return int((await resp.json())["vuin"])

                assert [await resolve(k) for k in (ALICE, BOB, ALICE, ALICE)] == [1, 2, 1, 1]
                bound = await asyncio.to_thread(CliRunner(env={}).invoke, main, [
                    "--config", str(config_file), "identity", "bind", ALICE.key, "2"])
                assert bound.exit_code == 0, bound.output
                deadline = time.monotonic() + SEEN_WITHIN
                while await resolve(ALICE) != 2:
                    assert time.monotonic() < deadline, "the daemon still serves vUIN 1"
                    await asyncio.sleep(0.01)
            stop.set()
            await asyncio.wait_for(task, 20)

    asyncio.run(scenario())
