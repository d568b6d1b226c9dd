"""How far a migration is: a progress bar on a terminal, progress lines in the log otherwise.

:func:`migrate.legacy.migrate_legacy` calls its ``progress(stage, done, total)`` callback as
it goes: ``done`` and ``total`` count legacy ``ids`` entries read, over every pass the run
makes (the bucket is read once to convert it, or twice when its keys are not in the usual
order, once more for pro keys when there are any, and once to verify), so ``total`` is the
bucket's size times the passes; it grows once if pro keys turn up. A migration of a large
file takes minutes: an operator must see that it moves, and how fast.

- :class:`ProgressMeter` is the pure part: the rate, and whether a log line is due (at each
  new stage, then every ``every`` seconds), from a clock it is given.
- :class:`LogProgress` writes ``[migrate] progress`` lines (the daemon's start-up
  migration, and ``gensokyo-idmap migrate`` when stderr is not a terminal).
- :class:`BarProgress` drives a click progress bar (``gensokyo-idmap migrate`` on a
  terminal).
- :func:`progress_reporter` chooses between the two by whether the stream is a terminal.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final, Protocol, TextIO

import click
import structlog

__all__ = [
    "LOG_EVERY_SECONDS",
    "BarProgress",
    "LogProgress",
    "Progress",
    "ProgressMeter",
    "progress_reporter",
]

#: Seconds between two progress lines in the log while one stage runs.
LOG_EVERY_SECONDS: Final = 5.0


class Progress(Protocol):
    """The callback :func:`migrate.legacy.migrate_legacy` reports to."""

    def __call__(self, stage: str, done: int, total: int) -> None: ...


@dataclass(frozen=True, slots=True)
class Reading:
    """Where the migration stands at one call."""

    stage: str
    done: int
    total: int
    seconds: float  # since the first call

    @property
    def per_second(self) -> float:
        return self.done / self.seconds if self.seconds > 0 else 0.0

    @property
    def percent(self) -> float:
        return 100.0 * self.done / self.total if self.total else 0.0


class ProgressMeter:
    """The rate since the first call, and when a log line is due (pure: the clock is given)."""

    def __init__(self, every: float = LOG_EVERY_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._every = every
        self._clock = clock
        self._started: float | None = None
        self._stage: str | None = None
        self._last_line = 0.0

    def read(self, stage: str, done: int, total: int) -> Reading:
        now = self._clock()
        if self._started is None:
            self._started = now
        return Reading(stage, done, total, now - self._started)

    def due(self, reading: Reading) -> bool:
        """A line is due at a new stage, or ``every`` seconds after the last one."""
        if reading.stage != self._stage or reading.seconds - self._last_line >= self._every:
            self._stage = reading.stage
            self._last_line = reading.seconds
            return True
        return False


class LogProgress:
    """``[migrate] progress`` lines: stage, done, total, percent and entries per second."""

    def __init__(self, every: float = LOG_EVERY_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._meter = ProgressMeter(every, clock)
        self._log = structlog.get_logger("gensokyo_idmap.migrate")

    def __call__(self, stage: str, done: int, total: int) -> None:
        reading = self._meter.read(stage, done, total)
        if self._meter.due(reading):
            self._log.info("[migrate] progress", stage=stage, done=done, total=total,
                           percent=round(reading.percent, 1),
                           per_second=round(reading.per_second))


class BarProgress:
    """A click progress bar: the stage as its label, done/total, percent, the time left and
    the rate."""

    def __init__(self, bar: Any, clock: Callable[[], float] = time.monotonic) -> None:
        self._bar = bar
        self._meter = ProgressMeter(clock=clock)

    def __call__(self, stage: str, done: int, total: int) -> None:
        reading = self._meter.read(stage, done, total)
        bar = self._bar
        bar.label = f"[migrate] {stage:<16}"
        if total > bar.length:
            bar.length = total
        bar.update(max(0, done - bar.pos), f"{reading.per_second:,.0f} entries/s")


def _rate(item: str | None) -> str | None:
    return item


@contextmanager
def progress_reporter(stream: TextIO) -> Iterator[Progress]:
    """A bar on ``stream`` if it is a terminal, else :class:`LogProgress` lines (then the
    caller must let info lines through). The bar is closed (its line ended) on exit."""
    if not stream.isatty():
        yield LogProgress()
        return
    with click.progressbar(length=1, label="[migrate]", file=stream, show_pos=True,
                           show_percent=True, show_eta=True, item_show_func=_rate,
                           width=24) as bar:
        yield BarProgress(bar)
