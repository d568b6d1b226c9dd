"""The graph's state machine (test_idmap_stateful) with two daemons' identity caches over
one store: random resolve / bind / rebind / pick / reopen steps run on either daemon, each
daemon's committed writes invalidate the other's cache (delivered at once, as a live
Redis channel would), and after every step each daemon's cached probe of every key in
every scene must answer exactly what the store answers. So every write that can change a
cached answer says so (store/identity_cache.py, rule 3), whatever the sequence of steps.
"""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis.stateful import invariant, rule

from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.store.identity_cache import CachedIdentityStore, Changes, IdentityCache

from .test_idmap_stateful import KEYS, SCENES, IdentityGraphMachine


def _delivered_to(cache: IdentityCache) -> Any:
    def deliver(changes: Changes) -> None:
        cache.invalidate(changes.keys, changes.vuins)

    return deliver


class TwoCachesMachine(IdentityGraphMachine):
    """``self.store`` / ``self.graph``: the daemon the next step runs on; ``self.other``:
    the other one."""

    def _open(self) -> CachedIdentityStore:  # type: ignore[override]
        backing = super()._open()
        caches = [IdentityCache(1000, 3600.0), IdentityCache(1000, 3600.0)]
        for cache in caches:
            cache.clear()  # subscribed
        self.other = CachedIdentityStore(backing, caches[1], _delivered_to(caches[0]))
        return CachedIdentityStore(backing, caches[0], _delivered_to(caches[1]))

    @rule()
    def switch_daemon(self) -> None:
        self.store, self.other = self.other, self.store
        self.graph = IdentityGraph(self.store)

    @invariant()
    def every_cache_answers_as_the_store(self) -> None:
        for daemon in (self.store, self.other):
            for key in KEYS:
                for scene in SCENES:
                    truth = daemon.backing.probe(key.key, scene)
                    assert daemon.probe(key.key, scene) == truth, (key.key, scene)


class TwoCachesOnPostgresMachine(TwoCachesMachine):
    BACKEND = "postgres"


TwoCachesMachine.TestCase.settings = settings(IdentityGraphMachine.TestCase.settings,
                                              max_examples=40)
TestTwoCaches = TwoCachesMachine.TestCase
# fewer runs: each makes a schema and a connection pool, and the invariant probes a lot
TwoCachesOnPostgresMachine.TestCase.settings = settings(
    IdentityGraphMachine.TestCase.settings, max_examples=10)
TestTwoCachesOnPostgres = TwoCachesOnPostgresMachine.TestCase
