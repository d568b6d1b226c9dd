"""The identity store a config names: openid-map.db on LMDB (``idmap.backend: lmdb``, the
default) or the graph in PostgreSQL (``postgres``, at ``idmap.postgres_dsn``).

The one place that decides, so the daemon and every command open the same graph.
PostgreSQL's driver is imported only when it is configured (it is the ``postgres`` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gensokyo_idmap.config import Config

if TYPE_CHECKING:
    from gensokyo_idmap.store.identity_cache import CachedIdentityStore
    from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
    from gensokyo_idmap.store.postgres.identity import PgIdentityStore

__all__ = ["cached_identity_store", "identity_store_location", "open_identity_store"]


def open_identity_store(config: Config, *, readonly: bool = False,
                        wait_for_server: bool = False) -> LmdbIdentityStore | PgIdentityStore:
    """The configured identity store, open (PostgreSQL: its schema upgraded unless
    ``readonly``, which refuses one that needs it; ``wait_for_server``: a server that cannot
    be reached leaves the store in an outage until ``PgIdentityStore.reach`` opens it)."""
    if config.idmap.backend == "postgres":
        from gensokyo_idmap.store.postgres.identity import PgIdentityStore

        return PgIdentityStore(config.idmap.postgres_dsn, readonly=readonly,
                               wait_for_server=wait_for_server)
    from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore

    return LmdbIdentityStore(config.identity_db_path, readonly=readonly,
                             map_size=config.idmap.map_size_mb * 1024 * 1024)


def identity_store_location(config: Config) -> str:
    """Where the configured graph is, for logs and reports (no password)."""
    if config.idmap.backend == "postgres":
        from gensokyo_idmap.store.postgres.connect import describe

        return describe(config.idmap.postgres_dsn)
    return str(config.identity_db_path)


def cached_identity_store(config: Config, store: LmdbIdentityStore | PgIdentityStore, *,
                          listen: bool = True
                          ) -> LmdbIdentityStore | PgIdentityStore | CachedIdentityStore:
    """``store`` behind this daemon's identity cache when the graph is shared (PostgreSQL,
    with ``idmap.redis_url`` to keep the caches of every daemon true,
    :mod:`~gensokyo_idmap.store.identity_cache`); else ``store`` itself: LMDB answers a
    probe from memory already, and without Redis no daemon would hear another's binds.

    ``listen=False`` (a CLI command) publishes its writes' invalidations and caches nothing.
    Closing the returned store stops the channel (queued invalidations sent), then closes
    ``store``; ``store`` is closed here if the cache cannot be set up.
    """
    idmap = config.idmap
    if idmap.backend != "postgres" or not idmap.redis_url or not idmap.identity_cache_size:
        return store
    # imported here: redis-py is an optional extra
    from gensokyo_idmap.runtime.redis.invalidation import RedisInvalidations
    from gensokyo_idmap.store.identity_cache import CachedIdentityStore, IdentityCache

    cache = IdentityCache(idmap.identity_cache_size, idmap.identity_cache_max_age_seconds)
    try:
        channel = RedisInvalidations(idmap.redis_url, idmap.redis_prefix, cache)
    except BaseException:
        store.close()  # the caller was to get it with its closing: nobody else will
        raise
    cached = CachedIdentityStore(store, cache, channel.publish)
    cached.on_close(channel.close)
    channel.start(listen=listen)
    return cached
