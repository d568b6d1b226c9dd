"""Reaching PostgreSQL: a connection pool set up the way every store of ours needs it.

Every connection is in autocommit mode (transactions are begun and ended explicitly by the
store, so a read never holds one open by accident), has ``synchronous_commit`` on (a
commit returns after the WAL reached the disk: rule 3, durable before returned, whatever
the server's default), and sees only its schema (``search_path``), so tests and several
graphs can share one database.

A DSN may hold a password: it never appears in a message (:func:`describe`).
"""

from __future__ import annotations

import re
from typing import Final

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolTimeout

from gensokyo_idmap.errors import BadInputError, StoreError, UnreachableError
from gensokyo_idmap.redaction import describe_dsn as describe
from gensokyo_idmap.redaction import redact_url
from gensokyo_idmap.store.postgres.connection import PgConnection

__all__ = ["check_schema_name", "connect", "describe", "open_pool", "unreachable"]

#: How long opening waits for the first connection, and a caller for a free one.
CONNECT_TIMEOUT: Final = 10.0
_SCHEMA_NAME: Final = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def check_schema_name(schema: str) -> str:
    """A schema name we create and quote ourselves: lower-case letters, digits, ``_``."""
    if not _SCHEMA_NAME.fullmatch(schema):
        raise BadInputError("schema", schema,
                            "must be 1 to 63 lower-case letters, digits or '_', not a digit first")
    return schema


def unreachable(dsn: str, exc: BaseException) -> UnreachableError:
    """The error for a server that does not answer (or refuses us); no password in it.

    A refusal too (a wrong password, no such database): libpq says why only in its text
    (no SQLSTATE), which also holds refusals that pass (starting up, too many clients); the
    daemon waits for all of them alike, naming the reason."""
    reason = " ".join(redact_url(str(exc)).split())  # libpq's text spans lines
    return UnreachableError(f"PostgreSQL at {describe(dsn)} cannot be reached: "
                            f"{reason or type(exc).__name__}")


def _prepare(schema: str | None) -> list[sql.SQL | sql.Composed]:
    statements: list[sql.SQL | sql.Composed] = [sql.SQL("SET synchronous_commit TO on")]
    if schema is not None:
        statements.append(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    return statements


def connect(dsn: str, schema: str | None = None) -> psycopg.Connection[tuple[object, ...]]:
    """One connection, set up as the pool's are (migrations, CLI commands)."""
    try:
        conn = psycopg.connect(dsn, autocommit=True, connect_timeout=int(CONNECT_TIMEOUT))
    except psycopg.Error as exc:
        raise unreachable(dsn, exc) from None
    try:
        for statement in _prepare(schema):
            conn.execute(statement)
    except BaseException:
        conn.close()
        raise
    return conn


def open_pool(dsn: str, schema: str | None = None, *, max_size: int = 8,
              name: str = "gensokyo-idmap") -> ConnectionPool:
    """A pool of set-up connections, its first connection made before this returns (so a
    wrong DSN or a server that is down is an error now, not at the first event)."""
    statements = _prepare(schema)

    def configure(conn: psycopg.Connection[tuple[object, ...]]) -> None:
        for statement in statements:
            conn.execute(statement)

    pool: ConnectionPool = ConnectionPool(
        dsn, connection_class=PgConnection, min_size=1, max_size=max_size, open=False,
        name=name, timeout=CONNECT_TIMEOUT,
        configure=configure,
        kwargs={"autocommit": True, "connect_timeout": int(CONNECT_TIMEOUT)})
    try:
        pool.open(wait=True, timeout=CONNECT_TIMEOUT)
    except PoolTimeout:
        pool.close()
        try:  # the pool only says it timed out: one direct attempt says why
            connect(dsn, schema).close()
        except StoreError as exc:
            raise exc from None
        raise UnreachableError(f"PostgreSQL at {describe(dsn)} cannot be reached: no "
                               f"connection within {CONNECT_TIMEOUT:g} s") from None
    return pool
