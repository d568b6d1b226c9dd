"""A daemon's cache of the identity graph's hot-path answers, over a shared store.

With the graph in PostgreSQL every :meth:`~gensokyo_idmap.store.base.IdentityStore.probe`
would be a network round trip, once per event. :class:`CachedIdentityStore` wraps the
store and answers a known identity from memory. Rules:

1. **Only what probe needs, only what is settled.** An entry is key → (vUIN, the scenes
   where that key is the vUIN's ``last_seen``), filled from a probe that found the key
   (and, with a scene, found it last seen there): exactly the answers on which resolve
   writes nothing (rule 4 of ``idmap.py``). Anything else is asked of the store.
2. **Bounded by size and by age.** At most ``size`` keys (the oldest go first) and no entry
   is served later than ``max_age`` seconds after the read it came from, so an
   invalidation that never arrived leaves a stale answer for ``max_age`` at most.
3. **Every write says what it changed.** A write function runs on a recording view that
   notes the keys whose vUIN changed and the vUINs whose ``last_seen`` changed; once the
   write committed, those are dropped here and handed to ``publish`` for the other
   daemons (Redis pub/sub: :mod:`gensokyo_idmap.runtime.redis.invalidation`). Numbers the
   write allocated and keys that had no vUIN before are left out: nobody can hold an entry
   for them, so a flood of new people publishes nothing.
4. **A fill never outlives an invalidation it raced with.** Each invalidation (and each
   clear) bumps a generation; a probe remembers the generation before it asks the store
   and fills only if it is unchanged, so an answer read before another daemon's commit
   cannot be stored after that commit's invalidation was applied.
5. **No channel, no cache.** Until :meth:`IdentityCache.clear` after a (re)subscription
   switches it on, and from :meth:`IdentityCache.suspend` (the subscriber lost its
   connection) until then, nothing is served or filled: invalidations missed meanwhile
   cannot leave anything behind.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, TypeVar

from gensokyo_idmap import counters
from gensokyo_idmap.store.base import (
    IdentityReader,
    IdentityStore,
    IdentityWriter,
    LastSeen,
    LegacyTables,
    ProbesTogether,
    TableCounts,
)
from gensokyo_idmap.tables import Named, compacted, estimate

__all__ = ["CachedIdentityStore", "Changes", "IdentityCache"]

T = TypeVar("T")

#: Scenes remembered per key: a person active in more chats than this is asked about the
#: others (a bound on one entry's memory, not a limit on anything else).
MAX_SCENES_PER_KEY: Final = 64


@dataclass(slots=True)
class Changes:
    """What one write changed that a cache may hold: keys whose vUIN changed, vUINs whose
    ``last_seen`` changed."""

    keys: set[str] = field(default_factory=set)
    vuins: set[int] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.keys or self.vuins)


@dataclass(slots=True)
class _Entry:
    vuin: int
    scenes: set[str]
    born: float  # when the read it came from began (its age counts from there)


class IdentityCache:
    """key → (vUIN, scenes where it is last seen), bounded by ``size`` and ``max_age``.

    Thread-safe: the event loop reads and fills it, the subscriber thread invalidates it.
    """

    def __init__(self, size: int, max_age: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if size < 1 or max_age <= 0:
            raise ValueError("an IdentityCache needs size >= 1 and max_age > 0")
        self.size = size
        self.max_age = max_age
        self._clock = clock
        self._lock = threading.Lock()
        # in fill order, the oldest first (an OrderedDict: the front is dropped in O(1))
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._by_vuin: dict[int, set[str]] = {}
        self._live = False  # rule 5: off until the first clear()
        self.generation = 0
        self.hits = 0
        self.misses = 0
        self.invalidations = 0
        self.clears = 0

    @property
    def live(self) -> bool:
        """Whether answers are served and filled (the invalidation channel is up)."""
        return self._live

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, key: str, scene: str | None, *, count_miss: bool = True) -> int | None:
        """The vUIN of ``key`` if it is known here (and, with ``scene``, last seen there).
        ``count_miss=False``: a miss is not counted (the caller asks again, counted)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or not self._live:
                self.misses += count_miss
                return None
            if self._clock() - entry.born > self.max_age:
                self._drop(key)
                self.misses += count_miss
                return None
            if scene is not None and scene not in entry.scenes:
                self.misses += count_miss
                return None
            self.hits += 1
            return entry.vuin

    def fill(self, key: str, scene: str | None, vuin: int, born: float,
             generation: int) -> None:
        """Remember that ``key`` is ``vuin`` (and last seen in ``scene``), as read by a probe
        that began at ``born`` when the generation was ``generation`` (rule 4)."""
        with self._lock:
            if not self._live or generation != self.generation:
                return
            entry = self._entries.get(key)
            if entry is not None and entry.vuin == vuin:
                if scene is not None and len(entry.scenes) < MAX_SCENES_PER_KEY:
                    entry.scenes.add(scene)  # its age stays the older read's: conservative
                return
            if entry is not None:
                self._drop(key)
            self._entries[key] = _Entry(vuin, set() if scene is None else {scene}, born)
            self._by_vuin.setdefault(vuin, set()).add(key)
            self._evict()

    def _evict(self) -> None:
        """Drop expired entries from the front and, beyond ``size``, the oldest."""
        oldest_allowed = self._clock() - self.max_age
        entries = self._entries
        while entries:
            key, entry = next(iter(entries.items()))
            if len(entries) <= self.size and entry.born >= oldest_allowed:
                return
            self._drop(key)

    def forget(self) -> None:
        """Drop the entries past ``max_age`` now (rule 2; the memory chore's call,
        :mod:`gensokyo_idmap.tables`: an entry is otherwise dropped when a fill reaches it,
        and after a flood no fill may come)."""
        with self._lock:
            self._evict()
            self._entries = compacted(self._entries)
            self._by_vuin = compacted(self._by_vuin)

    def footprint(self) -> int:
        with self._lock:
            return (estimate(len(self._entries), (self._entries,), self._entries.items())
                    + estimate(len(self._by_vuin), (self._by_vuin,), self._by_vuin.items()))

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        keys = self._by_vuin.get(entry.vuin)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_vuin[entry.vuin]

    def invalidate(self, keys: Iterable[str], vuins: Iterable[int]) -> None:
        """Forget ``keys`` and every key of ``vuins`` (what a committed write changed)."""
        with self._lock:
            self.generation += 1
            self.invalidations += 1
            for key in keys:
                self._drop(key)
            for vuin in vuins:
                for key in list(self._by_vuin.get(vuin, ())):
                    self._drop(key)

    def clear(self) -> None:
        """Forget everything and serve from now on (the channel was (re)subscribed: what
        was missed before is unknown)."""
        with self._lock:
            self.generation += 1
            self.clears += 1
            self._entries.clear()
            self._by_vuin.clear()
            self._live = True

    def suspend(self) -> None:
        """Serve and fill nothing until the next :meth:`clear` (the channel is down)."""
        with self._lock:
            self.generation += 1
            self._live = False
            self._entries.clear()
            self._by_vuin.clear()


