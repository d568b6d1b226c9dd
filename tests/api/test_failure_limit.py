"""api/failure_limit.py (pure): wrong tokens per client in a sliding window, the lockout
reported once, memory bounded."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap.api.failure_limit import FailureLimit, client_key

from ..conftest import FakeClock


def test_ten_failures_a_minute_then_refused_until_the_oldest_ages_out() -> None:
    clock = FakeClock(100.0)
    limit = FailureLimit(failures=10, window=60, clock=clock)
    reported = []
    for _ in range(10):
        assert limit.retry_after("192.0.2.1") == 0
        reported.append(limit.failed("192.0.2.1"))
        clock.now += 1
    assert reported == [False] * 9 + [True]  # the lockout starts with the tenth: reported once
    assert limit.retry_after("192.0.2.1") == 50  # the first failure was at 100, now 110
    assert limit.retry_after("192.0.2.2") == 0  # another client is not touched
    clock.now = 160.5
    assert limit.retry_after("192.0.2.1") == 0  # the first aged out: one more try
    assert limit.failed("192.0.2.1") is False  # locked again, not reported again
    assert limit.retry_after("192.0.2.1") == 1


def test_a_quiet_window_forgets_the_client_and_the_right_token_too() -> None:
    clock = FakeClock(100.0)
    limit = FailureLimit(failures=3, window=60, clock=clock)
    for _ in range(3):
        limit.failed("192.0.2.1")
    assert limit.retry_after("192.0.2.1") == 60
    clock.now += 61
    assert limit.failed("192.0.2.1") is False and limit.retry_after("192.0.2.1") == 0
    limit.failed("192.0.2.1")
    assert limit.failed("192.0.2.1") is True  # a new lockout after a quiet window: reported
    limit.succeeded("192.0.2.1")
    assert limit.retry_after("192.0.2.1") == 0 and len(limit) == 0


def test_spread_failures_never_lock() -> None:
    clock = FakeClock(100.0)
    limit = FailureLimit(failures=10, window=60, clock=clock)
    for _ in range(50):
        assert limit.failed("192.0.2.1") is False
        assert limit.retry_after("192.0.2.1") == 0
        clock.now += 7  # ten span 63 s: never ten in a minute


def test_an_ipv6_client_counts_by_its_64() -> None:
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:bbbb::9") \
        == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key("::ffff:192.0.2.1") == client_key("192.0.2.1") == "192.0.2.1"
    assert client_key(None) == client_key("") == ""
    limit = FailureLimit(failures=2, clock=FakeClock(100.0))
    limit.failed("2001:db8:1:2::1")
    limit.failed("2001:db8:1:2::2")
    assert limit.retry_after("2001:db8:1:2::3") > 0


@given(st.lists(st.integers(0, 10_000), max_size=300), st.integers(1, 50))
def test_memory_is_bounded_by_the_clients_kept(addresses: list[int], clients: int) -> None:
    clock = FakeClock(100.0)
    limit = FailureLimit(failures=4, window=60, clients=clients, clock=clock)
    for n in addresses:
        limit.failed(f"10.{n // 65536}.{n // 256 % 256}.{n % 256}")
        clock.now += 0.01
        assert len(limit) <= clients
    assert all(len(entry.times) <= 4 for entry in limit._seen.values())


def test_the_memory_chore_forgets_clients_quiet_for_a_window() -> None:
    """A client whose last failure is a window old would be counted afresh and waits for
    nothing: forget() drops it; one still locked out is kept, with its wait."""
    clock = FakeClock(100.0)
    limit = FailureLimit(failures=3, window=60, clock=clock)
    limit.failed("192.0.2.1")
    clock.now = 130
    for _ in range(3):
        limit.failed("192.0.2.2")  # locked out until 190
    clock.now = 161
    limit.forget()
    assert len(limit) == 1
    assert limit.retry_after("192.0.2.2") == 29
    assert limit.retry_after("192.0.2.1") == 0
    clock.now = 191
    limit.forget()
    assert len(limit) == 0 and limit.footprint() < 4096
