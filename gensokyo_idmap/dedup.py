"""Delivery de-duplication: the same platform event is processed once, however it arrives.

The platform may push a message twice, the gateway replays after a Resume, and webhook and
gateway may both run. An event is known by its message id (``d.id``) or, for other events,
its envelope id. The log is bounded in count and in time; a repeat of an event still in
flight waits for the first delivery's outcome, and a delivery that failed is forgotten, so
a redelivery tries again.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from gensokyo_idmap.qq.events import QQEvent

__all__ = ["DEDUP_SECONDS", "DeliveryLog", "delivery_key"]

DEDUP_SECONDS: Final = 300.0
_DEDUP_MAX: Final = 100_000


def delivery_key(event: QQEvent) -> str | None:
    message_id = getattr(event, "message_id", None)
    if isinstance(message_id, str) and message_id:
        return f"msg:{message_id}"
    return f"evt:{event.event_id}" if event.event_id else None


class DeliveryLog:
    """Event keys processed (or in flight) recently."""

    def __init__(self, ttl: float = DEDUP_SECONDS, limit: int = _DEDUP_MAX,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._limit = limit
        self._clock = clock
        self._entries: OrderedDict[str, tuple[float, asyncio.Future[None]]] = OrderedDict()

    def claim(self, key: str) -> asyncio.Future[None] | None:
        """None: the caller processes ``key`` now. A future: someone did or is doing it."""
        now = self._clock()
        while self._entries:
            oldest, (at, _) = next(iter(self._entries.items()))
            if now - at < self._ttl and len(self._entries) < self._limit:
                break
            del self._entries[oldest]
        found = self._entries.get(key)
        if found is not None:
            return found[1]
        self._entries[key] = (now, asyncio.get_running_loop().create_future())
        return None

    def remember(self, key: str) -> None:
        """Record ``key`` as processed (e.g. its events were owed from before a restart)."""
        if self.claim(key) is None:
            self.finish(key, None)

    def finish(self, key: str, error: BaseException | None) -> None:
        entry = self._entries.get(key)
        if entry is None:
            return
        future = entry[1]
        if error is not None:
            del self._entries[key]  # not processed: a redelivery must try again
            if not future.done():
                future.set_exception(error)
                future.exception()  # retrieved here: waiters re-raise it themselves
        elif not future.done():
            future.set_result(None)
