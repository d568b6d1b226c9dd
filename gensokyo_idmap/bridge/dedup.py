"""What a QQ event is known by for de-duplication, and for how long: the platform side of
the delivery claims of :mod:`gensokyo_idmap.runtime.claims`, which know neither events nor
the webhook."""

from __future__ import annotations

from gensokyo_idmap.qq.events import QQEvent
from gensokyo_idmap.qq.signing import DEFAULT_MAX_AGE_SECONDS, MAX_CLOCK_SKEW_SECONDS
from gensokyo_idmap.runtime.claims import DEDUP_SECONDS

__all__ = ["delivery_key", "window_seconds"]


def delivery_key(event: QQEvent) -> str | None:
    message_id = getattr(event, "message_id", None)
    if isinstance(message_id, str) and message_id:
        return f"msg:{message_id}"
    return f"evt:{event.event_id}" if event.event_id else None


def window_seconds(max_age_seconds: float = DEFAULT_MAX_AGE_SECONDS) -> float:
    """How long deliveries are remembered (claims rule 5): a callback first received at
    ``t`` may carry a timestamp up to the skew ahead of ``t`` and is accepted until that
    timestamp is ``max_age_seconds`` old."""
    return max(DEDUP_SECONDS, max_age_seconds + MAX_CLOCK_SKEW_SECONDS)
