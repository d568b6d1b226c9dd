"""The delivery keys' table without an object per key (runtime/key_times.py): what a dict
of key → time would answer, through growth, moves, removals and the front lapsing, and its
memory back after a flood."""

from __future__ import annotations

import random

from gensokyo_idmap.runtime.key_times import KeyTimes

NEVER = float("-inf")


def test_it_answers_as_a_dict_of_times_in_the_order_put() -> None:
    table, model = KeyTimes(), {}
    rng = random.Random(36)
    now = 0.0
    for step in range(20_000):
        now += 0.01
        key = f"msg:{rng.randrange(3_000)}"
        action = rng.random()
        if action < 0.5:
            table.put(key, now)
            model.pop(key, None)
            model[key] = now
        elif action < 0.6:
            assert table.renew(key, now) == (key in model)
            if key in model:
                del model[key]
                model[key] = now
        elif action < 0.7:
            table.discard(key)
            model.pop(key, None)
        elif action < 0.72:
            cutoff = now - 5.0
            room = rng.randrange(5)
            early = table.drop_front(cutoff, room)
            gone = 0
            for k in list(model):
                if model[k] > cutoff:
                    if gone >= room:
                        break
                    early -= 1
                gone += 1
                del model[k]
            assert early == 0, step
        assert table.get(key, NEVER) == model.get(key, NEVER)
        assert (key in table) == (key in model)
        assert len(table) == len(model)
        number = table.number(key)  # where a caller finds what it keeps beside the entry
        if key in model:
            assert number >= table.first and table.time_of(number) == model[key]
        else:
            assert number == -1
    assert table.first_time() == next(iter(model.values()), None)
    assert all(table.get(k, NEVER) == t for k, t in model.items())


def test_an_entry_keeps_its_number_as_the_front_is_dropped() -> None:
    """A caller's arrays beside the log stay aligned: the entry numbered n is the n-th put,
    and after the front is dropped it is ``n - first`` from the front."""
    table = KeyTimes()
    for n in range(6):
        table.put(f"k{n}", float(n))
    table.put("k1", 6.0)  # moved on: a new entry, numbered 6
    assert [table.number(f"k{n}") for n in range(6)] == [0, 6, 2, 3, 4, 5]
    table.drop_front(cutoff=2.5, room=0)  # k0, k2 lapse; the moved-on entry 1 goes too
    assert table.first == 3
    assert [table.number(f"k{n}") for n in range(6)] == [-1, 6, -1, 3, 4, 5]
    assert table.time_of(table.number("k1")) == 6.0


def test_keys_whose_hashes_share_a_slot_are_told_apart() -> None:
    table = KeyTimes()
    for n in (8, 16, 24, 32, 40):  # hash(n) == n: one slot of a small index
        table.put(n, float(n))
    table.discard(16)
    assert [table.get(n, NEVER) for n in (8, 16, 24, 32, 40)] == [8.0, NEVER, 24.0, 32.0, 40.0]


def test_a_flood_of_keys_gives_its_memory_back_once_they_lapse() -> None:
    table = KeyTimes()
    empty = table.footprint()
    for n in range(50_000):
        table.put(f"msg:ROBOT1.0_{n}", n / 1000)  # 50 s of a flood
    flooded = table.footprint()
    assert flooded > 50_000 * 16
    for n in range(10):
        table.put(f"msg:quiet{n}", 400.0 + n)  # the traffic after it
    assert table.drop_front(cutoff=300.0, room=0) == 0
    assert len(table) == 10
    assert table.footprint() < empty + 4096  # the arrays and the index shrunk
    assert table.get("msg:ROBOT1.0_7", NEVER) == NEVER
    assert table.get("msg:quiet3", NEVER) == 403.0
    assert table.first_time() == 400.0


def test_room_drops_the_oldest_not_yet_lapsed_and_says_how_many() -> None:
    table = KeyTimes()
    for n in range(5):
        table.put(f"k{n}", float(n))
    assert table.drop_front(cutoff=0.5, room=3) == 2  # k0 lapsed, k1 and k2 for room
    assert [table.get(f"k{n}", NEVER) for n in range(5)] == [NEVER, NEVER, NEVER, 3.0, 4.0]
