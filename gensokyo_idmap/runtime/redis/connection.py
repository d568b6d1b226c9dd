"""The runtime state on Redis: one connection pair, key naming, and failing softly.

Redis holds only what can be lost (message ids, delivery claims, reply counts): after a
``FLUSHALL`` or a restart every daemon keeps running and what was there is simply unknown.
So a Redis that does not answer is a degraded daemon, not a stopped one: each caller says
what it does without Redis, :class:`RedisRuntime` logs the outage once (and the recovery
once), and for :data:`RETRY_AFTER_SECONDS` after a failure it does not try again, so a
Redis that hangs costs one timeout per second, not one per event.

Two clients of one library (redis-py, hiredis parsing): the asyncio one for what the
inbound path awaits, the blocking one for reads whose callers are synchronous (a send's
reply choice, the graph's recency callback, the CLI). A blocking read on the event loop
costs one round trip to a local Redis, bounded by :data:`SOCKET_TIMEOUT_SECONDS`.

A connection that broke while idle (Redis restarted) is retried once at once: every
command sent here may run twice without harm (a store of the same real id is a hit, a
claim is set again, a reply count skips one ``msg_seq``). A timeout is not retried.

Every key starts with the configured prefix (``idmap.redis_prefix``, default ``gsk:``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final, TypeVar, cast

import redis
import redis.asyncio
import redis.asyncio.retry
import redis.retry
import structlog
from redis.backoff import NoBackoff

from gensokyo_idmap import counters
from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.redaction import redact_url

__all__ = [
    "DEFAULT_REDIS_PREFIX",
    "RETRY_AFTER_SECONDS",
    "SOCKET_TIMEOUT_SECONDS",
    "RedisRuntime",
]

log = structlog.get_logger("gensokyo_idmap.store")

T = TypeVar("T")

DEFAULT_REDIS_PREFIX: Final = "gsk:"
#: A local Redis answers in well under a millisecond; one that takes this long is down.
SOCKET_TIMEOUT_SECONDS: Final = 0.5
#: After a failure, Redis is not asked again for this long (callers take their fallback).
RETRY_AFTER_SECONDS: Final = 1.0
_ROUND_TRIPS: Final = counters.BACKEND_ROUND_TRIPS.labels("redis")
_ERRORS: Final = counters.BACKEND_ERRORS.labels("redis")

C = TypeVar("C", bound=type)


def _counted(connection_class: C) -> C:
    """``connection_class`` (TCP or unix socket, sync or asyncio, as the URL chose) bumping
    ``gensokyo_backend_round_trips`` per send: a command, a script or a whole pipeline
    goes out in one send and waits for its answers."""
    send = getattr(connection_class, "send_packed_command")  # noqa: B009 - any class of redis-py

    if asyncio.iscoroutinefunction(send):
        async def send_async(self: Any, *args: Any, **kwargs: Any) -> None:
            _ROUND_TRIPS.inc()
            await send(self, *args, **kwargs)
        counting: Any = send_async
    else:
        def send_sync(self: Any, *args: Any, **kwargs: Any) -> None:
            _ROUND_TRIPS.inc()
            send(self, *args, **kwargs)
        counting = send_sync
    return cast(C, type(f"Counted{connection_class.__name__}", (connection_class,),
                        {"send_packed_command": counting}))


class RedisRuntime:
    """The Redis of one daemon's runtime state: clients, key prefix, outage bookkeeping."""

    def __init__(self, url: str, prefix: str = DEFAULT_REDIS_PREFIX, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.prefix = prefix  # checked with the configuration (IdmapConfig.redis_prefix)
        self.url = url
        try:
            self.sync = redis.Redis.from_url(
                url, socket_timeout=SOCKET_TIMEOUT_SECONDS,
                socket_connect_timeout=SOCKET_TIMEOUT_SECONDS,
                retry=redis.retry.Retry(NoBackoff(), 1, (redis.ConnectionError,)))
        except ValueError as exc:
            raise BadInputError("idmap.redis_url", redact_url(url), str(exc)) from None
        pool = self.sync.connection_pool
        pool.connection_class = _counted(pool.connection_class)
        self._clock = clock
        # the asyncio client of each event loop it is used on (one, in a daemon)
        self._aio: dict[asyncio.AbstractEventLoop, tuple[redis.asyncio.Redis,
                                                         AsyncGenerator[None, None]]] = {}
        self._down_since: float | None = None
        self._retry_at = 0.0
        self._reason: str | None = None
        self._log = log.bind(redis=redact_url(url), prefix=prefix)
        self.server = f"redis at {redact_url(url)}"  # what /healthz names

    async def aio(self) -> redis.asyncio.Redis:
        """The asyncio client of the running loop.

        Its connections belong to that loop, and a loop that ends without closing them
        leaves sockets behind; so the client is made per loop and closed as that loop
        ends: by :meth:`aclose`, or by ``asyncio.run``'s shutdown of async generators,
        which finishes the one held here (tests run each coroutine on a loop of its own).
        """
        loop = asyncio.get_running_loop()
        held = self._aio.get(loop)
        if held is None:
            client = redis.asyncio.Redis.from_url(
                self.url, socket_timeout=SOCKET_TIMEOUT_SECONDS,
                socket_connect_timeout=SOCKET_TIMEOUT_SECONDS,
                retry=redis.asyncio.retry.Retry(NoBackoff(), 1, (redis.ConnectionError,)))
            pool = client.connection_pool
            pool.connection_class = _counted(pool.connection_class)
            closer = self._close_with_loop(loop, client)
            await anext(closer)  # registered with the loop's async generators from here
            held = self._aio[loop] = (client, closer)
        return held[0]

    async def _close_with_loop(self, loop: asyncio.AbstractEventLoop,
                               client: redis.asyncio.Redis) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            self._aio.pop(loop, None)
            await client.aclose()

    def key(self, *parts: str | int) -> str:
        return self.prefix + ":".join(str(part) for part in parts)

    # --- failing softly -------------------------------------------------------------------

    def available(self) -> bool:
        """Whether to ask Redis now: not within :data:`RETRY_AFTER_SECONDS` of a failure."""
        return self._down_since is None or self._clock() >= self._retry_at

    def failed(self, exc: BaseException, effect: str) -> None:
        """A call failed: logged once per outage, with what the daemon does meanwhile."""
        _ERRORS.inc()
        now = self._clock()
        self._retry_at = now + RETRY_AFTER_SECONDS
        self._reason = f"{type(exc).__name__}: {exc}"
        if self._down_since is None:
            self._down_since = now
            self._log.error("[redis] unreachable, running degraded", reason=self._reason,
                            effect=effect, action="start Redis or fix idmap.redis_url; "
                            "the daemon goes back to it by itself")

    def answered(self) -> None:
        """A call went through: ends an outage (logged once)."""
        if self._down_since is not None:
            self._log.info("[redis] reachable again",
                           down_seconds=round(self._clock() - self._down_since, 3))
            self._down_since = None
            self._reason = None

    def softly(self, call: Callable[[], T], otherwise: T, effect: str) -> T:
        """``call()`` (blocking), or ``otherwise`` when Redis is down or fails now (then
        logged once, with ``effect``: what the daemon does without it)."""
        if not self.available():
            return otherwise
        try:
            result = call()
        except redis.RedisError as exc:
            self.failed(exc, effect)
            return otherwise
        self.answered()
        return result

    async def softly_awaited(self, call: Callable[[], Awaitable[T]], otherwise: T,
                             effect: str) -> T:
        """:meth:`softly` for a call on the asyncio client: the loop runs on meanwhile."""
        if not self.available():
            return otherwise
        try:
            result = await call()
        except redis.RedisError as exc:
            self.failed(exc, effect)
            return otherwise
        self.answered()
        return result

    # --- health (health.HealthSource) -----------------------------------------------------

    def health(self) -> str | None:
        """Why Redis is not in use now, known without asking it."""
        return None if self._reason is None else f"redis unreachable: {self._reason}"

    async def ping(self) -> None:
        """A ``PING`` on the asyncio client (health.ServerCheck): the loop never blocks
        on it. Leaves the outage bookkeeping alone: a probe is not an event."""
        await (await self.aio()).ping()

    @contextmanager
    def read(self) -> Iterator[None]:
        """A ``PING``: raises when Redis does not answer (``/healthz`` names it)."""
        self.sync.ping()
        yield

    # --- housekeeping ---------------------------------------------------------------------

    def scan(self, pattern: str) -> Iterator[bytes]:
        """Keys of this prefix matching ``pattern`` (after the prefix), by ``SCAN``."""
        yield from self.sync.scan_iter(match=self.prefix + pattern, count=1000)

    def delete_all(self) -> int:
        """Delete every key of this prefix (tests, ``FLUSHALL`` of one daemon set); how
        many. Never the whole server: others may share it."""
        deleted = 0
        batch: list[bytes] = []
        for key in self.scan("*"):
            batch.append(key)
            if len(batch) >= 1000:
                deleted += int(self.sync.unlink(*batch))
                batch.clear()
        if batch:
            deleted += int(self.sync.unlink(*batch))
        return deleted

    async def aclose(self) -> None:
        held = self._aio.get(asyncio.get_running_loop())
        if held is not None:
            await held[1].aclose()
        self.sync.close()