class _RecordingWriter(IdentityWriter):
    """The view a wrapped write function gets: the store's own, noting what changes."""

    __slots__ = ("_allocated", "_changes", "_view")

    def __init__(self, view: IdentityWriter, changes: Changes, allocated: set[int]) -> None:
        self._view = view
        self._changes = changes
        self._allocated = allocated

    # writes that a cache entry may depend on
    def set_vuin(self, key: str, vuin: int) -> None:
        # a key that had no vUIN is in no cache (only found keys are), so nothing to say;
        # its vUIN was read by the write already (cached by the view: no extra round trip)
        if key not in self._changes.keys and self._view.vuin_of(key) not in (None, vuin):
            self._changes.keys.add(key)
        self._view.set_vuin(key, vuin)

    def remove_identity(self, vuin: int, key: str) -> None:
        self._changes.keys.add(key)
        self._view.remove_identity(vuin, key)

    def set_last_seen(self, vuin: int, scene: str, seen: LastSeen) -> None:
        if vuin not in self._allocated:
            self._changes.vuins.add(vuin)
        self._view.set_last_seen(vuin, scene, seen)

    def delete_last_seen(self, vuin: int, scene: str) -> None:
        if vuin not in self._allocated:
            self._changes.vuins.add(vuin)
        self._view.delete_last_seen(vuin, scene)

    def set_vuin_counter(self, value: int) -> None:
        # the counter moves only onto a number just allocated, which was in use nowhere
        # (allocation skips every number in use), so no daemon holds an entry for it
        self._allocated.add(value)
        self._view.set_vuin_counter(value)

    # writes no probe answer depends on
    def set_meta(self, name: str, value: Any) -> None:
        self._view.set_meta(name, value)

    def add_identity(self, vuin: int, key: str) -> None:
        self._view.add_identity(vuin, key)

    def set_alias(self, old: int, new: int) -> None:
        self._view.set_alias(old, new)

    # reads
    def vuin_of(self, key: str) -> int | None:
        return self._view.vuin_of(key)

    def identities_of(self, vuin: int) -> list[str]:
        return self._view.identities_of(vuin)

    def has_identities(self, vuin: int) -> bool:
        return self._view.has_identities(vuin)

    def alias_target(self, vuin: int) -> int | None:
        return self._view.alias_target(vuin)

    def aliases_to(self, vuin: int) -> list[int]:
        return self._view.aliases_to(vuin)

    def last_seen(self, vuin: int, scene: str) -> LastSeen | None:
        return self._view.last_seen(vuin, scene)

    def last_seen_all(self, vuin: int) -> list[tuple[str, LastSeen]]:
        return self._view.last_seen_all(vuin)

    def vuin_counter(self) -> int:
        return self._view.vuin_counter()

    def unused_from(self) -> int | None:
        return self._view.unused_from()  # the view follows the writes passed through to it

    def get_meta(self, name: str) -> Any:
        return self._view.get_meta(name)

    def iter_identities(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        return self._view.iter_identities(prefix)

    def iter_vuin_sets(self) -> Iterator[tuple[int, str]]:
        return self._view.iter_vuin_sets()

    def iter_aliases(self) -> Iterator[tuple[int, int]]:
        return self._view.iter_aliases()

    def counts(self) -> TableCounts:
        return self._view.counts()

    def vuins_below(self, below: int | None, limit: int) -> list[int]:
        return self._view.vuins_below(below, limit)

    def scenes_after(self, prefix: str, after: str | None, limit: int) -> list[tuple[str, int]]:
        return self._view.scenes_after(prefix, after, limit)

    def seen_in(self, scene: str, above: int | None, limit: int) -> list[tuple[int, LastSeen]]:
        return self._view.seen_in(scene, above, limit)


def _run_recorded(view: IdentityWriter, *, fn: Callable[[IdentityWriter], T],
                  changes: Changes, keys: object = None) -> T:
    """``fn`` on a recording view. ``keys`` is not used here: it carries ``fn``'s own
    ``keys`` argument on, the hint a backend may read from a batch's functions to fetch
    their keys together (``postgres.view.keys_looked_up``)."""
    # numbers allocated are per run: a conflict re-runs the function on a fresh snapshot
    return fn(_RecordingWriter(view, changes, set()))


def _recorded(fn: Callable[[IdentityWriter], T], changes: Changes
              ) -> Callable[[IdentityWriter], T]:
    hint = fn.keywords.get("keys") if isinstance(fn, partial) else None
    return partial(_run_recorded, fn=fn, changes=changes, keys=hint)


class CachedIdentityStore:
    """``store`` with :meth:`probe` answered from an :class:`IdentityCache` where it can;
    every committed write invalidates what it changed, here and (``publish``) on the other
    daemons. Everything else goes to ``store`` unchanged."""

    def __init__(self, store: IdentityStore, cache: IdentityCache,
                 publish: Callable[[Changes], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.backing = store
        self.cache = cache
        self._publish = publish
        self._clock = clock
        # gensokyo_identity_cache reads this cache's counts while it is open
        self._closers: list[Callable[[], None]] = [
            counters.IDENTITY_CACHE.pull((event,), partial(getattr, cache, count))
            for event, count in (("hit", "hits"), ("miss", "misses"),
                                 ("invalidation", "invalidations"), ("clear", "clears"))]

    def memory_tables(self) -> list[Named]:
        """Its in-memory table (:mod:`gensokyo_idmap.tables`)."""
        return [("identity_cache", self.cache)]

    def on_close(self, closer: Callable[[], None]) -> None:
        """Call ``closer`` when this store closes, before the backing store does (the
        invalidation channel's threads)."""
        self._closers.append(closer)

    def read(self) -> AbstractContextManager[IdentityReader]:
        return self.backing.read()

    def probe(self, key: str, scene: str | None) -> tuple[int | None, bool]:
        hit = self._hit(key, scene)
        if hit is not None:
            return hit
        generation, born = self.cache.generation, self._clock()
        return self._filled(key, scene, *self.backing.probe(key, scene), born, generation)

    def probe_cached(self, key: str, scene: str | None) -> tuple[int, bool] | None:
        """The probe's answer if this cache holds it (a miss is counted by the probe that
        follows it)."""
        return self._hit(key, scene, count_miss=False)

    async def probe_soon(self, key: str, scene: str | None) -> tuple[int | None, bool]:
        """:meth:`probe`, with a miss asked of the store together with the other probes of
        this turn when the store can (:class:`ProbesTogether`); filled as :meth:`probe`
        fills (the generation is taken before the question goes out: rule 4)."""
        backing = self.backing
        if not isinstance(backing, ProbesTogether):
            return self.probe(key, scene)
        hit = self._hit(key, scene)
        if hit is not None:
            return hit
        generation, born = self.cache.generation, self._clock()
        return self._filled(key, scene, *await backing.probe_soon(key, scene), born,
                            generation)

    def _hit(self, key: str, scene: str | None, *,
             count_miss: bool = True) -> tuple[int, bool] | None:
        vuin = self.cache.lookup(key, scene, count_miss=count_miss)
        return None if vuin is None else (vuin, scene is not None)

    def _filled(self, key: str, scene: str | None, vuin: int | None, seen_here: bool,
                born: float, generation: int) -> tuple[int | None, bool]:
        """A probe's answer, kept when resolve would write nothing on it (rule 1) and it
        was read since ``born``, in generation ``generation`` (rule 4)."""
        if vuin is not None and (scene is None or seen_here):
            self.cache.fill(key, scene, vuin, born, generation)
        return vuin, seen_here

    def write(self, fn: Callable[[IdentityWriter], T]) -> Awaitable[T]:
        changes = Changes()
        return self._invalidating(self.backing.write(_recorded(fn, changes)), changes)

    async def _invalidating(self, pending: Awaitable[T], changes: Changes) -> T:
        try:
            return await pending
        finally:
            self._changed(changes)

    def write_sync(self, fn: Callable[[IdentityWriter], T]) -> T:
        changes = Changes()
        try:
            return self.backing.write_sync(_recorded(fn, changes))
        finally:
            self._changed(changes)

    def _changed(self, changes: Changes) -> None:
        """After the commit (or a failure, which may have committed): here at once, the
        other daemons through ``publish``."""
        if changes:
            self.cache.invalidate(changes.keys, changes.vuins)
            self._publish(changes)

    def health(self) -> str | None:
        return self.backing.health()

    def version(self) -> None:
        """None: the backing store is shared with other daemons (its own answers are
        kept here by :class:`IdentityCache`'s rules)."""
        return None

    def close(self) -> None:
        for closer in reversed(self._closers):
            closer()
        self.backing.close()

    # LegacyTables, when the backing store keeps them (not part of the graph: not cached)
    def read_legacy(self) -> AbstractContextManager[Any]:
        return self._legacy().read_legacy()

    def write_legacy(self, fn: Callable[[Any], T]) -> Awaitable[T]:
        return self._legacy().write_legacy(fn)

    def _legacy(self) -> LegacyTables:
        if not isinstance(self.backing, LegacyTables):
            raise AttributeError("the backing identity store keeps no legacy tables")
        return self.backing
