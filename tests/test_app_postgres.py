"""The daemon on a PostgreSQL identity graph (idmap.backend: postgres): it opens the graph the
DSN names (schema migrated), serves the identity API from it, writes no openid-map.db, and
refuses to start beside an old idmap.db it would leave behind."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import structlog
from structlog.testing import capture_logs

from gensokyo_idmap.app import run_daemon
from gensokyo_idmap.config import Config
from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.store.postgres.identity import PgIdentityStore
from gensokyo_idmap.testing import free_port
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
