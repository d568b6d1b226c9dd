"""structlog set-up: console or JSON lines, level filtering, and secret redaction.

Debug calls on the hot path (``[idmap] identity hit``) must cost nothing when the level is
INFO, so the bound logger is a filtering one. Loggers are not cached globally (that would
blind ``structlog.testing.capture_logs``); hot objects bind their own logger once when they
are built, which gives the same speed.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, Final, Literal, TextIO

import structlog

__all__ = ["configure_logging", "redact_secrets"]

_SECRET_WORDS: Final = ("secret", "token", "password", "authorization")


def redact_secrets(
    _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """Replace the value of any field named like a secret: a log line never carries one.

    Matching is by name part (``clientSecret``, ``refresh_token``, ``Authorization``), so a
    new field cannot leak because nobody added it to a list.
    """
    for name in list(event_dict):
        lowered = name.lower()
        if event_dict[name] and any(word in lowered for word in _SECRET_WORDS):
            event_dict[name] = "***"
    return event_dict


def configure_logging(
    level: str = "info",
    fmt: Literal["console", "json"] = "console",
    stream: TextIO | None = None,
) -> None:
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"log.level: unknown level {level!r}")
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redact_secrets,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=stream or sys.stderr),
        cache_logger_on_first_use=False,
    )
