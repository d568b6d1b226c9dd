"""store copy, and backup / verify of a PostgreSQL graph: every table crosses between
openid-map.db and PostgreSQL unchanged, in one transaction, into an empty target only; what
a target could not hold refuses the whole copy, named; a PostgreSQL graph's backup is an
openid-map.db that verify checks and store copy restores."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from gensokyo_idmap.cli import main
from gensokyo_idmap.identity import OpenId, RawId
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.ops.store_copy import read_lmdb_rows
from gensokyo_idmap.store.base import MIGRATION_MARKER, LastSeen
from gensokyo_idmap.store.graph_rows import GraphRows
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore, LmdbView
from gensokyo_idmap.store.postgres.copy import read_rows, target_state
from gensokyo_idmap.store.postgres.identity import PgIdentityStore

from ..store_backends import fresh_schema, postgres_config, schema_dsn

APP = "102000001"


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner(env={"GSK_IDMAP__DATA_DIR": None, "GSK_BOT__APP_ID": None,
                            "GSK_IDMAP__POSTGRES_DSN": None}).invoke(main, list(args))
    return result.exit_code, result.output


def config_for(tmp_path: Path, schema: str) -> Path:
    return postgres_config(tmp_path / "config.yml", schema, app_id=APP,
                           data_dir=tmp_path / "pgdata")


def build_store(path: Path) -> None:
    """An openid-map.db with something in every table."""
    store = LmdbIdentityStore(path)
    graph = IdentityGraph(store)

    async def fill() -> None:
        alice = await graph.resolve([OpenId(APP, "A11CE")], scene=f"QQ:{APP}:group:G1")
        await graph.bind(RawId("alice-legacy"), alice.vuin)
        bob = await graph.resolve([OpenId(APP, "B0B")], scene=f"QQ:{APP}:c2c")
        await graph.rebind(bob.vuin, alice.vuin)
        for n in range(50):
            await graph.resolve([OpenId(APP, f"{n:032X}")], scene=f"QQ:{APP}:group:G{n % 3}")

    asyncio.run(fill())

    def legacy(view: LmdbView) -> None:
        view.put_config(b"12:type", b"group")
        view.put_config(b"stun:addr_v6", b"")
        view.put_user_info(b"\xff\x00binary", b'{"nickname":"x"}')
        view.set_meta(MIGRATION_MARKER, {"legacy_sha256": "ab" * 32, "at": 1.5})

    store.transact(legacy)
    store.close()


def graph_of(rows: GraphRows) -> dict[str, Any]:
    """Everything a copy must carry, comparable across backends."""
    return {"meta": rows.graph_meta(), "identities": rows.identities, "sets": rows.sets,
            "last_seen": rows.last_seen, "aliases": rows.aliases, "config": rows.config,
            "user_info": rows.user_info}


def test_a_copy_to_postgres_carries_every_table_and_back(tmp_path: Path, pg_schema: str) -> None:
    source = tmp_path / "data" / "openid-map.db"
    source.parent.mkdir()
    build_store(source)
    code, out = cli("--data-dir", str(source.parent), "--json", "store", "copy",
                    "--to", "postgres", "--postgres-dsn", schema_dsn(pg_schema))
    assert code == 0, out
    report = json.loads(out)
    before = read_lmdb_rows(source)
    assert report["status"] == "copied" and report["uncarried"] == []
    assert report["read"] == report["written"]
    assert report["read"]["identity_to_vuin"] == 53 and report["read"]["vuin_alias"] == 1
    assert report["read"]["config"] == 2 and report["read"]["user_info"] == 1
    assert graph_of(read_rows(schema_dsn(pg_schema))) == graph_of(before)
    # the daemon's store reads it as the graph it was
    with PgIdentityStore(schema_dsn(pg_schema), readonly=True) as store:
        alice = IdentityGraph(store).show(1)
        assert list(alice.identities) == [OpenId(APP, "A11CE").key, OpenId(APP, "B0B").key,
                                    RawId("alice-legacy").key]
        assert list(alice.aliases) == [2]
    # and back: the PostgreSQL graph into a new openid-map.db of another data dir
    config = config_for(tmp_path, pg_schema)
    code, out = cli("--config", str(config), "--json", "store", "copy", "--to", "lmdb")
    assert code == 0, out
    back = read_lmdb_rows(tmp_path / "pgdata" / "openid-map.db")
    assert graph_of(back) == graph_of(before)


def test_a_target_that_is_not_empty_is_refused_and_left_as_it_was(
        tmp_path: Path, pg_schema: str) -> None:
    source = tmp_path / "openid-map.db"
    build_store(source)
    with PgIdentityStore(schema_dsn(pg_schema)) as store:
        asyncio.run(IdentityGraph(store).resolve([OpenId(APP, "CAFE")]))
    before = graph_of(read_rows(schema_dsn(pg_schema)))
    code, out = cli("store", "copy", "--to", "postgres", "--from", str(source),
                    "--postgres-dsn", schema_dsn(pg_schema))
    assert code == 1
    assert "is not empty (1 meta, 1 identity_to_vuin, 1 vuin_to_identity)" in out
    assert "nothing was written" in out
    assert graph_of(read_rows(schema_dsn(pg_schema))) == before


def test_records_a_target_cannot_hold_are_all_named_and_nothing_is_written(
        tmp_path: Path, pg_schema: str) -> None:
    source = tmp_path / "openid-map.db"
    build_store(source)

    def damage(view: LmdbView) -> None:
        view.set_vuin(OpenId(APP, "0DD").key, 7)  # not in vUIN 7's set
        view.set_last_seen(1, "QQ:bad\x00scene", LastSeen(OpenId(APP, "A11CE").key, 1.0))

    store = LmdbIdentityStore(source)
    store.transact(damage)
    store.close()
    code, out = cli("--json", "store", "copy", "--to", "postgres", "--from", str(source),
                    "--postgres-dsn", schema_dsn(pg_schema))
    assert code == 1, out
    report = json.loads(out)
    assert report["status"] == "refused" and report["written"] == {}
    assert [(u["table"], u["reason"]) for u in report["uncarried"]] == [
        ("last_seen", "the scene holds a NUL character, which PostgreSQL text cannot"),
        ("identity_to_vuin", "vUIN 7's set does not list it"),
    ]
    assert target_state(schema_dsn(pg_schema)) is None  # not even the tables were made


def test_a_postgres_backup_verifies_and_restores_into_a_new_schema(
        tmp_path: Path, pg_schema: str) -> None:
    source = tmp_path / "openid-map.db"
    build_store(source)
    config = config_for(tmp_path, pg_schema)
    assert cli("store", "copy", "--to", "postgres", "--from", str(source),
               "--postgres-dsn", schema_dsn(pg_schema))[0] == 0
    code, out = cli("--config", str(config), "verify")
    assert code == 0 and out.startswith("ok: ") and "53 identities" in out, out
    backup = tmp_path / "graph-backup.db"
    code, out = cli("--config", str(config), "--json", "backup", str(backup))
    assert code == 0, out
    assert json.loads(out)["verify"]["ok"] is True
    assert cli("verify", str(backup))[0] == 0
    assert cli("--config", str(config), "backup", str(backup))[0] == 2  # exists: --force
    with fresh_schema(create=True) as restored:
        code, out = cli("store", "copy", "--to", "postgres", "--from", str(backup),
                        "--postgres-dsn", schema_dsn(restored))
        assert code == 0, out
        assert graph_of(read_rows(schema_dsn(restored))) == graph_of(read_lmdb_rows(source))


def test_verify_finds_a_broken_postgres_graph(tmp_path: Path, pg_schema: str) -> None:
    config = config_for(tmp_path, pg_schema)
    with PgIdentityStore(schema_dsn(pg_schema)) as store:
        asyncio.run(IdentityGraph(store).resolve([OpenId(APP, "A11CE")]))

        def dead_end(view: Any) -> None:
            view.set_alias(5, 99)  # 99 has no identities

        store.write_sync(dead_end)
    code, out = cli("--config", str(config), "--json", "verify")
    assert code == 1, out
    assert json.loads(out)["violation_counts"] == {"alias_dead_end": 1}


def test_no_password_in_the_errors_of_an_unreachable_postgres(tmp_path: Path) -> None:
    config = tmp_path / "config.yml"
    config.write_text(f'bot:\n  app_id: "{APP}"\nidmap:\n  backend: postgres\n'
                      "  postgres_dsn: postgresql://gsk:s3cret@127.0.0.1:1/none\n",
                      encoding="utf-8")
    for command in (["verify"], ["backup", str(tmp_path / "b.db")],
                    ["store", "copy", "--to", "lmdb"]):
        code, out = cli("--config", str(config), *command)
        assert code == 1, (command, out)
        assert "PostgreSQL at postgresql://***@127.0.0.1:1/none cannot be reached" in out
        assert "s3cret" not in out
