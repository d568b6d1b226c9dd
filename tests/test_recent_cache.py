"""RecentCache: entries live while they are used; memory follows the active set."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap.recent_cache import RecentCache

from .conftest import FakeClock

PERIOD = 60.0


def test_an_entry_is_found_until_it_goes_unused_for_two_periods(clock: FakeClock) -> None:
    cache: RecentCache[str, int] = RecentCache(100, PERIOD, clock)
    cache.put("a", 1)
    cache.put("b", 2)
    clock.advance(PERIOD)
    cache.put("c", 3)  # a period passed: a and b are the old generation now
    assert cache.get("a") == 1  # used again: back in the young one
    assert cache.young.get("b") is None and len(cache) == 3
    clock.advance(PERIOD)
    cache.put("d", 4)  # b went unused for two periods: forgotten
    assert cache.get("b") is None
    assert [cache.get(k) for k in "acd"] == [1, 3, 4]


def test_an_entry_in_use_survives_any_number_of_periods(clock: FakeClock) -> None:
    cache: RecentCache[str, int] = RecentCache(100, PERIOD, clock)
    cache.put("steady", 0)
    for n in range(50):
        clock.advance(PERIOD)
        cache.put(f"passing {n}", n)  # new entries keep coming, each seen once
        assert cache.get("steady") == 0
    assert len(cache) <= 3  # steady, and the passing ones of the last two periods


@given(st.lists(st.tuples(st.integers(0, 40), st.floats(0, 100)), max_size=300),
       st.integers(2, 20))
def test_never_more_than_the_limit_and_a_fresh_put_is_found(
        ops: list[tuple[int, float]], limit: int) -> None:
    clock = FakeClock()
    cache: RecentCache[int, int] = RecentCache(limit, PERIOD, clock)
    for key, pause in ops:
        clock.advance(pause)
        cache.put(key, key * 2)
        assert cache.get(key) == key * 2
        assert len(cache) <= limit


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError):
        RecentCache(1)
    with pytest.raises(ValueError):
        RecentCache(10, period=0)


def test_an_offered_entry_is_kept_from_its_second_use(clock: FakeClock) -> None:
    """Second use first: a key offered once is only noted (a flood of chats seen once adds
    no entry); offered again within two periods, it is kept."""
    cache: RecentCache[str, int] = RecentCache(100, PERIOD, clock)
    cache.offer("a", 1)
    assert cache.get("a") is None and len(cache) == 0
    cache.offer("a", 1)
    assert cache.get("a") == 1
    cache.offer("b", 2)
    clock.advance(PERIOD)
    cache.forget()  # b's first use is in the old generation's filter now
    cache.offer("b", 2)
    assert cache.get("b") == 2
    cache.offer("c", 3)
    for _ in range(2):
        clock.advance(PERIOD)
        cache.forget()
    cache.offer("c", 3)  # its first use was two periods ago: forgotten, noted afresh
    assert cache.get("c") is None


def test_a_flood_of_keys_offered_once_keeps_few_entries(clock: FakeClock) -> None:
    cache: RecentCache[str, int] = RecentCache(65_536, PERIOD, clock)
    for n in range(50_000):
        cache.offer(f"group {n}", n)
    assert len(cache) < 50_000 // 10  # only keys mistaken for seen before: a few percent
    cache.offer("group 7", 7)
    assert cache.get("group 7") == 7


def test_forget_turns_the_generations_over_on_the_clock_alone(clock: FakeClock) -> None:
    """With nothing added, the memory chore's forget still lets entries go: one to two
    periods after their last use, and the filters with them."""
    cache: RecentCache[str, int] = RecentCache(100, PERIOD, clock)
    cache.put("used", 1)
    cache.put("idle", 2)
    cache.offer("noted", 3)
    clock.advance(PERIOD - 1)
    cache.forget()
    assert len(cache) == 2  # within a period: nothing turned over
    clock.advance(1)
    cache.forget()
    assert cache.get("used") == 1  # renewed into the young generation
    clock.advance(PERIOD)
    cache.forget()
    assert cache.get("idle") is None and cache.get("used") == 1
    for _ in range(2):
        clock.advance(PERIOD)
        cache.forget()
    assert len(cache) == 0
    assert cache.footprint() < 1024  # no entries, no filters left


@given(st.lists(st.tuples(st.integers(0, 40), st.floats(0, 100), st.booleans()),
                max_size=300), st.integers(2, 20))
def test_offers_never_hold_more_than_the_limit(ops: list[tuple[int, float, bool]],
                                              limit: int) -> None:
    clock = FakeClock()
    cache: RecentCache[int, int] = RecentCache(limit, PERIOD, clock)
    for key, pause, chore in ops:
        clock.advance(pause)
        if chore:
            cache.forget()
        cache.offer(key, key * 2)
        assert cache.get(key) in (None, key * 2)
        assert len(cache) <= limit
