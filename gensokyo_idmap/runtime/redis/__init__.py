"""The runtime state of several daemons on one Redis (``idmap.runtime_backend: redis``),
and the identity caches' invalidation channel on the same Redis (docs/stores.md: Redis holds
nothing that cannot be lost).

- :mod:`.connection`: one client pair, key naming, failing softly;
- :mod:`.trips`: script calls of concurrent callers sent in one round trip;
- :mod:`.scripts`: the keys and Lua scripts of message ids, claims and reply counts;
- :mod:`.state`: the rules of :mod:`gensokyo_idmap.runtime` on those scripts;
- :mod:`.invalidation`: the identity caches of several daemons kept true by pub/sub.
"""
