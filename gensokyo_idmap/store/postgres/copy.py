"""The whole PostgreSQL identity graph in and out at once: ``store copy``, ``backup`` and
``verify`` on ``idmap.backend: postgres``.

Loading (:func:`load_rows`) takes one transaction: the schema is upgraded first (as the
daemon would), then every table of the graph is locked against other writers, found empty
(else :class:`ConflictError`, nothing written), filled with ``COPY … FROM STDIN`` (one
stream per table instead of a statement per row: tens of thousands of rows a second), and
counted again before ``COMMIT``. A kill at any moment leaves the schema as empty as it was.

Reading (:func:`read_rows`) takes one ``REPEATABLE READ READ ONLY`` snapshot, so a dump
is consistent while daemons keep writing; it never migrates a schema.
"""

from __future__ import annotations

from typing import Any, Final, LiteralString, cast

import psycopg
from psycopg.types.json import Jsonb

from gensokyo_idmap.errors import ConflictError, StoreError
from gensokyo_idmap.redaction import redact_url
from gensokyo_idmap.store.base import MIGRATION_MARKER, LastSeen
from gensokyo_idmap.store.graph_rows import TABLES, GraphRows
from gensokyo_idmap.store.postgres.connect import connect, describe
from gensokyo_idmap.store.postgres.migrate import migration_status, upgrade

__all__ = ["TargetState", "load_rows", "read_rows", "target_state"]

_LOCK: Final = ("LOCK TABLE meta, identity_to_vuin, vuin_to_identity, last_seen, vuin_alias, "
                "config, user_info IN SHARE ROW EXCLUSIVE MODE")
_COUNTS: Final = (
    "SELECT (SELECT count(*) FROM meta), (SELECT count(*) FROM identity_to_vuin), "
    "(SELECT count(*) FROM vuin_to_identity), (SELECT count(*) FROM last_seen), "
    "(SELECT count(*) FROM vuin_alias), (SELECT count(*) FROM config), "
    "(SELECT count(*) FROM user_info)")
#: A schema fresh from its migrations holds this one meta row, and nothing else.
_FRESH_META: Final = {"vuin_counter": 0}
_COPIES: Final[tuple[tuple[LiteralString, str], ...]] = (
    ("COPY identity_to_vuin (key, vuin) FROM STDIN", "identities"),
    ("COPY vuin_to_identity (vuin, key) FROM STDIN", "sets"),
    ("COPY vuin_alias (old, new) FROM STDIN", "aliases"),
    ("COPY config (key, value) FROM STDIN", "config"),
    ("COPY user_info (key, value) FROM STDIN", "user_info"),
)

Conn = psycopg.Connection[tuple[Any, ...]]


class TargetState:
    """What a PostgreSQL graph holds already: whether a copy may go there."""

    __slots__ = ("counts", "marker", "meta")

    def __init__(self, counts: dict[str, int], meta: dict[str, Any]) -> None:
        self.counts = counts
        self.meta = meta
        self.marker: Any = meta.get(MIGRATION_MARKER)

    @property
    def empty(self) -> bool:
        rows = {table: n for table, n in self.counts.items() if table != "meta"}
        return not any(rows.values()) and self.meta in ({}, _FRESH_META)

    def refusal(self, where: str) -> ConflictError:
        held = ", ".join(f"{n} {table}" for table, n in self.counts.items() if n) or "meta"
        return ConflictError(
            f"the PostgreSQL graph at {where} is not empty ({held}): a copy goes into an "
            "empty schema only, so nothing was written. Copy into a new schema (or drop "
            "this one's tables first, if it is really not needed)")


def _table_counts(conn: Conn) -> dict[str, int]:
    row = conn.execute(_COUNTS).fetchone()
    assert row is not None
    return dict(zip(TABLES, (int(n) for n in row), strict=True))


def _state(conn: Conn) -> TargetState:
    meta = {str(name): value for name, value in conn.execute("SELECT name, value FROM meta")}
    return TargetState(_table_counts(conn), meta)


def target_state(dsn: str, schema: str | None = None) -> TargetState | None:
    """What the graph at ``dsn`` holds, or None when its schema has no tables yet (a copy
    would create them). Reads only: a schema needing an upgrade is read as it is."""
    with connect(dsn, schema) as conn:
        if not migration_status(conn).applied:
            return None
        with conn.transaction():
            return _state(cast(Conn, conn))


