"""migrate --legacy with idmap.backend postgres: the fixtures land in the PostgreSQL graph
with every manifest mapping, the same graph a migration into openid-map.db makes, the same
report, and the marker; a second run does nothing; a graph that is not empty is refused
before anything is converted."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gensokyo_idmap.cli import main
from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.ops.store_copy import read_lmdb_rows
from gensokyo_idmap.store.postgres.copy import read_rows, target_state
from gensokyo_idmap.store.postgres.identity import PgIdentityStore

from ..store_backends import postgres_config, schema_dsn
from .test_legacy import APP, assert_manifest_landed, manifest, sha

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "legacy"


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner(env={"GSK_IDMAP__DATA_DIR": None, "GSK_BOT__APP_ID": None,
                            "GSK_IDMAP__POSTGRES_DSN": None}).invoke(main, list(args))
    return result.exit_code, result.stdout


def without_time(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k not in ("seconds", "target", "copy")}


def config_for(tmp_path: Path, schema: str) -> Path:
    return postgres_config(tmp_path / "config.yml", schema, app_id=APP,
                           data_dir=tmp_path / "data")


@pytest.mark.parametrize("name", ["small-counter", "small-hash"])
def test_the_fixtures_migrate_straight_into_postgres(tmp_path: Path, pg_schema: str,
                                                     name: str) -> None:
    legacy = FIXTURES / f"{name}.db"
    before = sha(legacy)
    config = config_for(tmp_path, pg_schema)
    code, out = cli("--config", str(config), "--json", "migrate", "--legacy", str(legacy))
    assert code == 0, out
    report = json.loads(out)
    assert report["status"] == "migrated" and sha(legacy) == before
    assert report["copy"]["status"] == "copied" and report["copy"]["uncarried"] == []
    assert report["copy"]["read"] == report["copy"]["written"]
    conflicted = {e["key"] for e in report["conflicts"]} | {e["key"] for e in report["reissued"]}
    dsn = schema_dsn(pg_schema)
    with PgIdentityStore(dsn, readonly=True) as store, store.read() as view:
        marker = assert_manifest_landed(view, manifest(name), conflicted)
    assert marker["legacy_sha256"] == before
    # the very graph, and report, a migration into openid-map.db makes
    lmdb_dir = tmp_path / "lmdb"
    code, out = cli("--data-dir", str(lmdb_dir), "--app-id", APP, "--json", "migrate",
                    "--legacy", str(legacy))
    assert code == 0, out
    assert without_time(json.loads(out)) == without_time(report)
    on_lmdb, on_postgres = read_lmdb_rows(lmdb_dir / "openid-map.db"), read_rows(dsn)
    for rows in (on_lmdb, on_postgres):
        rows.meta.pop("schema_version", None)
        rows.meta["migrated_from_legacy"].pop("at")
    assert on_postgres == on_lmdb
    # the message-id counter went to msgid-map.db of the data dir (runtime_backend lmdb)
    assert (tmp_path / "data" / "msgid-map.db").is_file()
    # once only
    code, out = cli("--config", str(config), "--json", "migrate", "--legacy", str(legacy))
    assert code == 0 and json.loads(out)["status"] == "already_migrated", out


def test_a_postgres_graph_in_use_is_refused_before_converting(tmp_path: Path,
                                                               pg_schema: str) -> None:
    dsn = schema_dsn(pg_schema)
    with PgIdentityStore(dsn) as store:
        asyncio.run(IdentityGraph(store).resolve([OpenId(APP, "A11CE")]))
    code, out = cli("--config", str(config_for(tmp_path, pg_schema)), "migrate", "--legacy",
                    str(FIXTURES / "small-counter.db"))
    assert code == 1
    with PgIdentityStore(dsn, readonly=True) as store, store.read() as view:
        assert view.counts().identities == 1 and view.get_meta("migrated_from_legacy") is None


def test_a_dry_run_into_postgres_writes_nothing(tmp_path: Path, pg_schema: str) -> None:
    code, out = cli("--config", str(config_for(tmp_path, pg_schema)), "--json", "migrate",
                    "--dry-run", "--legacy", str(FIXTURES / "small-counter.db"))
    assert code == 0, out
    assert json.loads(out)["status"] == "dry_run"
    # the schema holds not even the tables: nothing was written
    assert target_state(schema_dsn(pg_schema)) is None
