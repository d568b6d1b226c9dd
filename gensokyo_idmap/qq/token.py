"""The bot's access token (reference qq-platform.md §1): fetched, cached, refreshed early.

``POST token_url`` with ``{"appId", "clientSecret"}`` answers ``{"access_token",
"expires_in"}`` (seconds, a number or a string). The token is reused until it has less than
``refresh_margin`` seconds left (the platform hands out a new one only in the last 60 s);
:meth:`invalidate` drops it after a 401 or a gateway close 4004. Concurrent callers share
one request. Neither the secret nor the token ever appears in a log line or an error.

The daemon does not wait for its first reply to find out that the secret is wrong or the
platform out of reach: :meth:`AccessTokenManager.keep_fresh` fetches a token at start and
again before each one expires, retrying a failure with backoff, and
:attr:`~AccessTokenManager.failure` says why the last attempt failed (``/readyz``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final

import aiohttp
import structlog

from gensokyo_idmap.errors import PlatformError

__all__ = ["DEFAULT_TOKEN_URL", "AccessTokenManager"]

log = structlog.get_logger("gensokyo_idmap.qq.token")

DEFAULT_TOKEN_URL: Final = "https://bots.qq.com/app/getAppAccessToken"


def _expires_in(value: object) -> float:
    if isinstance(value, bool):
        raise ValueError("boolean")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and value.strip().replace(".", "", 1).isdigit():
        return float(value.strip())
    raise ValueError(f"expires_in {value!r}")


class AccessTokenManager:
    def __init__(
        self,
        app_id: str,
        secret: str,
        session: aiohttp.ClientSession,
        *,
        token_url: str = DEFAULT_TOKEN_URL,
        refresh_margin: float = 50.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app_id = app_id
        self._secret = secret
        self._session = session
        self.token_url = token_url
        self._margin = refresh_margin
        self._clock = clock
        self._token: str | None = None
        self._expires_at = 0.0
        self._inflight: asyncio.Task[str] | None = None
        self.fetches = 0
        #: whether a token was ever obtained; why the last attempt failed (None after one
        #: that did not): what readiness reports, never the secret
        self.obtained = False
        self.failure: str | None = None

    def __repr__(self) -> str:
        return f"AccessTokenManager(app_id={self.app_id!r}, token_url={self.token_url!r})"

    async def get(self) -> str:
        """A valid access token (fetched when missing or about to expire)."""
        if self._token is not None and self._clock() < self._expires_at - self._margin:
            return self._token
        if self._inflight is None:
            self._inflight = asyncio.create_task(self._fetch())
        task = self._inflight
        try:
            return await asyncio.shield(task)
        finally:
            if task.done() and self._inflight is task:
                self._inflight = None

    async def authorization(self) -> str:
        """The ``Authorization`` header value for OpenAPI calls and the gateway token."""
        return f"QQBot {await self.get()}"

    def invalidate(self) -> None:
        """Forget the token (after a 401 or a gateway close 4004): the next get() fetches."""
        self._token = None
        self._expires_at = 0.0

    async def keep_fresh(self, first_delay: float = 1.0, max_delay: float = 60.0) -> None:
        """Hold a valid token until cancelled: fetch one now, and a new one once it enters
        the refresh margin (looking at least every ``max_delay``); a failure is logged and
        tried again after ``first_delay``, doubling up to ``max_delay`` (the platform may
        be down, or the secret wrong: the operator sees which in the log and ``/readyz``)."""
        delay = first_delay
        while True:
            try:
                await self.get()
            except PlatformError as err:
                log.warning("[qq] access token not obtained", app_id=self.app_id,
                            reason=err.message, retry_in=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, max_delay)
                continue
            delay = first_delay
            # looks again at least every max_delay: a get() of a valid token is free
            await asyncio.sleep(min(max(self._expires_at - self._margin - self._clock(),
                                        first_delay), max_delay))

    async def _fetch(self) -> str:
        try:
            token = await self._request()
        except PlatformError as err:
            self.failure = err.message
            raise
        self.obtained = True
        self.failure = None
        return token

    async def _request(self) -> str:
        self.fetches += 1
        body = {"appId": self.app_id, "clientSecret": self._secret}
        try:
            async with self._session.post(self.token_url, json=body) as resp:
                status = resp.status
                try:
                    data = await resp.json(content_type=None)
                except ValueError:
                    data = None
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise PlatformError(
                f"access token request to {self.token_url} failed: {type(exc).__name__}"
            ) from None
        token = data.get("access_token") if isinstance(data, dict) else None
        if status != 200 or not isinstance(token, str) or not token:
            code = data.get("code") if isinstance(data, dict) else None
            message = data.get("message") if isinstance(data, dict) else None
            raise PlatformError(
                f"access token refused by {self.token_url}: HTTP {status}, code {code}, "
                f"message {message!r}"
            )
        try:
            lifetime = _expires_in(data.get("expires_in"))
        except ValueError as exc:
            raise PlatformError(f"access token answer has a bad expires_in ({exc})") from None
        self._token = token
        self._expires_at = self._clock() + lifetime
        log.info("[qq] access token fetched", app_id=self.app_id, expires_in=lifetime)
        return token
