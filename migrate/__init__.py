"""Legacy migration: the old Go daemon's bbolt ``idmap.db`` into openid-map.db (docs/stores.md).

``bbolt`` reads the old file (pure Python, read-only, defensive); ``legacy`` converts it.
"""
