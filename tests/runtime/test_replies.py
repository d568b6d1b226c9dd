"""Passive replies: msg_seq per msg_id / event_id, the per-id budget and its LRU cap."""

from __future__ import annotations

import gc
import tracemalloc
from collections import Counter, OrderedDict
from dataclasses import dataclass

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gensokyo_idmap.runtime.msgid import MessageIds, MsgContext
from gensokyo_idmap.runtime.redis.state import RedisMsgIdMap, RedisReplyBudget
from gensokyo_idmap.runtime.replies import MAX_REPLIES, REPLY_WINDOW_SECONDS, ReplyBudget, ReplyTo

from ..conftest import MSGID_BACKENDS, FakeClock, msgid_map


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


def test_steady_replies_keep_the_memory_flat_once_every_window_turned_over() -> None:
    """The soak's mix (3 group replies and 1 C2C reply a second, each to a new message) for
    five hours of the fake clock: the bytes the budget holds stop moving once its tables
    have reached their steady size. A dict that loses and gains keys at the same rate
    settles at the power of two above three times what it holds; the size it reached while
    filling (first hour) can be half that, so one resize comes some minutes after the C2C
    window has turned over (at minute 75 with the soak's 20 replies a second), and none
    after. A budget that forgot nothing would grow by 14,400 ids an hour."""
    clock = FakeClock()
    budget = ReplyBudget(clock=clock)
    group, c2c = REPLY_WINDOW_SECONDS["group"], REPLY_WINDOW_SECONDS["c2c"]
    held_per_hour: list[int] = []
    tracemalloc.start()
    try:
        n = 0
        for second in range(5 * 3600):
            for kind in range(4):
                budget.take(f"m{n:09d}", c2c if kind == 0 else group)
                n += 1
            clock.advance(1)
            if second % 3600 == 3599:
                gc.collect()
                held_per_hour.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    assert len(budget) == 3 * group + c2c  # the replies of the last window, no more
    third, fourth, fifth = held_per_hour[2:]
    assert abs(fourth - third) < 16 * 1024 and abs(fifth - third) < 16 * 1024, held_per_hour


def test_the_memory_chore_forgets_the_counts_and_chats_of_lapsed_windows() -> None:
    """After a burst of replies nothing more is taken: forget() (the memory chore, once a
    minute) drops each count and chat once its window lapsed, and only then, and gives the
    tables' memory back."""
    clock = FakeClock()
    budget = ReplyBudget(clock=clock)
    group, c2c = REPLY_WINDOW_SECONDS["group"], REPLY_WINDOW_SECONDS["c2c"]
    for n in range(5000):
        budget.take(f"m{n}", group)
    budget.take("c2c", c2c)
    burst = budget.footprint()
    budget.take_newest(G, Chat().newest, group)
    clock.advance(group - 1)
    budget.forget()
    assert len(budget) == 5001 and budget.chats() == 1  # within their windows: kept
    assert budget.used("m1") == 1
    clock.advance(2)
    budget.forget()
    assert len(budget) == 1 and budget.used("c2c") == 1 and budget.chats() == 0
    assert budget.footprint() < burst / 50
    clock.advance(c2c)
    budget.forget()
    assert len(budget) == 0


# --- the newest message with replies left (take_newest, SpentRuns) -------------------------


@dataclass(frozen=True)
class Message:
    real_id: str
    created_ms: int
    virtual_id: int


G, OTHER = ("A", "group", "g"), ("A", "group", "other")


