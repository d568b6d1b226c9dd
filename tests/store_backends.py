"""Every identity-store backend, for the contract tests: LMDB in a temp dir, PostgreSQL in a
schema of the test's own (created fresh, dropped after).

PostgreSQL is ``GSK_TEST_POSTGRES_DSN`` (default ``postgresql://127.0.0.1:5432/test``). When it
does not answer, the PostgreSQL cases are skipped with the reason; nothing else is.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

PG_DSN = os.environ.get("GSK_TEST_POSTGRES_DSN", "postgresql://127.0.0.1:5432/test")
BACKENDS = ["lmdb", "postgres"]

#: Opens the store under test again (the same file or schema): ``open_store()``.
StoreFactory = Callable[[], Any]


@functools.cache
def postgres_unreachable() -> str | None:
    """Why PostgreSQL cannot be used by the tests, or None."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (make test installs it: requirements/dev.txt)"
    try:
        psycopg.connect(PG_DSN, connect_timeout=5).close()
    except psycopg.Error as exc:
        return " ".join(str(exc).split())
    return None


def require_postgres() -> None:
    reason = postgres_unreachable()
    if reason is not None:
        pytest.skip(f"PostgreSQL at {PG_DSN} does not answer: {reason}")


@contextmanager
def fresh_schema(*, create: bool = False) -> Iterator[str]:
    """A schema name nobody else uses, the schema created when ``create`` (a DSN naming it
    in its search_path needs it to exist); dropped after (if anything created it)."""
    import psycopg

    require_postgres()
    name = f"gsk_test_{uuid.uuid4().hex[:16]}"
    try:
        if create:
            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                conn.execute(f"CREATE SCHEMA {name}")
        yield name
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def schema_dsn(schema: str) -> str:
    """The test DSN with ``schema`` as its search_path: what a config's postgres_dsn says."""
    return f"{PG_DSN}?options=-csearch_path%3D{schema}"


def postgres_config(path: Path, schema: str, *, app_id: str, data_dir: Path) -> Path:
    """Write a config file at ``path`` whose identity graph is in ``schema``."""
    path.write_text(f'bot:\n  app_id: "{app_id}"\nidmap:\n  data_dir: {data_dir}\n'
                    f"  backend: postgres\n  postgres_dsn: {schema_dsn(schema)}\n",
                    encoding="utf-8")
    return path


@contextmanager
def store_factory(backend: str, tmp_path: Path) -> Iterator[StoreFactory]:
    """A function opening the same identity store of ``backend`` each time it is called."""
    if backend == "lmdb":
        from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore

        path = tmp_path / "openid-map.db"
        yield lambda **kw: LmdbIdentityStore(path, **kw)
        return
    from gensokyo_idmap.store.postgres.identity import PgIdentityStore

    with fresh_schema() as schema:
        yield lambda **kw: PgIdentityStore(PG_DSN, schema=schema, pool_size=4, **kw)


@pytest.fixture(params=BACKENDS)
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Opens the one store of this test; one test run per backend. A module uses it (and
    :func:`identity_store`) by importing it."""
    with store_factory(request.param, tmp_path) as factory:
        yield factory


@pytest.fixture
def identity_store(open_store: StoreFactory) -> Iterator[Any]:
    """The test's store, open (one per backend); in tests/test_idmap.py also the store of
    the conftest's ``graph``."""
    store = open_store()
    yield store
    store.close()


def set_both(view: Any, key: str, vuin: int) -> None:
    """``key`` → ``vuin`` in both directions (PostgreSQL refuses a half-written pair)."""
    view.set_vuin(key, vuin)
    view.add_identity(vuin, key)
