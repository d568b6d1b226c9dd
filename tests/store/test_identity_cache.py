"""The identity cache over a shared graph (store/identity_cache.py): what it serves, what
each write takes out of it, and its bounds (size, age, the channel being down)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from gensokyo_idmap import metrics
from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.store.base import ProbesTogether
from gensokyo_idmap.store.identity_cache import CachedIdentityStore, Changes, IdentityCache
from gensokyo_idmap.store.postgres.view import keys_looked_up
from gensokyo_idmap.runtime.redis.invalidation import decode_changes, encode_changes
from gensokyo_idmap.errors import BadInputError

from ..conftest import APP_ID, FakeClock, run
from ..store_backends import BACKENDS, store_factory

ALICE = OpenId(APP_ID, "A11CE000000000000000000000000000")
BOB = OpenId(APP_ID, "B0B00000000000000000000000000000")
GROUP = f"QQ:{APP_ID}:group:G1"
OTHER_GROUP = f"QQ:{APP_ID}:group:G2"


def live_cache(clock: FakeClock, size: int = 100, max_age: float = 10.0) -> IdentityCache:
    cache = IdentityCache(size, max_age, clock=clock)
    cache.clear()  # as the subscription's confirmation does
    return cache


# --- the cache alone ------------------------------------------------------------------------


def test_nothing_is_served_or_kept_before_the_channel_is_up_or_while_it_is_down() -> None:
    clock = FakeClock()
    cache = IdentityCache(100, 10.0, clock=clock)
    cache.fill("k", None, 1, clock(), cache.generation)
    assert cache.lookup("k", None) is None and len(cache) == 0
    cache.clear()
    cache.fill("k", None, 1, clock(), cache.generation)
    assert cache.lookup("k", None) == 1
    cache.suspend()
    assert cache.lookup("k", None) is None and len(cache) == 0
    cache.fill("k", None, 1, clock(), cache.generation)
    assert len(cache) == 0


def test_a_scene_is_served_only_where_the_key_was_found_last_seen() -> None:
    clock = FakeClock()
    cache = live_cache(clock)
    cache.fill("k", GROUP, 7, clock(), cache.generation)
    assert cache.lookup("k", GROUP) == 7
    assert cache.lookup("k", None) == 7
    assert cache.lookup("k", OTHER_GROUP) is None
    cache.fill("k", OTHER_GROUP, 7, clock(), cache.generation)
    assert cache.lookup("k", OTHER_GROUP) == 7


def test_no_entry_is_served_past_its_age_counted_from_the_read() -> None:
    clock = FakeClock()
    cache = live_cache(clock, max_age=5.0)
    read_began = clock()
    clock.advance(1.0)  # the read took a while: the age counts from its start
    cache.fill("k", None, 1, read_began, cache.generation)
    clock.advance(4.0)
    assert cache.lookup("k", None) == 1
    # a later scene of the same entry does not make it younger
    cache.fill("k", GROUP, 1, clock(), cache.generation)
    clock.advance(0.001)
    assert cache.lookup("k", None) is None and cache.lookup("k", GROUP) is None
    assert len(cache) == 0


def test_the_memory_chore_drops_the_entries_past_their_age_with_no_fill() -> None:
    """Rule 2 drops an old entry when a fill reaches it; after a flood no fill may come:
    forget() drops whatever is past ``max_age`` and keeps the rest, which still answer."""
    clock = FakeClock()
    cache = live_cache(clock, size=5000, max_age=5.0)
    for n in range(2000):
        cache.fill(f"k{n}", None, n + 1, clock(), cache.generation)
    flooded = cache.footprint()
    clock.advance(3.0)
    cache.fill("late", GROUP, 7, clock(), cache.generation)
    clock.advance(2.0)
    cache.forget()
    assert len(cache) == 2001  # exactly max_age old: still served
    clock.advance(0.001)
    cache.forget()
    assert len(cache) == 1 and cache.lookup("late", GROUP) == 7
    assert cache.footprint() < flooded / 20


def test_the_size_bound_drops_the_oldest_fill() -> None:
    clock = FakeClock()
    cache = live_cache(clock, size=3)
    for n in range(5):
        cache.fill(f"k{n}", None, n + 1, clock(), cache.generation)
        clock.advance(0.1)
    assert len(cache) == 3
    assert [cache.lookup(f"k{n}", None) for n in range(5)] == [None, None, 3, 4, 5]


def test_an_invalidation_forgets_the_keys_and_every_key_of_the_vuins() -> None:
    clock = FakeClock()
    cache = live_cache(clock)
    for key, vuin in (("a1", 1), ("a2", 1), ("b", 2), ("c", 3)):
        cache.fill(key, GROUP, vuin, clock(), cache.generation)
    cache.invalidate(keys=["c"], vuins=[1])
    assert [cache.lookup(key, GROUP) for key in ("a1", "a2", "b", "c")] == [None, None, 2, None]


def test_a_fill_read_before_an_invalidation_is_not_kept() -> None:
    """A probe that began before another daemon's invalidation arrived may hold the old
    answer: it is returned, but never stored."""
    clock = FakeClock()
    cache = live_cache(clock)
    generation = cache.generation
    cache.invalidate(keys=["k"], vuins=[])  # arrives while the probe waits for the server
    cache.fill("k", None, 1, clock(), generation)
    assert cache.lookup("k", None) is None
    cache.fill("k", None, 1, clock(), cache.generation)
    assert cache.lookup("k", None) == 1


def test_the_bounds_must_be_positive() -> None:
    with pytest.raises(ValueError, match="size >= 1"):
        IdentityCache(0, 1.0)
    with pytest.raises(ValueError, match="max_age > 0"):
        IdentityCache(1, 0.0)


# --- the channel's messages -----------------------------------------------------------------


def test_changes_cross_the_channel_whole_in_bounded_messages() -> None:
    changes = Changes({f"raw:{n}" for n in range(1500)}, set(range(1, 900)))
    messages = encode_changes(changes)
    assert len(messages) == 3
    received = Changes()
    for message in messages:
        part = decode_changes(message)
        received.keys |= part.keys
        received.vuins |= part.vuins
    assert received == changes


@pytest.mark.parametrize("message", [b"", b"[]", b'{"keys": ["a"]}',
                                     b'{"keys": [1], "vuins": []}',
                                     b'{"keys": [], "vuins": [true]}'])
def test_a_message_not_of_ours_is_refused(message: bytes) -> None:
    with pytest.raises(BadInputError, match="invalidation"):
        decode_changes(message)


# --- over a real store ----------------------------------------------------------------------


class Cached:
    """A store of ``backend`` behind a live cache whose publications are recorded."""

    def __init__(self, backing: Any, clock: FakeClock) -> None:
        self.published: list[Changes] = []
        self.cache = live_cache(clock)
        self.store = CachedIdentityStore(backing, self.cache, self.published.append,
                                         clock=clock)
        self.graph = IdentityGraph(self.store, clock=clock)


@pytest.fixture(params=BACKENDS)
def cached(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cached]:
    with store_factory(request.param, tmp_path) as open_store:
        setup = Cached(open_store(), FakeClock())
        yield setup
        setup.store.close()


def test_a_known_identity_is_served_from_memory_after_one_read(cached: Cached) -> None:
    vuin = run(cached.graph.resolve([ALICE], scene=GROUP)).vuin
    misses = cached.cache.misses
    for _ in range(3):
        assert cached.graph.known([ALICE], GROUP) == vuin
    assert cached.cache.misses == misses + 1 and cached.cache.hits == 2
    assert cached.published == []  # a new person changes nothing anyone caches


def test_a_known_identity_in_a_new_scene_is_asked_and_taken_out_elsewhere(
        cached: Cached) -> None:
    vuin = run(cached.graph.resolve([ALICE], scene=GROUP)).vuin
    assert cached.graph.known([ALICE], GROUP) == vuin
    assert cached.graph.known([ALICE], OTHER_GROUP) is None
    assert run(cached.graph.resolve([ALICE], scene=OTHER_GROUP)).vuin == vuin
    assert cached.published == [Changes(set(), {vuin})]
    assert cached.graph.known([ALICE], OTHER_GROUP) == vuin


def test_bind_and_rebind_take_what_they_moved_out_here_and_publish_it(cached: Cached) -> None:
    alice = run(cached.graph.resolve([ALICE], scene=GROUP)).vuin
    bob = run(cached.graph.resolve([BOB], scene=GROUP)).vuin
    assert cached.graph.known([ALICE], GROUP) == alice
    assert cached.graph.known([BOB], GROUP) == bob

    run(cached.graph.bind(ALICE, bob))  # Alice's key moves; her number becomes an alias
    assert cached.published[-1].keys == {ALICE.key}
    assert alice in cached.published[-1].vuins  # her last_seen there went with her key
    assert cached.graph.known([ALICE], None) == bob
    assert cached.graph.known([BOB], GROUP) == bob

    carol = OpenId(APP_ID, "CA201000000000000000000000000000")
    third = run(cached.graph.resolve([carol], scene=GROUP)).vuin
    assert cached.graph.known([carol], None) == third
    run(cached.graph.rebind(bob, third))
    assert cached.published[-1].keys == {ALICE.key, BOB.key}
    assert cached.graph.known([ALICE], None) == third
    assert cached.graph.known([BOB], None) == third


def test_a_failed_write_publishes_nothing_it_did_not_change(cached: Cached) -> None:
    with pytest.raises(Exception, match="no identities"):
        run(cached.graph.rebind(41, 42))
    assert cached.published == []


def test_a_wrapped_write_keeps_the_keys_a_backend_fetches_for_a_batch(cached: Cached) -> None:
    """The PostgreSQL writer reads the keys of a whole batch in one statement, by the
    ``keys`` argument of each function: the recording wrapper hands it on."""
    seen: list[Any] = []

    class Spy:
        def read(self) -> Any:
            return cached.store.backing.read()

        def write(self, fn: Any) -> Any:
            seen.append(fn)
            return cached.store.backing.write(fn)

    spy = CachedIdentityStore(Spy(), cached.cache, cached.published.append)  # type: ignore[arg-type]
    run(IdentityGraph(spy).resolve([ALICE, BOB]))
    assert keys_looked_up(seen) == [ALICE.key, BOB.key]
    assert keys_looked_up([partial(print)]) == []


def test_a_miss_asked_with_the_turn_fills_what_it_found(cached: Cached) -> None:
    """The inbound bridge asks memory only (``ask_store=False``); resolve then asks the
    store for the misses of the turn together, and fills the cache as probe does."""
    vuin = run(cached.graph.resolve([ALICE], scene=GROUP)).vuin
    assert cached.graph.known([ALICE], GROUP, ask_store=False) is None  # not asked
    assert run(cached.store.probe_soon(ALICE.key, GROUP)) == (vuin, True)
    assert run(cached.store.probe_soon(BOB.key, GROUP)) == (None, False)
    assert cached.graph.known([ALICE], GROUP, ask_store=False) == vuin  # from memory


def test_a_miss_asked_with_the_turn_is_not_kept_past_an_invalidation_meanwhile(
        cached: Cached) -> None:
    """Rule 4 for a probe that waits for the end of the turn (PostgreSQL): any
    invalidation applied while it waits (it may have been the commit of what the answer
    read) means its answer is not kept. A store that answers at once (LMDB) has filled
    before the invalidation came."""
    vuin = run(cached.graph.resolve([ALICE], scene=GROUP)).vuin

    async def raced() -> tuple[int | None, bool]:
        asked = asyncio.ensure_future(cached.store.probe_soon(ALICE.key, GROUP))
        await asyncio.sleep(0)  # the probe is asked (on PostgreSQL: not answered yet)
        cached.cache.invalidate([BOB.key], [])
        return await asked

    assert run(raced()) == (vuin, True)
    waited = isinstance(cached.store.backing, ProbesTogether)
    assert cached.graph.known([ALICE], GROUP, ask_store=False) == (None if waited else vuin)


def cache_metric(event: str) -> float:
    text = metrics.render().decode()
    found = re.search(rf'^gensokyo_identity_cache_total{{event="{event}"}} (\S+)$', text, re.M)
    assert found is not None, f"gensokyo_identity_cache {event} not in /metrics"
    return float(found.group(1))


def test_metrics_count_hits_misses_invalidations_and_clears(cached: Cached) -> None:
    before = {event: cache_metric(event) for event in ("hit", "miss", "invalidation", "clear")}
    vuin = run(cached.graph.resolve([ALICE], scene=GROUP)).vuin  # a miss, then the write
    assert cached.graph.known([ALICE], GROUP) == vuin  # a miss that fills
    assert cached.graph.known([ALICE], GROUP) == vuin  # a hit
    run(cached.graph.bind(ALICE, vuin + 1))  # an invalidation
    cached.cache.clear()
    assert {event: cache_metric(event) - before[event] for event in before} == {
        "hit": 1, "miss": 2, "invalidation": 1, "clear": 1}
    cached.store.close()  # the counts stay when the cache goes
    assert cache_metric("hit") == before["hit"] + 1
