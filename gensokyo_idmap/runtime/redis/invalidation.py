"""The identity caches of several daemons kept true through one Redis pub/sub channel.

Each daemon publishes what its committed writes changed (:class:`~identity_cache.Changes`:
keys whose vUIN moved, vUINs whose ``last_seen`` moved) on ``<prefix>idmap:invalidate`` and
drops what the others publish from its :class:`~identity_cache.IdentityCache`.

Pub/sub delivers to whoever listens at that moment, nothing more, so every way of missing
a message is handled on the listening side:

- **Not subscribed** (starting, Redis down, the connection broke): the cache is suspended,
  serving and filling nothing, from the first error on.
- **(Re)subscribed**: every subscribe confirmation clears the cache and switches it on
  (redis-py may also reconnect by itself: its confirmation arrives all the same). What was
  published before the server took the subscription is not in memory any more.
- **Lost unnoticed** (a message dropped on the way, a connection that died silently): no
  entry outlives the cache's ``max_age``.

Publishing runs on a thread of its own, so a slow or absent Redis never holds up a write's
caller; a publish that fails is dropped (the outage logged once, as for the runtime state:
:class:`~.connection.RedisRuntime`): the other daemons' subscriptions are down too then, and
they clear their caches when they come back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final

import redis
import redis.retry
import structlog
from redis.backoff import NoBackoff

from gensokyo_idmap import jsonio
from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.redaction import redact_url
from gensokyo_idmap.runtime.redis.connection import SOCKET_TIMEOUT_SECONDS, RedisRuntime
from gensokyo_idmap.store.identity_cache import Changes, IdentityCache

__all__ = ["CHANNEL_SUFFIX", "RedisInvalidations", "decode_changes", "encode_changes"]

log = structlog.get_logger("gensokyo_idmap.store")

#: The channel is ``idmap.redis_prefix`` + this.
CHANNEL_SUFFIX: Final = "idmap:invalidate"
#: Keys and vUINs per message: a rebind of a huge set goes as several.
MAX_ITEMS_PER_MESSAGE: Final = 1000
#: How often the listener looks up from an idle channel (to stop, to check its health).
POLL_SECONDS: Final = 0.2
#: An idle subscription is PINGed this often, so one that died silently is noticed.
HEALTH_CHECK_SECONDS: Final = 5


def encode_changes(changes: Changes) -> list[bytes]:
    """``changes`` as the messages of the channel (JSON; at most
    :data:`MAX_ITEMS_PER_MESSAGE` items each)."""
    items: list[tuple[str, str | int]] = [("keys", key) for key in sorted(changes.keys)]
    items += [("vuins", vuin) for vuin in sorted(changes.vuins)]
    messages = []
    for start in range(0, len(items), MAX_ITEMS_PER_MESSAGE):
        body: dict[str, list[Any]] = {"keys": [], "vuins": []}
        for name, value in items[start:start + MAX_ITEMS_PER_MESSAGE]:
            body[name].append(value)
        messages.append(jsonio.dumps_bytes(body))
    return messages


def decode_changes(data: bytes | str) -> Changes:
    """A message of the channel; :class:`BadInputError` if it is not one of ours."""
    try:
        body = jsonio.loads(data)
    except ValueError:
        body = None
    keys = body.get("keys") if isinstance(body, dict) else None
    vuins = body.get("vuins") if isinstance(body, dict) else None
    if (not isinstance(keys, list) or not all(isinstance(key, str) for key in keys)
            or not isinstance(vuins, list)
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in vuins)):
        raise BadInputError("invalidation", str(data)[:200],
                            'must be JSON {"keys": [text …], "vuins": [integer …]}')
    return Changes(set(keys), set(vuins))


class RedisInvalidations:
    """Publisher and listener of one daemon on the channel of ``prefix`` at ``url``.

    :meth:`start` starts both threads; :meth:`publish` hands changes over (never blocks);
    :meth:`close` sends what is queued and stops.
    """

    def __init__(self, url: str, prefix: str, cache: IdentityCache, *,
                 reconnect_delay: float = 0.5) -> None:
        self.channel = prefix + CHANNEL_SUFFIX
        self.url = url
        self.cache = cache
        self._reconnect_delay = reconnect_delay
        self._log = log.bind(redis=redact_url(url), channel=self.channel)
        self._runtime = RedisRuntime(url, prefix)  # publishes; logs an outage once
        self._stop = threading.Event()
        self._queued = threading.Condition()
        self._pending = Changes()
        self._listen_failing = False
        self._threads = [
            threading.Thread(target=self._publish_loop, name="idmap-cache-publish",
                             daemon=True),
            threading.Thread(target=self._listen_loop, name="idmap-cache-listen", daemon=True),
        ]
        self.published = 0
        self.received = 0

    def start(self, *, listen: bool = True) -> None:
        """Start publishing and, with ``listen``, applying the other daemons' changes
        (without it the cache is never switched on: a one-shot command's writes)."""
        for thread in self._threads if listen else self._threads[:1]:
            thread.start()

    def publish(self, changes: Changes) -> None:
        """Queue ``changes`` for the other daemons (merged with what is still queued)."""
        with self._queued:
            self._pending.keys |= changes.keys
            self._pending.vuins |= changes.vuins
            self._queued.notify()

    def close(self) -> None:
        """Publish what is queued, stop both threads, close the connections."""
        with self._queued:
            self._stop.set()
            self._queued.notify()
        for thread in self._threads:
            if thread.is_alive():
                thread.join()
        self._runtime.sync.close()

    # --- publishing -------------------------------------------------------------------------

    def _publish_loop(self) -> None:
        while True:
            with self._queued:
                while not self._pending and not self._stop.is_set():
                    self._queued.wait()
                changes, self._pending = self._pending, Changes()
            if changes:
                self._send(changes)
            if self._stop.is_set():
                with self._queued:
                    if not self._pending:
                        return

    def _send(self, changes: Changes) -> None:
        """Publish ``changes``; a failure is logged once per outage and the changes dropped.
        Every batch is tried, even just after a failure (not :meth:`RedisRuntime.softly`,
        which skips Redis for a while): an invalidation skipped while Redis is back would
        leave the other daemons' caches stale until the age bound."""
        try:
            for message in encode_changes(changes):
                self._runtime.sync.publish(self.channel, message)
                self.published += 1
        except redis.RedisError as exc:
            self._runtime.failed(exc, effect=(
                "identity cache invalidations are not published: the other daemons forget "
                "their cached identities when their subscription comes back, or by age"))
            return
        self._runtime.answered()

    # --- listening --------------------------------------------------------------------------

    def _listen_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._listen()
            except (redis.RedisError, OSError) as exc:
                self.cache.suspend()
                if not self._listen_failing:
                    self._listen_failing = True
                    self._log.warning(
                        "[idmap] identity cache suspended: invalidation channel lost",
                        reason=_reason(exc),
                        effect="every resolve asks the identity store until it is back")
                self._stop.wait(self._reconnect_delay)

    def _listen(self) -> None:
        """Subscribe and apply messages until stopped; raises when the connection fails."""
        client = redis.Redis.from_url(
            self.url, socket_timeout=SOCKET_TIMEOUT_SECONDS,
            socket_connect_timeout=SOCKET_TIMEOUT_SECONDS,
            health_check_interval=HEALTH_CHECK_SECONDS,
            retry=redis.retry.Retry(NoBackoff(), 0))  # a broken connection: tell us at once
        # redis-py before 8.2 leaves pubsub() untyped, 8.2 types it: a typed reference
        # keeps mypy strict quiet under both, with no ignore that one of them finds unused
        open_pubsub: Callable[[], Any] = client.pubsub
        pubsub = open_pubsub()
        try:
            pubsub.subscribe(self.channel)
            while not self._stop.is_set():
                message = pubsub.get_message(timeout=POLL_SECONDS)
                if message is not None:
                    self._apply(message)
        finally:
            pubsub.close()
            client.close()

    def _apply(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "subscribe":  # (re)subscribed: what came before is unknown
            self.cache.clear()
            self._listen_failing = False
            self._log.info("[idmap] identity cache live", size=self.cache.size,
                           max_age_seconds=self.cache.max_age)
        elif kind == "message":
            self.received += 1
            try:
                changes = decode_changes(message["data"])
            except BadInputError as err:
                self._log.warning("[idmap] cache invalidation not understood: cache cleared",
                                  reason=err.message)
                self.cache.clear()
                return
            self.cache.invalidate(changes.keys, changes.vuins)


def _reason(exc: BaseException) -> str:
    return redact_url(f"{type(exc).__name__}: {exc}")
