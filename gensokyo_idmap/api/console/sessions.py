"""Logged-in console sessions and their CSRF tokens (pure: ids and clocks in, decisions out).

After the login form took the token (``api.token``), the browser keeps only a random
session id, in a cookie that is ``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no
other site's page sends it) and ``Secure`` when the browser came over HTTPS. The token itself
is never stored in the browser. Each session has its own CSRF token, which every form
carries back; both are compared in constant time. Only a login makes a session: a visitor
who has not logged in holds a signed token instead (:mod:`.form_tokens`), so anonymous
requests, however many, push no session out. Sessions live in memory: a restart logs
everyone out, which is the safe way round for an operator console.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from gensokyo_idmap.api.access import same_token
from gensokyo_idmap.tables import estimate

__all__ = ["COOKIE", "Session", "Sessions"]

#: The cookie holding the session id (its path is the console's, ``/ui/``).
COOKIE: Final = "gsk_console"


@dataclass(slots=True)
class Session:
    id: str
    csrf: str
    seen: float

    def csrf_ok(self, presented: str | None) -> bool:
        return bool(presented) and same_token(presented or "", self.csrf)


class Sessions:
    """At most ``limit`` logged-in sessions (the least recently used go first: only a holder
    of the token can make one), each forgotten after ``idle_seconds`` without a request."""

    def __init__(self, idle_seconds: float = 12 * 3600, limit: int = 1000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._idle = idle_seconds
        self._limit = limit
        self._clock = clock

    def __len__(self) -> int:
        return len(self._sessions)

    def login(self, previous: str | None = None) -> Session:
        """A new session after a login, in place of ``previous`` (the id the browser had,
        if any): a new id, so an id known before the login (planted in the browser) is worth
        nothing after it."""
        if previous:
            self.drop(previous)
        session = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), self._clock())
        self._sessions[session.id] = session
        while len(self._sessions) > self._limit:
            self._sessions.popitem(last=False)
        return session

    def get(self, session_id: str | None) -> Session | None:
        """The live session of ``session_id`` (its idle time restarts), or None."""
        if not session_id:
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        now = self._clock()
        if now - session.seen > self._idle:
            del self._sessions[session_id]
            return None
        session.seen = now
        self._sessions.move_to_end(session_id)
        return session

    def drop(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def forget(self) -> None:
        """Drop the sessions idle for ``idle_seconds`` (a :meth:`get` would refuse them
        anyway): the memory chore's call (:mod:`gensokyo_idmap.tables`)."""
        now = self._clock()
        sessions = self._sessions
        while sessions:
            oldest = next(iter(sessions.values()))  # the least recently used
            if now - oldest.seen <= self._idle:
                break
            del sessions[oldest.id]

    def footprint(self) -> int:
        return estimate(len(self._sessions), (self._sessions,), self._sessions.items())
