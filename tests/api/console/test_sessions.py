from __future__ import annotations

from gensokyo_idmap.api.console.sessions import Sessions

from ...conftest import FakeClock


def test_a_session_is_found_by_its_id_until_idle_too_long() -> None:
    clock = FakeClock(0.0)
    sessions = Sessions(idle_seconds=10, clock=clock)
    session = sessions.login()
    clock.now = 9
    assert sessions.get(session.id) is session
    clock.now = 18  # idle time restarted at 9
    assert sessions.get(session.id) is session
    clock.now = 29
    assert sessions.get(session.id) is None
    assert sessions.get("") is None and sessions.get("unknown") is None


def test_login_gives_a_new_id_and_drops_the_old_one() -> None:
    sessions = Sessions()
    before = sessions.login()
    after = sessions.login(before.id)
    assert after.id != before.id and after.csrf != before.csrf
    assert sessions.get(before.id) is None and sessions.get(after.id) is after
    assert len(sessions) == 1


def test_csrf_is_compared_whole() -> None:
    session = Sessions().login()
    assert session.csrf_ok(session.csrf)
    assert not session.csrf_ok(None) and not session.csrf_ok("")
    assert not session.csrf_ok(session.csrf[:-1]) and not session.csrf_ok(session.csrf + "x")


def test_the_least_recently_used_go_beyond_the_limit() -> None:
    sessions = Sessions(limit=2)
    first, second = sessions.login(), sessions.login()
    sessions.get(first.id)
    third = sessions.login()
    assert len(sessions) == 2
    assert sessions.get(second.id) is None
    assert sessions.get(first.id) is first and sessions.get(third.id) is third


def test_the_memory_chore_forgets_the_sessions_idle_too_long() -> None:
    """What get() would refuse, forget() drops: a session a browser left open does not
    stay in memory until it comes back."""
    clock = FakeClock(0.0)
    sessions = Sessions(idle_seconds=10, limit=3, clock=clock)
    idle, used = sessions.login(), sessions.login()
    clock.now = 9
    assert sessions.get(used.id) is used  # its idle time restarts
    clock.now = 10
    sessions.forget()
    assert len(sessions) == 2  # idle for exactly its time: still good
    clock.now = 11
    sessions.forget()
    assert len(sessions) == 1 and sessions.get(used.id) is used
    assert sessions.get(idle.id) is None
    assert sessions.footprint() > 0
    for _ in range(5):
        sessions.login()
        assert len(sessions) <= 3  # the bound: the least recently used go first
