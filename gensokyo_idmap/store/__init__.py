"""Storage behind small interfaces: the domain code never imports a backend.

The interfaces are :mod:`.base`; beside them, what every backend may use
(:mod:`.group_commit`, :mod:`.identity_cache`, :mod:`.graph_rows`, :mod:`.serve_lock`).
Each backend is a package of its own that imports no other: :mod:`.lmdb` (the embedded
default), :mod:`.postgres` (a graph shared by several daemons). The runtime state (message
ids, claims, reply budgets; Redis) is :mod:`gensokyo_idmap.runtime`.

The LMDB backend loads on first use of ``LmdbIdentityStore``: importing the interfaces
(``gensokyo_idmap.store.base``) must not load lmdb.
"""

from typing import TYPE_CHECKING, Any

from gensokyo_idmap.store.base import IdentityReader, IdentityStore, IdentityWriter, LastSeen

if TYPE_CHECKING:
    from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore

__all__ = ["IdentityReader", "IdentityStore", "IdentityWriter", "LastSeen", "LmdbIdentityStore"]


def __getattr__(name: str) -> Any:
    """PEP 562: the first ``gensokyo_idmap.store.LmdbIdentityStore`` imports the backend."""
    if name != "LmdbIdentityStore":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore

    globals()[name] = LmdbIdentityStore
    return LmdbIdentityStore
