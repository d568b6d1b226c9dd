"""gensokyo-idmap: QQ official bot platform ↔ OneBot v11, with a durable identity graph.

The public surface is re-exported here; everything else is implementation.
"""

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
