from __future__ import annotations

from gensokyo_idmap.api.console.sessions import Sessions


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_session_is_found_by_its_id_until_idle_too_long() -> None:
    clock = Clock()
    sessions = Sessions(idle_seconds=10, clock=clock)
    session = sessions.new(authenticated=False)
    clock.now = 9
    assert sessions.get(session.id) is session
    clock.now = 18  # idle time restarted at 9
    assert sessions.get(session.id) is session
    clock.now = 29
    assert sessions.get(session.id) is None
    assert sessions.get("") is None and sessions.get("unknown") is None


def test_login_gives_a_new_id_and_drops_the_old_one() -> None:
    sessions = Sessions()
    before = sessions.new(authenticated=False)
    after = sessions.login(before)
    assert after.authenticated and after.id != before.id and after.csrf != before.csrf
    assert sessions.get(before.id) is None and sessions.get(after.id) is after


def test_csrf_is_compared_whole() -> None:
    session = Sessions().new(authenticated=True)
    assert session.csrf_ok(session.csrf)
    assert not session.csrf_ok(None) and not session.csrf_ok("")
    assert not session.csrf_ok(session.csrf[:-1]) and not session.csrf_ok(session.csrf + "x")


def test_the_least_recently_used_go_beyond_the_limit() -> None:
    sessions = Sessions(limit=2)
    first, second = sessions.new(True), sessions.new(True)
    sessions.get(first.id)
    third = sessions.new(True)
    assert len(sessions) == 2
    assert sessions.get(second.id) is None
    assert sessions.get(first.id) is first and sessions.get(third.id) is third
