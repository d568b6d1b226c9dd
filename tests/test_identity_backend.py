"""The configured identity store: LMDB by default, PostgreSQL when idmap.backend says so."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gensokyo_idmap.config import Config
from gensokyo_idmap.identity_backend import identity_store_location, open_identity_store
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.store.postgres.identity import PgIdentityStore

from .store_backends import PG_DSN, fresh_schema, set_both


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema(create=True) as name:
        yield name


def test_lmdb_is_the_default(tmp_path: Path) -> None:
    config = Config.model_validate({"idmap": {"data_dir": str(tmp_path)}})
    store = open_identity_store(config)
    try:
        assert isinstance(store, LmdbIdentityStore)
        assert store.path == tmp_path / "openid-map.db"
    finally:
        store.close()
    assert identity_store_location(config) == str(tmp_path / "openid-map.db")


def test_postgres_opens_the_graph_the_dsn_names(tmp_path: Path, schema: str) -> None:
    """The DSN alone says where (its search_path here): the daemon's graph is the one the
    operator's DSN names, schema upgraded at open."""
    dsn = f"{PG_DSN}?options=-csearch_path%3D{schema}"
    config = Config.model_validate({"idmap": {"data_dir": str(tmp_path), "backend": "postgres",
                                              "postgres_dsn": dsn}})
    store = open_identity_store(config)
    try:
        assert isinstance(store, PgIdentityStore)
        store.write_sync(lambda view: set_both(view, "raw:A", 1))
    finally:
        store.close()
    with PgIdentityStore(PG_DSN, schema=schema, readonly=True) as mine, mine.read() as view:
        assert view.vuin_of("raw:A") == 1
    assert not (tmp_path / "openid-map.db").exists()
    assert identity_store_location(config) == dsn


def test_the_location_of_postgres_hides_the_password() -> None:
    config = Config.model_validate({"idmap": {"backend": "postgres",
                                              "postgres_dsn": "postgresql://gsk:s3cret@db/gsk"}})
    assert "s3cret" not in identity_store_location(config)
