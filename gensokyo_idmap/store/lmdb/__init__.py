"""The LMDB backend: the embedded default (py-lmdb, one file per store, ``subdir=False``).

- :mod:`.check`: a file checked with plain reads before LMDB maps it;
- :mod:`.opening`: opening and creating files safely;
- :mod:`.stores_record`: ``stores.json``, the data dir's record of the stores it held;
- :mod:`.env`: what every LMDB store shares (schema, reads, group commit, map growth);
- :mod:`.codec`: values as cbor2, integers as 8-byte big-endian so keys sort;
- :mod:`.identity`: openid-map.db, the identity graph (:class:`~..base.IdentityStore`);
- :mod:`.outbox`: outbox.db, events owed to frameworks (:class:`~..base.OutboxStore`).

msgid-map.db is runtime state: :mod:`gensokyo_idmap.runtime.lmdb`, on :mod:`.env`.
"""