def load_rows(dsn: str, rows: GraphRows, schema: str | None = None) -> dict[str, int]:
    """Write ``rows`` (already checked by :func:`graph_rows.uncarriable`) into the empty
    graph at ``dsn`` in one transaction; the rows each table then holds."""
    try:
        with connect(dsn, schema) as opened:
            conn = cast(Conn, opened)
            upgrade(opened, schema)
            with conn.transaction():
                conn.execute(_LOCK)
                state = _state(conn)
                if not state.empty:
                    raise state.refusal(describe(dsn))
                _copy_in(conn, rows)
                written = _table_counts(conn)
                expected = rows.counts()
                expected["meta"] = len(rows.graph_meta() | _FRESH_META)
                if written != expected:
                    raise StoreError(f"the copy into {describe(dsn)} holds {written} rows, "
                                     f"not the {expected} read: rolled back, nothing written")
    except psycopg.Error as exc:
        reason = redact_url(" ".join(str(exc).split())) or type(exc).__name__
        raise StoreError(f"the copy into PostgreSQL at {describe(dsn)} failed, nothing was "
                         f"written: {reason}") from exc
    return written


def _copy_in(conn: Conn, rows: GraphRows) -> None:
    with conn.cursor() as cursor:
        for statement, attribute in _COPIES:
            with cursor.copy(statement) as copy:
                for row in getattr(rows, attribute):
                    copy.write_row(row)
        with cursor.copy("COPY last_seen (vuin, scene, identity, since) FROM STDIN") as copy:
            for vuin, scene, seen in rows.last_seen:
                copy.write_row((vuin, scene, seen.identity, seen.since))
        for name, value in rows.graph_meta().items():
            cursor.execute("INSERT INTO meta (name, value) VALUES (%s, %s) ON CONFLICT (name) "
                           "DO UPDATE SET value = EXCLUDED.value", (name, Jsonb(value)))


def read_rows(dsn: str, schema: str | None = None) -> GraphRows:
    """Every row of the graph at ``dsn``, from one snapshot (read-only; a schema this
    gensokyo-idmap does not know, or one not created yet, is refused)."""
    try:
        with connect(dsn, schema) as conn:
            status = migration_status(conn)
            if not status.applied:
                raise StoreError(f"PostgreSQL at {describe(dsn)} holds no identity graph "
                                 "(no schema_migrations): nothing to read")
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            try:
                return _read(cast(Conn, conn), has_legacy=len(status.applied) >= 2)
            finally:
                conn.execute("ROLLBACK")
    except psycopg.Error as exc:
        reason = redact_url(" ".join(str(exc).split())) or type(exc).__name__
        raise StoreError(f"reading the graph at PostgreSQL {describe(dsn)} failed: "
                         f"{reason}") from exc


def _read(conn: Conn, *, has_legacy: bool) -> GraphRows:
    rows = GraphRows()
    rows.meta = {str(n): v for n, v in conn.execute("SELECT name, value FROM meta ORDER BY name")}
    rows.identities = [(str(k), int(v)) for k, v in conn.execute(
        "SELECT key, vuin FROM identity_to_vuin ORDER BY key")]
    rows.sets = [(int(v), str(k)) for v, k in conn.execute(
        "SELECT vuin, key FROM vuin_to_identity ORDER BY vuin, key")]
    rows.last_seen = [(int(v), str(s), LastSeen(str(i), float(t))) for v, s, i, t in conn.execute(
        "SELECT vuin, scene, identity, since FROM last_seen ORDER BY vuin, scene")]
    rows.aliases = [(int(o), int(n)) for o, n in conn.execute(
        "SELECT old, new FROM vuin_alias ORDER BY old")]
    if has_legacy:
        rows.config = [(bytes(k), bytes(v)) for k, v in conn.execute(
            "SELECT key, value FROM config ORDER BY key")]
        rows.user_info = [(bytes(k), bytes(v)) for k, v in conn.execute(
            "SELECT key, value FROM user_info ORDER BY key")]
    return rows
