"""Legacy migration: the old Go daemon's bbolt ``idmap.db`` into openid-map.db (DESIGN §6).

Not built yet; the identity store it writes into is ``gensokyo_idmap.store``.
"""
