"""The console log format: structlog's plain ``ConsoleRenderer`` layout at a fraction of its
cost (pure).

``log.format: console`` has always written what ``structlog.dev.ConsoleRenderer(colors=
False)`` writes, and operators read and grep that layout::

    2026-11-30T17:57:09.098353Z [info     ] [idmap] identity create        key=openid:… vuin=7

structlog builds it through a column formatter object per field, a ``StringIO`` per field
and style strings that are all empty without colours: 7.5 us a line, more than the whole
rest of the pipeline. :class:`PlainConsoleRenderer` writes the same text directly.
A line carrying a traceback or a stack (``exc_info``, ``exception``, ``stack``: warnings
and errors, never the hot path) is handed to structlog's renderer, which formats those, in
its plain format: structlog would pick ``rich``'s whenever rich is installed, so the same
daemon's tracebacks looked different from host to host (and the console script keeps rich
out of the process: :mod:`gensokyo_idmap.launch`).
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping
from typing import Any, Final

import structlog

__all__ = ["PlainConsoleRenderer"]

#: ``[level]`` is padded to the longest level name structlog styles (``exception``).
_LEVEL_WIDTH: Final = 9
#: The event is padded to structlog's default ``pad_event_to``.
_EVENT_WIDTH: Final = 30
#: A text value holding one of these is shown as its ``repr`` (structlog's rule).
_NEEDS_REPR: Final = re.compile("[ \t=\r\n\"']")
#: ``[level]`` of the level names structlog writes, made once.
_LEVELS: Final = {level: f"[{level:<{_LEVEL_WIDTH}}]" for level in
                  ("debug", "info", "warning", "error", "critical", "exception", "notset")}
_NOTHING: Final = object()


class PlainConsoleRenderer:
    """``ConsoleRenderer(colors=False)``'s text: timestamp, ``[level]`` padded, the event
    padded, ``[logger]``, then ``key=value`` sorted by key (text as is unless it holds a
    blank, ``=`` or a quote, anything else as its ``repr``), trailing blanks stripped."""

    def __init__(self) -> None:
        self._traces = structlog.dev.ConsoleRenderer(
            colors=False, exception_formatter=structlog.dev.plain_traceback)

    def __call__(self, logger: Any, method: str, event_dict: MutableMapping[str, Any]) -> str:
        if "exc_info" in event_dict or "exception" in event_dict or "stack" in event_dict:
            return self._traces(logger, method, event_dict)
        parts: list[str] = []
        pop = event_dict.pop
        if (stamp := pop("timestamp", _NOTHING)) is not _NOTHING and (text := str(stamp)):
            parts.append(text)  # an empty column is left out, as structlog does
        if (level := pop("level", _NOTHING)) is not _NOTHING:
            parts.append(_LEVELS.get(level) or f"[{level:<{_LEVEL_WIDTH}}]")
        if (event := pop("event", _NOTHING)) is not _NOTHING:
            parts.append(str(event).ljust(_EVENT_WIDTH))
        if (name := pop("logger", _NOTHING)) is not _NOTHING:
            parts.append(f"[{name}]")
        if (name := pop("logger_name", _NOTHING)) is not _NOTHING:
            parts.append(f"[{name}]")
        for key in sorted(event_dict) if len(event_dict) > 1 else event_dict:
            value = event_dict[key]
            if isinstance(value, str) and not _NEEDS_REPR.search(value):
                parts.append(f"{key}={value}")
            else:
                parts.append(f"{key}={value!r}")
        return " ".join(parts).rstrip(" ")
