"""A cache of what was used lately: memory follows the active set, not the history.

The hot paths keep small pure caches keyed by people and chats (checked OpenIds, key
bytes, inbound message contexts, parsed keys). A cache capped by count only keeps growing
with every person ever seen until the cap (tens of thousands of entries, tens of MiB over
hours of new users) and then starts from nothing at once. Here an entry lives while it is
used: it is forgotten one to two ``period``s after its last use, and there are never more
than ``limit`` entries.

Two generations: ``young`` takes new entries and hits; when ``period`` has passed (checked
only when an entry is added, so a hit costs one dict lookup) or ``young`` holds half the
limit, ``young`` becomes ``old`` and the previous ``old`` is dropped. A hit in ``old`` moves
the entry back into ``young``. The fast path may read ``young`` directly
(``cache.young.get(key)``) and fall back to :meth:`get` on a miss.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final, Generic, TypeVar

__all__ = ["RECENT_SECONDS", "RecentCache"]

K = TypeVar("K")
V = TypeVar("V")

#: How long an unused entry is kept at least (and at most twice that).
RECENT_SECONDS: Final = 120.0


class RecentCache(Generic[K, V]):
    __slots__ = ("_clock", "_half", "_old", "_period", "_rotate_at", "young")

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

    def get(self, key: K) -> V | None:
        """The value of ``key`` (None if absent); a hit in the old generation is renewed."""
        value = self.young.get(key)
        if value is None:
            value = self._old.pop(key, None)
            if value is not None:
                self.put(key, value)
        return value

    def put(self, key: K, value: V) -> None:
        now = self._clock()
        if now >= self._rotate_at or len(self.young) >= self._half:
            self._old = self.young
            self.young = {}
            self._rotate_at = now + self._period
        self.young[key] = value

    def __len__(self) -> int:
        return len(self.young) + len(self._old)
