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
