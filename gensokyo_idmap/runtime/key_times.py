"""Keys and the time each was last put, oldest first, in three arrays and no object per key:
the memory of the delivery keys (:class:`gensokyo_idmap.runtime.claims.DeliveryLog`), which
a flood fills with tens of thousands of entries for a window.

Why not a dict of the keys: every key kept is an object of its own (a string of 60 to 110
bytes), made while its event was handled, among that event's other objects, and kept for
the window after they are gone. Python keeps small objects in arenas of 1 MiB that go back
to the system only when every object in one is gone: the keys of a flood, and later those
of the traffic after it (made into the room the flood's objects left, a few in each), kept
most of a flood's arenas for good. In ``bench/tables.py --quiet-minutes 12`` a flood of
50,000 new groups left 38 arenas for 24.5 MiB of objects where there had been 22 for 20.7;
without the delivery keys' strings, 33. Here the keys are their hashes in arrays (one
block each, from the C allocator, which the memory chore's trim gives back page by page
once they shrink after the window).

A key is known by its string hash (64 bits, salted per process): two keys with the same
hash are one key here. For a hundred thousand keys kept that is a chance of about one in
10^14 per lookup that a new event passes for a repeat, and is not delivered (what memory
holds is not asked of the store again; the durable claims,
:class:`~gensokyo_idmap.runtime.claims.DurableClaims`, keep the keys themselves).

Layout: a log of (hash, time) in the order put (``_hashes``, ``_times``; a hash of 0 marks
an entry moved on or removed), numbered from ``_base``; an open-addressing index of
``_mask + 1`` slots (linear probing) holding an entry's number + 1 (0: empty). A slot whose
entry was removed stays until the index is rebuilt (when half its slots were used, or when
it is far larger than the keys it holds); the log loses its front as entries lapse.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Hashable
from typing import Final

__all__ = ["KeyTimes"]

_SMALLEST: Final = 8  # index slots at least
_EMPTY: Final = 0  # in the log: an entry moved on or removed; in the index: an empty slot


class KeyTimes:
    """Keys and when each was put last, oldest first (module doc)."""

    __slots__ = ("_base", "_hashes", "_index", "_live", "_mask", "_times", "_used")

    def __init__(self) -> None:
        self._hashes = array("q")
        self._times = array("d")
        self._base = 0  # the number of the log's first entry
        self._live = 0  # entries whose hash is not 0
        self._index = array("q", bytes(8 * _SMALLEST))
        self._mask = _SMALLEST - 1
        self._used = 0  # index slots filled since it was built (live or not)

    def _find(self, hashed: int) -> tuple[int, int]:
        """(the index slot of ``hashed``'s entry, its place in the log), or (the empty slot
        its probe ended at, -1)."""
        index, hashes, base, mask = self._index, self._hashes, self._base, self._mask
        slot = hashed & mask
        while True:
            ref = index[slot]
            if ref == _EMPTY:
                return slot, -1
            at = ref - 1 - base
            if at >= 0 and hashes[at] == hashed:
                return slot, at
            slot = (slot + 1) & mask

    def get(self, key: Hashable, default: float) -> float:
        """When ``key`` was put last, ``default`` if it is not kept."""
        hashed = hash(key) or 1  # never 0, which marks nothing
        ref = self._index[hashed & self._mask]  # the first slot answers most lookups
        if ref == _EMPTY:
            return default
        at = ref - 1 - self._base
        if not (at >= 0 and self._hashes[at] == hashed):
            _, at = self._find(hashed)
        return default if at < 0 else self._times[at]

    def __contains__(self, key: Hashable) -> bool:
        return self._find(hash(key) or 1)[1] >= 0

    def number(self, key: Hashable) -> int:
        """The number of ``key``'s entry in the log, -1 if it is not kept (entries are
        numbered from 0 in the order put, and keep their number as the front is dropped:
        a caller keeps what it knows of each entry in arrays of its own, from
        :attr:`first`)."""
        at = self._find(hash(key) or 1)[1]
        return at if at < 0 else self._base + at

    @property
    def first(self) -> int:
        """The number of the log's first entry (moved on or not)."""
        return self._base

    def time_of(self, number: int) -> float:
        """When the entry numbered ``number`` (one of :meth:`number`'s) was put."""
        return self._times[number - self._base]

    def put(self, key: Hashable, now: float) -> None:
        """Keep ``key`` from ``now``, at the end (its earlier entry, if any, taken out: the
        times stay in order as long as ``now`` does not go back)."""
        hashed = hash(key) or 1
        slot, at = self._find(hashed)
        if at >= 0:
            self._hashes[at] = _EMPTY
        else:
            self._live += 1
            self._used += 1
        hashes = self._hashes
        self._index[slot] = self._base + len(hashes) + 1
        hashes.append(hashed)
        self._times.append(now)
        if 2 * self._used > self._mask + 1:
            self._rebuild()

    def renew(self, key: Hashable, now: float) -> bool:
        """:meth:`put` ``key`` if it is kept (True), else nothing (False)."""
        hashed = hash(key) or 1
        slot, at = self._find(hashed)
        if at < 0:
            return False
        hashes = self._hashes
        hashes[at] = _EMPTY
        self._index[slot] = self._base + len(hashes) + 1  # its slot: no new one is used
        hashes.append(hashed)
        self._times.append(now)
        return True

    def discard(self, key: Hashable) -> None:
        """Forget ``key`` (nothing if it is not kept)."""
        _, at = self._find(hash(key) or 1)
        if at >= 0:
            self._hashes[at] = _EMPTY
            self._live -= 1

    def first_time(self) -> float | None:
        """The oldest entry's time, None when empty."""
        for hashed, at in zip(self._hashes, self._times, strict=True):
            if hashed != _EMPTY:
                return at
        return None

    def drop_front(self, cutoff: float, room: int) -> int:
        """Drop the entries put at ``cutoff`` or before, and beyond them the oldest until
        ``room`` entries were dropped in all; how many of the latter (not yet lapsed) went.
        The log and the index shrink with what is gone."""
        hashes, times = self._hashes, self._times
        dropped = early = cut = 0
        for cut, hashed in enumerate(hashes):
            if hashed == _EMPTY:
                continue
            if times[cut] > cutoff:
                if dropped >= room:
                    break
                early += 1
            dropped += 1
        else:
            cut = len(hashes)
        if cut:
            del hashes[:cut]
            del times[:cut]
            self._base += cut
            self._live -= dropped
        if self._mask + 1 > _SMALLEST and 8 * self._live < self._mask + 1:
            self._rebuild()  # far larger than what it holds (after a flood): shrunk
        return early

    def _rebuild(self) -> None:
        """A new index of at least four slots per entry kept (half used, stale slots
        counted, before it grows again: short probes; 2 slots an entry and two thirds cost
        a fifth more time a key)."""
        size = _SMALLEST
        while size < 4 * self._live:
            size *= 2
        index = array("q", bytes(8 * size))
        mask = size - 1
        number = self._base + 1
        for hashed in self._hashes:
            if hashed != _EMPTY:
                slot = hashed & mask
                while index[slot] != _EMPTY:
                    slot = (slot + 1) & mask
                index[slot] = number
            number += 1
        self._index, self._mask, self._used = index, mask, self._live

    def __len__(self) -> int:
        return self._live

    def footprint(self) -> int:
        """Bytes held: the three arrays."""
        return sum(sys.getsizeof(part) for part in (self._hashes, self._times, self._index))
