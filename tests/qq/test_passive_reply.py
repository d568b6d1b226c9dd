"""Passive replies: msg_seq per msg_id / event_id, the per-id budget and its LRU cap."""

from __future__ import annotations

from collections import Counter, OrderedDict

from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap.qq.passive_reply import MAX_REPLIES, REPLY_WINDOW_SECONDS, ReplyBudget, ReplyTo

from ..conftest import FakeClock


def test_take_counts_per_reference_independently() -> None:
    budget = ReplyBudget()
    assert [budget.take("a") for _ in range(3)] == [1, 2, 3]
    assert budget.take("b") == 1
    assert budget.take("a") == 4
    assert budget.take("b") == 2
    assert budget.used("a") == 4 and budget.used("b") == 2
    assert budget.used("never") == 0


def test_none_reference_is_always_1_and_not_counted() -> None:
    budget = ReplyBudget(limit=2, remembered=1)
    budget.take("a")
    assert [budget.take(None) for _ in range(5)] == [1, 1, 1, 1, 1]
    assert budget.used("a") == 1  # None did not push "a" out of a cap of 1
    assert budget.take("a") == 2


def test_exhausted_after_limit_takes() -> None:
    budget = ReplyBudget(limit=3)
    for _ in range(2):
        budget.take("m")
        assert not budget.exhausted("m")
    budget.take("m")
    assert budget.exhausted("m")
    assert not budget.exhausted("other")


def test_default_limit_is_the_platform_five() -> None:
    budget = ReplyBudget()
    assert budget.limit == MAX_REPLIES == 5
    for _ in range(4):
        budget.take("m")
    assert not budget.exhausted("m")
    assert budget.take("m") == 5
    assert budget.exhausted("m")


def test_lru_cap_forgets_the_oldest_reference_first() -> None:
    budget = ReplyBudget(remembered=2)
    budget.take("a")
    budget.take("a")
    budget.take("b")
    budget.take("c")  # "a" is the oldest: forgotten
    assert budget.used("a") == 0
    assert budget.used("b") == 1 and budget.used("c") == 1
    assert budget.take("a") == 1  # starts over


def test_take_refreshes_a_reference() -> None:
    budget = ReplyBudget(remembered=2)
    budget.take("a")
    budget.take("b")
    budget.take("a")  # "a" is now newer than "b"
    budget.take("c")  # so "b" goes
    assert budget.used("b") == 0
    assert budget.used("a") == 2 and budget.used("c") == 1


def test_used_and_exhausted_do_not_refresh() -> None:
    budget = ReplyBudget(remembered=2)
    budget.take("a")
    budget.take("b")
    assert budget.used("a") == 1 and not budget.exhausted("a")
    budget.take("c")  # "a" is still the oldest
    assert budget.used("a") == 0 and budget.used("b") == 1


def test_reply_to_reference_prefers_msg_id() -> None:
    assert ReplyTo(msg_id="m", event_id="e").reference == "m"
    assert ReplyTo(event_id="e").reference == "e"
    assert ReplyTo(msg_id="m").reference == "m"
    assert ReplyTo().reference is None


references = st.lists(st.sampled_from(["a", "b", "c", "d", "e"]) | st.text(max_size=3),
                      max_size=60)


@given(references)
def test_take_is_one_plus_earlier_takes(refs: list[str]) -> None:
    budget = ReplyBudget(remembered=10_000)
    seen: Counter[str] = Counter()
    for ref in refs:
        assert budget.take(ref) == seen[ref] + 1
        seen[ref] += 1
    for ref, count in seen.items():
        assert budget.used(ref) == count


@given(references, st.integers(min_value=1, max_value=4))
def test_small_cap_matches_an_lru_model(refs: list[str], cap: int) -> None:
    budget = ReplyBudget(remembered=cap)
    model: OrderedDict[str, int] = OrderedDict()
    for ref in refs:
        expected = model.pop(ref, 0) + 1
        model[ref] = expected
        while len(model) > cap:
            model.popitem(last=False)
        assert budget.take(ref) == expected
    for ref in set(refs):
        assert budget.used(ref) == model.get(ref, 0)


def test_an_id_is_forgotten_a_reply_window_after_its_last_reply() -> None:
    clock = FakeClock()
    budget = ReplyBudget(clock=clock)
    group, c2c = REPLY_WINDOW_SECONDS["group"], REPLY_WINDOW_SECONDS["c2c"]
    budget.take("g", group)
    budget.take("c", c2c)
    clock.advance(group - 1)
    budget.take("g", group)  # a second reply renews its window
    clock.advance(group - 1)
    budget.take("other", group)
    assert budget.used("g") == 2  # replied to group - 1 seconds ago: kept
    clock.advance(2)
    budget.take("other", group)
    assert budget.used("g") == 0  # its window has passed: it cannot be replied to anyway
    assert budget.used("c") == 1  # a C2C message's window is an hour
    clock.advance(c2c)
    budget.take("other", group)
    assert budget.used("c") == 0


def test_memory_follows_the_replies_of_the_last_window() -> None:
    clock = FakeClock()
    budget = ReplyBudget(clock=clock)
    window = REPLY_WINDOW_SECONDS["group"]
    for n in range(5 * window):  # a reply to a new message every second, for 5 windows
        budget.take(f"m{n}", window)
        clock.advance(1)
        assert len(budget) <= window + 1
