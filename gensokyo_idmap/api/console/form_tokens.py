"""CSRF tokens for visitors without a session, kept nowhere on the server: a signed double
submit (pure: a key and a clock in, tokens and yes/no out).

The login page (and every page when no ``api.token`` is set, where the peer's address is
what admits it) sends a token in a cookie and the same token in each form. A POST passes
when the form's token equals the cookie's, and the token carries this process's signature
and is at most :data:`MAX_AGE` old. Nothing is stored per visitor, so no number of visitors
can push anything out (a session per anonymous visit could: 1,100 cookie-less requests
logged every operator out). Another site's page can neither read the cookie nor make one
that verifies: it lacks the key.

The key is random per process: a restart turns down forms opened before it, which say
"reload the page".
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from typing import Final

from gensokyo_idmap.api.access import same_token

__all__ = ["COOKIE", "MAX_AGE", "FormTokens"]

#: The cookie holding the token of a visitor without a session (path ``/ui/``).
COOKIE: Final = "gsk_csrf"
#: How long a token is good for: a page left open longer is reloaded before its form works.
MAX_AGE: Final = 12 * 3600.0
#: A token with less time left than this is replaced when a page is rendered.
RENEW: Final = 3600.0


class FormTokens:
    """Tokens ``<issued>.<nonce>.<signature>``: ``issued`` in whole seconds of ``clock``
    (monotonic: the key dies with the process anyway), the signature HMAC-SHA256 of the
    rest under the process's key."""

    def __init__(self, key: bytes | None = None, *, max_age: float = MAX_AGE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._key = key if key is not None else secrets.token_bytes(32)
        self._max_age = max_age
        self._renew = min(RENEW, max_age / 2)
        self._clock = clock

    def issue(self) -> str:
        payload = f"{int(self._clock())}.{secrets.token_urlsafe(16)}"
        return f"{payload}.{self._sign(payload)}"

    def _sign(self, payload: str) -> str:
        digest = hmac.new(self._key, payload.encode("utf-8", "surrogatepass"),
                          hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")

    def age(self, token: str | None) -> float | None:
        """How old ``token`` is, or None when it is not a live one of ours (another shape,
        a signature that is not exactly ours as text, expired)."""
        if not token or token.count(".") != 2:
            return None
        payload, _, signature = token.rpartition(".")
        if not same_token(signature, self._sign(payload)):
            return None
        issued = payload.partition(".")[0]
        if not (issued.isascii() and issued.isdigit()):
            return None  # not ours: ours are signed only as issue() writes them
        age = self._clock() - int(issued)
        return age if 0 <= age <= self._max_age else None

    def current(self, cookie: str | None) -> tuple[str, bool]:
        """The token a page's forms carry: the cookie's while it has :data:`RENEW` left (half
        its life, if shorter), else a new one (then True: the cookie is to be set). Keeping
        it lets two open tabs share one token."""
        age = self.age(cookie)
        if cookie is not None and age is not None and age < self._max_age - self._renew:
            return cookie, False
        return self.issue(), True

    def passes(self, cookie: str | None, presented: str | None) -> bool:
        """Whether a form's token is the cookie's, and the cookie's is a live one of ours."""
        return bool(cookie) and bool(presented) and \
            same_token(presented or "", cookie or "") and self.age(cookie) is not None
