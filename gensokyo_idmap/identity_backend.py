"""The identity store a config names: openid-map.db on LMDB (``idmap.backend: lmdb``, the
default) or the graph in PostgreSQL (``postgres``, at ``idmap.postgres_dsn``).

The one place that decides, so the daemon and every command open the same graph.
PostgreSQL's driver is imported only when it is configured (it is the ``postgres`` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gensokyo_idmap.config import Config

if TYPE_CHECKING:
    from gensokyo_idmap.store.lmdb_identity import LmdbIdentityStore
    from gensokyo_idmap.store.pg_identity import PgIdentityStore

__all__ = ["identity_store_location", "open_identity_store"]


def open_identity_store(config: Config, *, readonly: bool = False
                        ) -> LmdbIdentityStore | PgIdentityStore:
    """The configured identity store, open (PostgreSQL: its schema upgraded unless
    ``readonly``, which refuses one that needs it)."""
    if config.idmap.backend == "postgres":
        from gensokyo_idmap.store.pg_identity import PgIdentityStore

        return PgIdentityStore(config.idmap.postgres_dsn, readonly=readonly)
    from gensokyo_idmap.store.lmdb_identity import LmdbIdentityStore

    return LmdbIdentityStore(config.identity_db_path, readonly=readonly,
                             map_size=config.idmap.map_size_mb * 1024 * 1024)


def identity_store_location(config: Config) -> str:
    """Where the configured graph is, for logs and reports (no password)."""
    if config.idmap.backend == "postgres":
        from gensokyo_idmap.store.pg_connect import describe

        return describe(config.idmap.postgres_dsn)
    return str(config.identity_db_path)