class Chat:
    """A chat's received messages, newest last; ``since`` is the window's lower edge
    (position), as the message-id map's ``latest_inbound`` sees them. Counts the seeks."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.since: tuple[int, int] = (0, 0)
        self.seeks = 0
        self.received = 0

    def receive(self, created_ms: int | None = None) -> Message:
        self.received += 1
        n = self.received
        created = created_ms if created_ms is not None else n * 10
        message = Message(f"m{n}", created, n)
        self.messages.append(message)
        return message

    def newest(self, below: tuple[int, int] | None) -> Message | None:
        self.seeks += 1
        for message in reversed(self.messages):
            at = (message.created_ms, message.virtual_id)
            if at < self.since:
                return None
            if below is None or at < below:
                return message
        return None


def test_after_n_messages_the_next_5n_replies_all_find_one_newest_first() -> None:
    budget, chat = ReplyBudget(), Chat()
    for _ in range(400):
        chat.receive()
    chosen = []
    for _ in range(5 * 400):
        taken = budget.take_newest(G, chat.newest, 300)
        assert taken is not None
        chosen.append(taken)
    assert chosen == [(f"m{n}", seq) for n in range(400, 0, -1) for seq in range(1, 6)]
    assert budget.take_newest(G, chat.newest, 300) is None  # all 2,000 replies are spent
    # a few seeks per reply, not one per message used up (the old walk: up to 64)
    assert chat.seeks <= 3 * 2000
    [run] = budget._runs_of(G, 300).runs()
    assert run == ((10, 1), (4000, 400))


def test_a_new_message_is_answered_first_then_the_older_ones_go_on() -> None:
    budget, chat = ReplyBudget(), Chat()
    for _ in range(3):
        chat.receive()
    for _ in range(6):
        budget.take_newest(G, chat.newest, 300)  # m3 spent, m2 once
    chat.receive()  # m4
    taken = [budget.take_newest(G, chat.newest, 300) for _ in range(5 + 4 + 5 + 1)]
    assert [t for t in taken if t is not None] == (
        [("m4", n) for n in range(1, 6)] + [("m2", n) for n in range(2, 6)]
        + [("m1", n) for n in range(1, 6)])
    assert taken[-1] is None
    [run] = budget._runs_of(G, 300).runs()  # m4 on top of the run of m1..m3: one run
    assert run == ((10, 1), (40, 4))


def test_spent_elsewhere_is_stepped_over_and_chats_are_apart() -> None:
    budget, chat, other = ReplyBudget(), Chat(), Chat()
    for _ in range(3):
        chat.receive()
        other.receive()
    budget.use_up("m3")  # the platform said so (or an explicit reply spent it)
    taken = budget.take_newest(G, chat.newest, 300)
    assert taken is not None and taken[0] == "m2"
    for _ in range(5):
        budget.take("m2")  # replies through reply segments
    taken = budget.take_newest(G, chat.newest, 300)
    assert taken is not None and taken[0] == "m1"
    # another chat with the same real ids (a test's shortcut) has runs of its own, though
    # the counts of its ids are shared: m3 and m2 are spent there too
    found = budget.take_newest(OTHER, other.newest, 300)
    assert found is not None and found[0] == "m1"


def test_runs_below_the_window_are_dropped_and_idle_chats_forgotten() -> None:
    clock = FakeClock()
    budget, chat = ReplyBudget(clock=clock), Chat()
    for _ in range(4):
        chat.receive()
    for _ in range(5 * 4):
        budget.take_newest(G, chat.newest, 300)
    chat.since = (1_000, 0)  # every message is out of the window now
    assert budget.take_newest(G, chat.newest, 300) is None
    assert budget._runs_of(G, 300).runs() == []
    assert budget.chats() == 1
    clock.advance(301)
    budget.take_newest(("A", "group", "another"), Chat().newest, 300)
    assert budget.chats() == 1  # "g" took no reply for a whole window: forgotten


def test_a_run_whose_messages_vanished_is_taken_into_the_run_above() -> None:
    budget, chat = ReplyBudget(limit=1), Chat()
    _, _, m3 = chat.receive(), chat.receive(), chat.receive()
    assert [budget.take_newest(G, chat.newest, 300) for _ in range(2)] == [("m3", 1),
                                                                             ("m2", 1)]
    assert budget._runs_of(G, 300).runs() == [((30, 3), (30, 3))]  # m2 is not known spent
    chat.messages.remove(m3)  # its record expired
    m4 = chat.receive()
    budget.take(m4.real_id)  # a reply segment named it
    assert budget.take_newest(G, chat.newest, 300) == ("m1", 1)
    assert budget._runs_of(G, 300).runs() == [((20, 2), (40, 4))]


def test_a_message_received_under_a_spent_run_whose_newest_vanished_is_answered() -> None:
    """The run of A..B stands for what was live then: once B is gone, C (received later,
    dated between them) lies inside it, and is still the newest message with a reply left;
    so are D and E, received after it, once C is spent."""
    budget, chat = ReplyBudget(limit=1), Chat()
    a, b = chat.receive(0), chat.receive(10)
    assert [budget.take_newest(G, chat.newest, 300) for _ in range(3)] == [("m2", 1),
                                                                             ("m1", 1), None]
    assert budget._runs_of(G, 300).runs() == [((0, 1), (10, 2))]
    chat.messages.remove(b)  # its record expired
    chat.receive(0)  # m3 at (0, 3): inside the run
    assert budget.take_newest(G, chat.newest, 300) == ("m3", 1)
    chat.receive(1), chat.receive(2)  # m4, m5: inside the run's old span too
    assert [budget.take_newest(G, chat.newest, 300) for _ in range(3)] == [("m5", 1),
                                                                             ("m4", 1), None]
    assert budget._runs_of(G, 300).runs() == [((a.created_ms, a.virtual_id), (2, 5))]


@pytest.mark.parametrize("backend", MSGID_BACKENDS)
def test_a_message_stored_after_the_clock_stepped_back_is_answered(
        backend: str, request: pytest.FixtureRequest) -> None:
    """The daemon dates a message by its own clock (``created_ms``): after the clock steps
    back, B is dated after it (out of the walk), and C, stored now, stands between A and B,
    where the spent run of A..B was. It is the newest message with a reply left."""
    clock = FakeClock()
    msgids: MessageIds = msgid_map(backend, request, clock, 3600)
    budget = (RedisReplyBudget(msgids.ids, limit=1, wall_clock=clock)
              if isinstance(msgids, RedisMsgIdMap) else ReplyBudget(limit=1))
    group = MsgContext("A", "group", "g", "in")

    def choose() -> str | None:
        with msgids.inbound_walk("A", "group", "g", 300) as newest:
            taken = budget.take_newest(("A", "group", "g"), newest, 300)
        return None if taken is None else taken[0]

    msgids.store_real_sync("A", group)
    clock.advance(1)
    msgids.store_real_sync("B", group)
    assert [choose(), choose(), choose()] == ["B", "A", None]
    clock.advance(-0.5)  # an NTP step back
    msgids.store_real_sync("C", group)
    assert [choose(), choose()] == ["C", None]


operations = st.lists(st.one_of(
    st.tuples(st.just("receive"), st.integers(0, 3)),  # ms after the newest message
    st.tuples(st.just("send"), st.integers(1, 8)),
    st.tuples(st.just("use_up"), st.integers(0, 30)),
    st.tuples(st.just("reply"), st.integers(0, 30)),  # a reply segment naming a message
    st.tuples(st.just("window"), st.integers(0, 30)),  # the window's edge moves up
    st.tuples(st.just("vanish"), st.integers(0, 30)),  # its record is gone (expired)
), max_size=80)


@settings(max_examples=300)
@given(operations, st.integers(1, 5))
# the newest message of a spent run vanished, and a new one landed under the run's top
@example([("receive", 0), ("receive", 1), ("send", 1), ("send", 1), ("send", 1), ("vanish", 1),
          ("receive", 0), ("send", 1)], 1)
def test_take_newest_matches_a_walk_over_every_message(ops: list[tuple[str, int]],
                                                       limit: int) -> None:
    """Whatever arrives, is spent elsewhere, vanishes or leaves the window, the choice is the newest
    message in the window with fewer than ``limit`` replies: what a walk over all of them
    finds."""
    budget, chat = ReplyBudget(limit=limit, remembered=10_000), Chat()
    used: Counter[str] = Counter()
    for op, n in ops:
        if op == "receive":
            last = chat.messages[-1].created_ms if chat.messages else 0
            chat.receive(last + n)
        elif op in ("use_up", "reply") and chat.messages:
            message = chat.messages[n % len(chat.messages)]
            if op == "use_up":
                budget.use_up(message.real_id)
                used[message.real_id] = max(used[message.real_id], limit)
            else:
                budget.take(message.real_id)
                used[message.real_id] += 1
        elif op == "vanish" and chat.messages:
            chat.messages.pop(n % len(chat.messages))
        elif op == "window" and chat.messages:
            message = chat.messages[n % len(chat.messages)]
            chat.since = max(chat.since, (message.created_ms, message.virtual_id))
        elif op == "send":
            for _ in range(n):
                expected = next((m for m in reversed(chat.messages)
                                 if (m.created_ms, m.virtual_id) >= chat.since
                                 and used[m.real_id] < limit), None)
                taken = budget.take_newest(G, chat.newest, 300)
                if expected is None:
                    assert taken is None
                else:
                    assert taken is not None and taken[0] == expected.real_id
                    used[expected.real_id] += 1
                    assert taken[1] == used[expected.real_id]
        runs = budget._runs_of(G, 300).runs()
        assert all(low <= high for low, high in runs)
        assert all(a[1] < b[0] for a, b in zip(runs, runs[1:], strict=False))


def test_choices_on_several_threads_at_once_give_each_message_five_replies() -> None:
    """With the graph or the message ids on a server the choice runs on worker threads:
    several at once must still be one choice and one count each."""
    import sys
    import threading

    budget, chat = ReplyBudget(), Chat()
    for _ in range(200):
        chat.receive()
    taken: list[tuple[str, int] | None] = []
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        threads = [threading.Thread(target=lambda: taken.extend(
            budget.take_newest(G, chat.newest, 300) for _ in range(260))) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    found = sorted(t for t in taken if t is not None)
    assert found == sorted((f"m{n}", k) for n in range(1, 201) for k in range(1, 6))
    assert taken.count(None) == 4 * 260 - 1000
