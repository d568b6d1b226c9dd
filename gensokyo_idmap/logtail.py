"""The last log lines of this process, in memory, for the console's live tail (no I/O).

The log renderer hands every line it writes here as well (:class:`TailingRenderer`), so the
console shows exactly the text of the log file, redacted by the same processor before it
was rendered: there is no second redaction rule to keep in step. Only lines that pass the
configured level reach a renderer (the bound logger filters first), so a quiet daemon keeps
nothing it would not have written.

A line can be logged from any thread (the writer thread, the sweeper), and the console reads
from the event loop: one lock around a bounded deque. Readers poll with the sequence number
of the last line they have (:meth:`LogTail.since`) instead of being called back, so a slow
browser never holds up a log call.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, MutableMapping
from typing import Any, Final, NamedTuple

__all__ = ["LEVELS", "TAIL", "LogLine", "LogTail", "TailingRenderer", "level_rank"]

#: Level names in rising order, as structlog's ``add_log_level`` writes them.
LEVELS: Final = ("debug", "info", "warning", "error", "critical")
_RANK: Final = {name: rank for rank, name in enumerate(LEVELS)}
_ALIASES: Final = {"warn": "warning", "exception": "error", "fatal": "critical"}
_WARNING: Final = _RANK["warning"]


def level_rank(level: str) -> int:
    """The rank of a level name (unknown names rank as info: shown by default)."""
    rank = _RANK.get(level)  # the names add_log_level writes, looked up as they are
    if rank is not None:
        return rank
    name = level.lower()
    return _RANK.get(_ALIASES.get(name, name), _RANK["info"])


class LogLine(NamedTuple):
    """One line as written (immutable: readers on the event loop share it with the thread
    that logged it). A named tuple, not a frozen dataclass: every line logged makes one,
    and a frozen dataclass's ``__init__`` cost four times as much."""

    seq: int
    at: float  # unix seconds
    level: str
    event: str
    text: str


class LogTail:
    """The newest ``size`` lines, the warnings and errors of the last while, and the recent
    ``[idmap] bind …`` lines (kept apart: a busy hour would push them out of the tail)."""

    def __init__(self, size: int = 2000, problems: int = 5000, binds: int = 200,
                 clock: Callable[[], float] = time.time) -> None:
        self._lines: deque[LogLine] = deque(maxlen=size)
        self._problems: deque[LogLine] = deque(maxlen=problems)
        self._binds: deque[LogLine] = deque(maxlen=binds)
        self._seq = 0
        self._lock = threading.Lock()
        self._clock = clock

    def record(self, level: str, event: str, text: str) -> None:
        problem = level_rank(level) >= _WARNING
        at = self._clock()
        with self._lock:
            self._seq += 1
            line = LogLine(self._seq, at, level, event, text)
            self._lines.append(line)
            if problem:
                self._problems.append(line)
            if event.startswith("[idmap] bind"):
                self._binds.append(line)

    def since(self, seq: int, min_level: str = "debug", limit: int = 500) -> list[LogLine]:
        """The lines after ``seq`` at ``min_level`` or above, oldest first (at most the
        newest ``limit``)."""
        floor = level_rank(min_level)
        with self._lock:
            found = [line for line in self._lines
                     if line.seq > seq and level_rank(line.level) >= floor]
        return found[-limit:]

    @property
    def last_seq(self) -> int:
        return self._seq

    def problems_since(self, at: float) -> list[LogLine]:
        """Warnings and worse logged at or after ``at`` (unix seconds), oldest first."""
        with self._lock:
            return [line for line in self._problems if line.at >= at]

    def binds(self) -> list[LogLine]:
        """The recent ``[idmap] bind …`` lines, newest first."""
        with self._lock:
            return list(reversed(self._binds))


#: The process's tail, fed by the renderer :func:`~gensokyo_idmap.logging.configure_logging`
#: sets up.
TAIL: Final = LogTail()


class TailingRenderer:
    """A structlog renderer that also records the line it renders in a :class:`LogTail`."""

    def __init__(self, renderer: Callable[..., Any], tail: LogTail = TAIL) -> None:
        self._renderer = renderer
        self._tail = tail

    def __call__(self, logger: Any, method: str, event_dict: MutableMapping[str, Any]) -> Any:
        level = str(event_dict.get("level", method))
        event = str(event_dict.get("event", ""))
        text = self._renderer(logger, method, event_dict)
        self._tail.record(level, event, text if isinstance(text, str) else str(text))
        return text
