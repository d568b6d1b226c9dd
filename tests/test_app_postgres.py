"""The daemon on a PostgreSQL identity graph (idmap.backend: postgres): it opens the graph the
DSN names (schema migrated), serves the identity API from it, writes no openid-map.db, and
refuses to start beside an old idmap.db it would leave behind."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
import pytest
import structlog
from structlog.testing import capture_logs

from gensokyo_idmap.app import build_daemon, run_daemon
from gensokyo_idmap.config import Config
from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.store.postgres.identity import PgIdentityStore
from gensokyo_idmap.testing import EmulatedPlatform, free_port, group_message, until
from gensokyo_idmap.testing.platform_emulator import group_on_shard
from migrate.startup import migrate_if_found

from .store_backends import PG_DSN, fresh_schema
from .test_app import APP_ID, OPENID, TIMEOUT, wait_for_event


@pytest.fixture(autouse=True)
def _structlog_defaults() -> Iterator[None]:
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema(create=True) as name:
        yield name


def postgres_config(data_dir: Path, schema: str) -> Config:
    return Config.model_validate({
        "bot": {"app_id": APP_ID},
        "idmap": {"data_dir": str(data_dir), "backend": "postgres",
                  "postgres_dsn": f"{PG_DSN}?options=-csearch_path%3D{schema}"},
        "api": {"listen": f"127.0.0.1:{free_port()}"},
        "log": {"level": "debug", "format": "json"}})


def test_the_daemon_serves_identities_from_postgres(tmp_path: Path, schema: str) -> None:
    config = postgres_config(tmp_path / "data", schema)

    async def scenario() -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any],
                                  dict[str, Any]]:
        stop = asyncio.Event()
        with capture_logs() as logs:
            task = asyncio.create_task(run_daemon(config, stop, prepare=migrate_if_found))
            for _ in range(int(TIMEOUT / 0.01)):
                if any(e["event"] == "[app] ready" for e in logs) or task.done():
                    break
                await asyncio.sleep(0.01)
            if task.done():
                task.result()
            await wait_for_event(logs, "[app] ready")
            base = f"http://{config.api.listen}"
            async with aiohttp.ClientSession() as http:
                async with http.post(f"{base}/v1/resolve", json={"keys": [OPENID]}) as resp:
                    assert resp.status == 200, await resp.text()
                    resolved = await resp.json()
                async with http.get(f"{base}/v1/identity",
                                    params={"key": f"openid:QQ:{APP_ID}:{OPENID}"}) as resp:
                    assert resp.status == 200, await resp.text()
                    looked_up = await resp.json()
                async with http.get(f"{base}/v1/stats") as resp:
                    assert resp.status == 200, await resp.text()
                    stats = await resp.json()
            stop.set()
            await asyncio.wait_for(task, TIMEOUT)
        return logs, resolved, looked_up, stats

    logs, resolved, looked_up, stats = asyncio.run(scenario())
    assert (resolved["vuin"], resolved["created"]) == (1, True)
    assert looked_up["vuin"] == 1
    opened = next(e for e in logs if e["event"] == "[idmap] store open")
    assert opened["path"] == config.idmap.postgres_dsn and opened["identities"] == 0
    # /v1/stats reports the graph where it is (no openid-map.db to measure)
    graph = stats["openid_map"]
    assert (graph["path"], graph["bytes"], graph["identities"]) == (
        config.idmap.postgres_dsn, None, 1), stats
    assert not (tmp_path / "data" / "openid-map.db").exists()
    with PgIdentityStore(PG_DSN, schema=schema, readonly=True) as store, store.read() as view:
        assert dict(view.iter_identities()) == {f"openid:QQ:{APP_ID}:{OPENID}": 1}


def test_an_old_idmap_db_beside_a_postgres_graph_is_refused(tmp_path: Path,
                                                             schema: str) -> None:
    config = postgres_config(tmp_path / "data", schema)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "idmap.db").write_bytes(b"\0" * 4096)
    with pytest.raises(BadInputError, match="does not migrate into PostgreSQL by itself"):
        asyncio.run(run_daemon(config, asyncio.Event(), prepare=migrate_if_found))


def test_daemons_on_one_postgres_graph_serve_their_bots_with_a_session_per_bot_and_shard(
        tmp_path: Path, schema: str) -> None:
    """Issue 34.5: with ``idmap.backend: postgres`` each daemon serves the bots of its own
    config over the one graph. Daemon 1 serves shard 0 of bot A and bot B; daemon 2 serves
    shard 1 of bot A. Each gateway session is a row of its bot and shard; a person with one
    union_openid seen by B (daemon 1) and by A's shard 1 (daemon 2) is one vUIN; daemon 1
    restarted resumes both its sessions from their rows."""
    first, second = "102000001", "102000002"
    union = "UNION000000000000000000000000ABCD"
    dsn = f"{PG_DSN}?options=-csearch_path%3D{schema}"

    def config(name: str, entries: list[dict[str, Any]], forward: int) -> Config:
        return Config.model_validate({
            "bots": entries,
            "idmap": {"data_dir": str(tmp_path / name), "backend": "postgres",
                      "postgres_dsn": dsn},
            "api": {"listen": ""},
            "onebot": {"heartbeat_interval_seconds": 60,
                       "forward_ws": f"127.0.0.1:{forward}"}})

    def on_shard(platform: EmulatedPlatform, index: int) -> dict[str, Any]:
        entry = platform.bot_entry()
        entry["qq"]["shard"] = [index, 2]
        return entry

    async def user_of(http: aiohttp.ClientSession, forward: int, platform: EmulatedPlatform,
                      n: int, group: str) -> int:
        async with http.ws_connect(f"ws://127.0.0.1:{forward}/{platform.app_id}/") as ws:
            await ws.receive_json(timeout=TIMEOUT)  # lifecycle
            await platform.push("GROUP_AT_MESSAGE_CREATE",
                                group_message(n, group, "USER" + "0" * 28, union=union))
            event = await ws.receive_json(timeout=TIMEOUT)
        vuin: int = event["user_id"]
        return vuin

    async def scenario() -> None:
        a = EmulatedPlatform(shards=2, app_id=first, secret="a-secret", token_prefix="A",
                             overlapping_tokens=True)
        b = EmulatedPlatform(app_id=second, secret="b-secret", token_prefix="B")
        for platform in (a, b):
            await platform.start()
        forward1, forward2 = free_port(), free_port()
        one = config("one", [on_shard(a, 0), b.bot_entry()], forward1)
        two = config("two", [on_shard(a, 1)], forward2)
        try:
            async with aiohttp.ClientSession() as http:
                async with AsyncExitStack() as stack2:
                    await build_daemon(two, asyncio.Event(), stack2)
                    async with AsyncExitStack() as stack1:
                        await build_daemon(one, asyncio.Event(), stack1)
                        await until(lambda: len(a.identifies) == 2 and len(b.identifies) == 1,
                                    TIMEOUT, "a session per bot and shard")
                        by_b = await user_of(http, forward1, b, 1, "G" * 32)
                        by_a = await user_of(http, forward2, a, 2, group_on_shard(1, 2))
                        assert by_a == by_b  # one union_openid, one graph: one vUIN
                    rows = _session_rows(dsn)
                    assert sorted(rows) == [(first, 0, 2), (first, 1, 2), (second, 0, 1)]
                    sessions = {(app, index): session for (app, index, _), session
                                in rows.items()}
                    assert sessions[(first, 0)] == a.shards[0].session_id
                    assert sessions[(second, 0)] == b.shards[0].session_id
                    async with AsyncExitStack() as stack1:  # daemon 1 again: it resumes
                        await build_daemon(one, asyncio.Event(), stack1)
                        await until(lambda: len(a.resumes) == 1 and len(b.resumes) == 1,
                                    TIMEOUT, "each session of daemon 1 resumed")
                    assert [(r["session_id"]) for r in a.resumes + b.resumes] == [
                        a.shards[0].session_id, b.shards[0].session_id]
        finally:
            for platform in (a, b):
                await platform.close()

    asyncio.run(scenario())


def _session_rows(dsn: str) -> dict[tuple[str, int, int], str]:
    """(AppID, shard index, shard count) → the session id of each row of gateway_session."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT app_id, shard_index, shard_count, session_id "
                            "FROM gateway_session").fetchall()
    return {(str(app), int(index), int(count)): str(session)
            for app, index, count, session in rows}
