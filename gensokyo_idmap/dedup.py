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
    """Event keys processed (or in flight) recently.

    An entry is a timestamp; only while a delivery is in flight and a repeat waits for it
    is there a future too. A future per entry (100k of them kept for five minutes) made
    every full garbage collection walk them, and cost a future per event for the rare repeat.
    """

    def __init__(self, ttl: float = DEDUP_SECONDS, limit: int = _DEDUP_MAX,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._limit = limit
        self._clock = clock
        self._seen: OrderedDict[str, float] = OrderedDict()  # key → when claimed
        self._oldest_expires = float("inf")  # when the oldest entry is due to be forgotten
        # key → the future repeats wait on (None: in flight, nobody waiting yet)
        self._in_flight: dict[str, asyncio.Future[None] | None] = {}

    def claim(self, key: str) -> asyncio.Future[None] | None:
        """None: the caller processes ``key`` now. A future: someone did or is doing it."""
        now = self._clock()
        seen = self._seen
        if now >= self._oldest_expires or len(seen) >= self._limit:
            self._forget_old(now)
        if key in seen:
            loop = asyncio.get_running_loop()
            if key in self._in_flight:
                waiting = self._in_flight[key]
                if waiting is None:
                    waiting = self._in_flight[key] = loop.create_future()
                return waiting
            done: asyncio.Future[None] = loop.create_future()
            done.set_result(None)
            return done
        self._add(key, now)
        self._in_flight[key] = None
        return None

    def _add(self, key: str, now: float) -> None:
        if not self._seen:
            self._oldest_expires = now + self._ttl
        self._seen[key] = now

    def _forget_old(self, now: float) -> None:
        """Drop entries past their time, and the oldest beyond the count limit (checked only
        when one is due: a look at the oldest entry per event was a visible cost)."""
        seen = self._seen
        while seen:
            oldest, at = next(iter(seen.items()))
            if now - at < self._ttl and len(seen) < self._limit:
                self._oldest_expires = at + self._ttl
                return
            del seen[oldest]
        self._oldest_expires = float("inf")

    def remember(self, key: str) -> None:
        """Record ``key`` as processed (e.g. its events were owed from before a restart)."""
        if key not in self._seen:
            self._add(key, self._clock())

    def finish(self, key: str, error: BaseException | None) -> None:
        if key not in self._in_flight:
            return
        waiting = self._in_flight.pop(key)
        if error is not None:
            self._seen.pop(key, None)  # not processed: a redelivery must try again
        if waiting is None or waiting.done():
            return
        if error is not None:
            waiting.set_exception(error)
            waiting.exception()  # retrieved here: waiters re-raise it themselves
        else:
            waiting.set_result(None)
