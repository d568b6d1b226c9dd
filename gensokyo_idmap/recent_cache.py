"""A cache of what was used lately: memory follows the active set, not the history.

The hot paths keep small pure caches keyed by people and chats (checked OpenIds, key
bytes, inbound message contexts, parsed keys). A cache capped by count only keeps growing
with every person ever seen until the cap (tens of thousands of entries, tens of MiB over
hours of new users) and then starts from nothing at once. Here an entry lives while it is
used: it is forgotten one to two ``period``s after its last use, and there are never more
than ``limit`` entries.

Two generations: ``young`` takes new entries and hits; when ``period`` has passed (checked
when an entry is added, and by :meth:`RecentCache.forget`, which the memory chore calls
once a minute, so a cache nobody adds to still forgets) or ``young`` holds half the limit,
``young`` becomes ``old`` and the previous ``old`` is dropped. A hit in ``old`` moves the
entry back into ``young``. The fast path may read ``young`` directly
(``cache.young.get(key)``) and fall back to :meth:`get` on a miss.

**Second use first** (:meth:`RecentCache.offer`): a cache of the hot path keeps an entry
only once its key comes back. A flood of chats and people seen once each (50,000 new
groups) would otherwise fill every cache with entries no one asks for again, a few hundred
bytes each; instead the first use of a key sets two bits in a small filter (a Bloom filter
of each generation: 8 bits per entry a generation may hold, made at its first offer; once
it is full, one key in twenty passes for seen before and is kept early), and the second
use, within the same two generations, keeps the entry. What a busy chat costs is one
computation more; what a chat seen once costs is a byte. :meth:`RecentCache.put` keeps an
entry at once (a table whose entries are information, not a cache).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from itertools import chain
from typing import Final, Generic, TypeVar

from gensokyo_idmap.tables import estimate

__all__ = ["RECENT_SECONDS", "RecentCache"]

K = TypeVar("K")
V = TypeVar("V")

#: How long an unused entry is kept at least (and at most twice that).
RECENT_SECONDS: Final = 120.0
#: Filter bits per entry a generation may hold (its half of the limit): with two bits
#: set per key, one key in twenty passes for seen before once a generation is full.
_BITS_PER_ENTRY: Final = 8


class RecentCache(Generic[K, V]):
    __slots__ = ("_bits", "_clock", "_half", "_offered", "_old", "_old_seen", "_period",
                 "_rotate_at", "_seen", "young")

    def __init__(self, limit: int, period: float = RECENT_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if limit < 2 or period <= 0:
            raise ValueError("a RecentCache needs limit >= 2 and period > 0")
        self.young: dict[K, V] = {}
        self._old: dict[K, V] = {}
        self._half = limit // 2
        self._period = period
        self._clock = clock
        self._rotate_at = clock() + period
        # the keys offered once in this generation and the last (module doc): made at the
        # first offer of a generation, so a cache without offers holds no filter
        self._bits = 1 << max(6, (self._half * _BITS_PER_ENTRY - 1).bit_length())
        self._seen: bytearray | None = None
        self._old_seen: bytearray | None = None
        self._offered = 0  # keys that set bits in this generation's filter

    def get(self, key: K) -> V | None:
        """The value of ``key`` (None if absent); a hit in the old generation is renewed."""
        value = self.young.get(key)
        if value is None:
            value = self._old.pop(key, None)
            if value is not None:
                self.put(key, value)
        return value

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` under ``key`` now."""
        now = self._clock()
        if now >= self._rotate_at or len(self.young) + self._offered >= self._half:
            self._rotate(now)
        self.young[key] = value

    def offer(self, key: K, value: V) -> None:
        """Keep ``value`` under ``key`` if the key was offered before in this generation or
        the last, else only note the key (module doc: second use first)."""
        mask = self._bits - 1
        hashed = hash(key)
        # two positions of one hash (the second mixed, so small ints spread too)
        first, second = hashed & mask, ((hashed >> 29) ^ (hashed * 0x9E3779B1)) & mask
        for seen in (self._seen, self._old_seen):
            if (seen is not None and seen[first >> 3] >> (first & 7) & 1
                    and seen[second >> 3] >> (second & 7) & 1):
                self.put(key, value)
                return
        now = self._clock()
        if now >= self._rotate_at or len(self.young) + self._offered >= self._half:
            self._rotate(now)
        seen = self._seen
        if seen is None:
            seen = self._seen = bytearray(self._bits >> 3)
        seen[first >> 3] |= 1 << (first & 7)
        seen[second >> 3] |= 1 << (second & 7)
        self._offered += 1

    def _rotate(self, now: float) -> None:
        self._old = self.young
        self.young = {}
        self._old_seen, self._seen = self._seen, None
        self._offered = 0
        self._rotate_at = now + self._period

    def forget(self) -> None:
        """Turn the generations over if a period has passed since the last time (the memory
        chore's call: what nobody used for two periods goes even when nothing is added)."""
        now = self._clock()
        if now >= self._rotate_at:
            self._rotate(now)

    def footprint(self) -> int:
        """Estimated bytes: both generations and their filters
        (:func:`~gensokyo_idmap.tables.estimate`)."""
        filters = sum(sys.getsizeof(seen) for seen in (self._seen, self._old_seen)
                      if seen is not None)
        return filters + estimate(len(self), (self.young, self._old),
                                  chain(self._old.items(), self.young.items()))

    def __len__(self) -> int:
        return len(self.young) + len(self._old)

