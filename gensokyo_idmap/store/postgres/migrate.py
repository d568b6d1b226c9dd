"""Schema migrations of the PostgreSQL identity graph: known, applied, checked, applied now.

The known migrations are the ``NNNN_<name>.sql`` files of :mod:`.schema`. A database
records each one it ran in ``schema_migrations`` (version, name, SHA-256 of the SQL). We work
on a database only when what it ran is a prefix of what we know, byte for byte: a version
we do not know means a newer gensokyo-idmap wrote it; a checksum that differs means the
schema is not the one this code was written against (an edited file, a hand-made change
recorded as a migration). Both are refused with the version named, never guessed around.

Upgrading takes a transaction-scoped advisory lock, so daemons started at once apply each
migration once; PostgreSQL's DDL is transactional, so a failed upgrade leaves nothing half
done.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Final

import psycopg
from psycopg import sql

from gensokyo_idmap.errors import SchemaVersionError, StoreError

__all__ = [
    "AppliedMigration",
    "Migration",
    "MigrationStatus",
    "check_applied",
    "known_migrations",
    "migration_status",
    "upgrade",
]

_FILE_NAME: Final = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")
#: pg_advisory_xact_lock key of schema upgrades ("gsk-migr" as an int64).
_UPGRADE_LOCK: Final = int.from_bytes(b"gsk-migr", "big", signed=True)
_CREATE_TABLE: Final = sql.SQL("""
    CREATE TABLE IF NOT EXISTS schema_migrations (
        version    integer PRIMARY KEY,
        name       text NOT NULL,
        sha256     text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
    )""")


@dataclass(frozen=True, slots=True)
class Migration:
    """One known migration file."""

    version: int
    name: str
    sql: str = field(repr=False)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()

    @property
    def label(self) -> str:
        return f"{self.version:04d} {self.name}"


@dataclass(frozen=True, slots=True)
class AppliedMigration:
    """One row of ``schema_migrations``."""

    version: int
    name: str
    sha256: str


@dataclass(frozen=True, slots=True)
class MigrationStatus:
    applied: tuple[AppliedMigration, ...]
    pending: tuple[Migration, ...]

    @property
    def current(self) -> int:
        return self.applied[-1].version if self.applied else 0


def known_migrations() -> tuple[Migration, ...]:
    """The migration files shipped with this gensokyo-idmap, in version order, numbered
    1, 2, 3 … without a gap (a packaging mistake is caught here, not in a database)."""
    found: list[Migration] = []
    for entry in resources.files("gensokyo_idmap.store.postgres.schema").iterdir():
        match = _FILE_NAME.fullmatch(entry.name)
        if match is not None:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    for expected, migration in enumerate(found, start=1):
        if migration.version != expected:
            raise StoreError(f"the shipped migrations skip version {expected:04d}: a broken "
                             "install of gensokyo-idmap")
    return tuple(found)


def check_applied(known: tuple[Migration, ...],
                  applied: tuple[AppliedMigration, ...]) -> tuple[Migration, ...]:
    """The known migrations not applied yet, once ``applied`` is shown to be a prefix of
    ``known`` with equal checksums; else the error naming the first version that differs.
    """
    for position, row in enumerate(applied):
        label = f"{row.version:04d} {row.name}"
        if position >= len(known) or row.version != known[position].version:
            if row.version > len(known):
                raise SchemaVersionError(
                    f"the database has migration {label} applied, which this gensokyo-idmap "
                    f"does not know (it knows up to {len(known):04d}): run a newer "
                    "gensokyo-idmap, or restore a backup")
            raise StoreError(
                f"the database's migrations are not in order: {label} is applied where "
                f"{position + 1:04d} should be; refusing a schema this code did not make")
        mine = known[position]
        if row.sha256 != mine.sha256:
            raise StoreError(
                f"migration {label} was applied with SHA-256 {row.sha256[:12]}…, but this "
                f"gensokyo-idmap's {mine.label} has {mine.sha256[:12]}…: the schema is not "
                "the one this code knows; refusing it")
    return known[len(applied):]


def _applied(conn: psycopg.Connection[tuple[object, ...]]) -> tuple[AppliedMigration, ...]:
    present = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()
    if not present or not present[0]:
        return ()
    rows = conn.execute(
        "SELECT version, name, sha256 FROM schema_migrations ORDER BY version").fetchall()
    return tuple(AppliedMigration(int(str(v)), str(n), str(s)) for v, n, s in rows)


def migration_status(conn: psycopg.Connection[tuple[object, ...]]) -> MigrationStatus:
    """What the database (its schema on ``search_path``) has applied and what is pending;
    reads only. Raises as :func:`check_applied` for a database we must refuse."""
    applied = _applied(conn)
    return MigrationStatus(applied, check_applied(known_migrations(), applied))


def upgrade(conn: psycopg.Connection[tuple[object, ...]],
            schema: str | None = None) -> tuple[Migration, ...]:
    """Apply every pending migration in one transaction (creating ``schema`` first when
    given); returns what was applied. ``conn`` is in autocommit mode, its ``search_path``
    set to ``schema``."""
    known = known_migrations()
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_UPGRADE_LOCK,))
        if schema is not None:
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        pending = check_applied(known, _applied(conn))  # read under the lock
        if pending:
            conn.execute(_CREATE_TABLE)
        for migration in pending:
            conn.execute(migration.sql.encode("utf-8"))  # bytes: no parameter parsing
            conn.execute("INSERT INTO schema_migrations (version, name, sha256) "
                         "VALUES (%s, %s, %s)",
                         (migration.version, migration.name, migration.sha256))
    return pending
