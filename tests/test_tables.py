"""tables.py: the registry of the in-memory tables the memory chore sweeps and the stats
read, the size estimates and the shrinking of a table a flood grew."""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Iterator

from structlog.testing import capture_logs

from gensokyo_idmap.recent_cache import RecentCache
from gensokyo_idmap.tables import Named, TableFigures, Tables, compacted, entry_bytes, estimate

from .conftest import FakeClock


class Counted:
    """A table of ``n`` entries of ``size`` bytes each, counting its sweeps."""

    def __init__(self, n: int, size: int = 100) -> None:
        self.n = n
        self.size = size
        self.swept = 0

    def __len__(self) -> int:
        return self.n

    def forget(self) -> None:
        self.swept += 1

    def footprint(self) -> int:
        return self.n * self.size


class Broken(Counted):
    def forget(self) -> None:
        raise RuntimeError("a bug")


class Part:
    def __init__(self, *named: Named) -> None:
        self.named = list(named)

    def memory_tables(self) -> list[Named]:
        return self.named


def test_figures_add_up_the_tables_of_one_name_in_the_order_registered() -> None:
    tables = Tables()
    first_bot, second_bot, shared = Counted(3), Counted(4), Counted(1, 10)
    tables.add_from(Part(("reply_counts", first_bot), ("member_profiles", shared)),
                    Part(("reply_counts", second_bot), ("member_profiles", shared)),
                    object())  # a part holding no tables: nothing added
    assert tables.figures() == [TableFigures("reply_counts", 7, 700),
                                TableFigures("member_profiles", 1, 10)]  # shared: once
    tables.sweep()
    assert (first_bot.swept, second_bot.swept, shared.swept) == (1, 1, 1)


def test_a_table_whose_sweep_fails_is_logged_and_the_others_still_forget() -> None:
    tables = Tables()
    broken, fine = Broken(1), Counted(1)
    tables.add("broken", broken)
    tables.add("fine", fine)
    with capture_logs() as logs:
        tables.sweep()
    assert fine.swept == 1
    assert [(line["event"], line["table"]) for line in logs] == [
        ("[app] memory table not swept", "broken")]


def test_the_registry_sweeps_a_real_cache_on_its_clock(clock: FakeClock) -> None:
    """The chore's call reaches a table's own rule: a cache unused for two periods empties."""
    cache: RecentCache[str, int] = RecentCache(10, 60.0, clock)
    cache.put("a", 1)
    tables = Tables()
    tables.add("cache", cache)
    for _ in range(2):
        clock.advance(60.0)
        tables.sweep()
    assert tables.figures()[0].entries == 0


def test_an_entry_is_measured_with_what_it_holds_each_object_once() -> None:
    text = "x" * 100
    assert entry_bytes(text) == sys.getsizeof(text)
    pair = (text, text)
    assert entry_bytes(pair) == sys.getsizeof(pair) + sys.getsizeof(text)  # shared: once
    assert entry_bytes({"k": [1.5]}) == (sys.getsizeof({"k": [1.5]}) + sys.getsizeof("k")
                                         + sys.getsizeof([1.5]) + sys.getsizeof(1.5))
    assert entry_bytes(None) == entry_bytes(True) == entry_bytes(int) == 0

    class Slotted:
        __slots__ = ("a", "b")

        def __init__(self) -> None:
            self.a = "y" * 50

    one = Slotted()  # b unset: nothing
    assert entry_bytes(one) == sys.getsizeof(one) + sys.getsizeof(one.a)


def test_an_estimate_scales_a_sample_to_the_count() -> None:
    table = {f"key {n:04d}": float(n) for n in range(1000)}
    entry = entry_bytes(("key 0000", 0.0))
    assert estimate(len(table), (table,), table.items()) == sys.getsizeof(table) + 1000 * entry
    assert estimate(0, (table,), ()) == sys.getsizeof(table)


def test_an_estimate_of_a_table_a_thread_changes_meanwhile_leaves_the_sample_out() -> None:
    table = {n: n for n in range(100)}

    def changing() -> Iterator[tuple[int, int]]:
        yield 1, 1
        raise RuntimeError("dictionary changed size during iteration")

    assert estimate(100, (table,), changing()) == sys.getsizeof(table)


def test_a_table_far_emptier_than_it_grew_is_copied_in_order() -> None:
    table = OrderedDict((n, n) for n in range(10_000))
    assert compacted(table) is table  # full: left as it is
    for n in range(9_990):
        del table[n]
    smaller = compacted(table)
    assert type(smaller) is OrderedDict and list(smaller.items()) == list(table.items())
    assert sys.getsizeof(smaller) < sys.getsizeof(table) / 20
    assert compacted(smaller) is smaller
