"""Storage behind small interfaces: the domain code never imports a backend."""

from gensokyo_idmap.store.base import IdentityReader, IdentityStore, IdentityWriter, LastSeen
from gensokyo_idmap.store.lmdb_identity import LmdbIdentityStore

__all__ = ["IdentityReader", "IdentityStore", "IdentityWriter", "LastSeen", "LmdbIdentityStore"]
