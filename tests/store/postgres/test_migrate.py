"""PostgreSQL schema migrations: applied once each, recorded with their SHA-256, and a
database that ran something else refused with the version named; ``db upgrade | status``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from gensokyo_idmap.cli import main
from gensokyo_idmap.errors import SchemaVersionError, StoreError
from gensokyo_idmap.store.postgres.connect import connect
from gensokyo_idmap.store.postgres.migrate import (
    AppliedMigration,
    Migration,
    check_applied,
    known_migrations,
    migration_status,
    upgrade,
)

from ...store_backends import PG_DSN, fresh_schema


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema() as name:
        yield name


def _run(conn: psycopg.Connection, query: str) -> None:  # type: ignore[type-arg]
    conn.execute(query.encode())


# --- pure: the prefix rule ----------------------------------------------------------------

KNOWN = (Migration(1, "a", "CREATE TABLE a ();"), Migration(2, "b", "CREATE TABLE b ();"))


def _row(m: Migration, sha: str | None = None) -> AppliedMigration:
    return AppliedMigration(m.version, m.name, sha or m.sha256)


def test_a_prefix_with_equal_checksums_leaves_the_rest_pending() -> None:
    assert check_applied(KNOWN, ()) == KNOWN
    assert check_applied(KNOWN, (_row(KNOWN[0]),)) == KNOWN[1:]
    assert check_applied(KNOWN, tuple(_row(m) for m in KNOWN)) == ()


def test_an_unknown_newer_migration_is_refused_by_version() -> None:
    newer = AppliedMigration(3, "c", "f" * 64)
    with pytest.raises(SchemaVersionError, match="0003 c applied, which this gensokyo-idmap "
                                                 "does not know"):
        check_applied(KNOWN, (_row(KNOWN[0]), _row(KNOWN[1]), newer))


def test_a_gap_is_refused() -> None:
    with pytest.raises(StoreError, match="0002 b is applied where 0001 should be"):
        check_applied(KNOWN, (_row(KNOWN[1]),))


def test_a_changed_checksum_is_refused_naming_the_version() -> None:
    with pytest.raises(StoreError, match="migration 0002 b was applied with SHA-256 000000"):
        check_applied(KNOWN, (_row(KNOWN[0]), _row(KNOWN[1], "0" * 64)))


def test_the_shipped_migrations_are_numbered_without_a_gap() -> None:
    known = known_migrations()
    assert [m.version for m in known] == list(range(1, len(known) + 1))
    assert known[0].name == "identity_graph"


# --- on a real server ------------------------------------------------------------------------


def test_upgrade_applies_each_once_and_records_the_checksums(schema: str) -> None:
    with connect(PG_DSN, schema) as conn:
        known = known_migrations()
        assert [m.version for m in upgrade(conn, schema)] == [m.version for m in known]
        assert upgrade(conn, schema) == ()
        rows = conn.execute("SELECT version, name, sha256 FROM schema_migrations "
                            "ORDER BY version").fetchall()
        assert rows == [(m.version, m.name, m.sha256) for m in known]
        status = migration_status(conn)
        assert status.current == known[-1].version and status.pending == ()


def test_db_upgrade_and_status_commands(schema: str) -> None:
    runner = CliRunner()
    base = ["db", "--postgres-dsn", PG_DSN, "--schema", schema]
    status = runner.invoke(main, [*base, "status"])
    assert status.exit_code == 0, status.output
    known = known_migrations()
    assert "0001 identity_graph" in status.output and f"{len(known)} pending" in status.output
    done = runner.invoke(main, [*base, "upgrade", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output) == {"applied": [m.label for m in known],
                                       "version": known[-1].version}
    again = runner.invoke(main, [*base, "status", "--json"])
    assert {m["state"] for m in json.loads(again.output)["migrations"]} == {"applied"}
    with connect(PG_DSN, schema) as conn:
        _run(conn, "UPDATE schema_migrations SET sha256 = repeat('c', 64) WHERE version = 2")
    refused = runner.invoke(main, [*base, "status"])
    assert refused.exit_code == 1
    assert "migration 0002 legacy_tables was applied with SHA-256 cccccccccccc" in refused.output


def test_db_takes_the_dsn_from_the_config_file(schema: str, tmp_path: Path) -> None:
    config = tmp_path / "config.yml"
    config.write_text(f"idmap:\n  backend: postgres\n  postgres_dsn: {PG_DSN}\n")
    result = CliRunner().invoke(main, ["db", "--config", str(config), "--schema", schema,
                                       "upgrade"])
    assert result.exit_code == 0, result.output
    assert f"schema at version {known_migrations()[-1].version:04d}" in result.output


def test_db_without_a_dsn_is_bad_input() -> None:
    result = CliRunner(env={"GSK_IDMAP__POSTGRES_DSN": None}).invoke(main, ["db", "status"])
    assert result.exit_code == 2
    assert "--postgres-dsn" in result.output


def test_an_unreachable_server_is_a_store_error_without_the_password() -> None:
    result = CliRunner().invoke(main, ["db", "--postgres-dsn",
                                       "postgresql://gsk:s3cretpw@127.0.0.1:1/x", "status"])
    assert result.exit_code == 1
    assert "cannot be reached" in result.output and "s3cretpw" not in result.output
