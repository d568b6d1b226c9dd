"""gensokyo-idmap: QQ official bot platform ↔ OneBot v11, with a durable identity graph.

The public surface is re-exported here; everything else is implementation. The graph and
the store are loaded on first use of their names, so ``import gensokyo_idmap.identity``
loads no backend (lmdb) and no metrics library (prometheus_client).
"""

from typing import TYPE_CHECKING, Any

from gensokyo_idmap.errors import (
    BadInputError,
    ConflictError,
    IdmapError,
    NotFoundError,
    NoUsableIdentityError,
    PlatformError,
    SchemaVersionError,
    StoreError,
)
from gensokyo_idmap.identity import (
    IdentityKey,
    OpenId,
    RawId,
    RUin,
    UnionId,
    VUin,
    format_ruin_text,
    parse_client_input,
    parse_key,
    parse_ruin_text,
    parse_vuin,
)

if TYPE_CHECKING:
    from gensokyo_idmap.idmap import IdentityGraph, Resolution, Usable, openid_of_app
    from gensokyo_idmap.store import IdentityStore, LmdbIdentityStore

__version__ = "0.1.0"

__all__ = [
    "BadInputError",
    "ConflictError",
    "IdentityGraph",
    "IdentityKey",
    "IdentityStore",
    "IdmapError",
    "LmdbIdentityStore",
    "NoUsableIdentityError",
    "NotFoundError",
    "OpenId",
    "PlatformError",
    "RUin",
    "RawId",
    "Resolution",
    "SchemaVersionError",
    "StoreError",
    "UnionId",
    "Usable",
    "VUin",
    "format_ruin_text",
    "openid_of_app",
    "parse_client_input",
    "parse_key",
    "parse_ruin_text",
    "parse_vuin",
]

#: Public names whose modules load on first use: name → module.
_LAZY = {
    "IdentityGraph": "gensokyo_idmap.idmap",
    "Resolution": "gensokyo_idmap.idmap",
    "Usable": "gensokyo_idmap.idmap",
    "openid_of_app": "gensokyo_idmap.idmap",
    "IdentityStore": "gensokyo_idmap.store.base",
    "LmdbIdentityStore": "gensokyo_idmap.store.lmdb.identity",
}


def __getattr__(name: str) -> Any:
    """PEP 562: the first ``gensokyo_idmap.IdentityGraph`` imports its module."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
