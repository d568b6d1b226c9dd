"""A OneBot event as the bytes a sink sends or keeps, or nothing when it cannot be encoded.

Parsing repairs what it reads (:mod:`gensokyo_idmap.jsonio`), so every event the bridge builds
from platform text encodes. Should one still not (a bug, or a value JSON cannot hold), it is
a poison event: a sink that kept retrying it would hold up every event behind it for ever.
So the sink drops it: one error line naming the sink, one count in
``gensokyo_events_unencodable``, and the queue moves on. The event's text is not logged.
"""

from __future__ import annotations

from typing import Any

import structlog

from gensokyo_idmap import counters, jsonio

__all__ = ["event_bytes"]

log = structlog.get_logger("gensokyo_idmap.onebot")


def event_bytes(payload: Any, sink: str, kind: str, *, event: Any = None) -> bytes | None:
    """``payload`` as UTF-8 JSON, or ``None`` (logged and counted under ``kind``:
    ``http_post``, ``outbox`` …) when it cannot be encoded: the caller drops it from
    ``sink``. ``event``: the OneBot event ``payload`` carries, when it wraps one."""
    try:
        return jsonio.dumps_bytes(payload)
    except (TypeError, ValueError, RecursionError) as exc:
        about = payload if event is None else event
        post_type = about.get("post_type") if isinstance(about, dict) else None
        # a UnicodeEncodeError's text quotes the very character that cannot be written
        reason = exc.reason if isinstance(exc, UnicodeEncodeError) else str(exc)[:120]
        log.error("[onebot] event cannot be encoded: dropped", sink=sink, kind=kind,
                  post_type=post_type, error=type(exc).__name__, reason=reason)
        counters.EVENTS_UNENCODABLE.labels(kind).inc()
        return None
