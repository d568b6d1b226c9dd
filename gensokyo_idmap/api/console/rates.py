"""Per-second rates of the daemon's counters over the last hour (pure: numbers and a clock).

The counters (``gensokyo_idmap.counters``, ``metrics``) only grow; the console samples their
totals every ``step`` seconds and keeps an hour of samples, so a rate is the difference of
two samples over the time between them. No second set of counters is kept.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from itertools import pairwise
from typing import Final

__all__ = ["HOUR", "RateHistory"]

#: The span of the console's rates (and of the problems its overview counts), seconds.
HOUR: Final = 3600.0


class RateHistory:
    def __init__(self, read: Callable[[], Mapping[str, float]], step: float = 10.0,
                 span: float = 3600.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.step = step
        self.span = span
        self._read = read
        self._clock = clock
        self._samples: deque[tuple[float, Mapping[str, float]]] = deque(
            maxlen=int(span // step) + 1)

    def sample(self) -> None:
        self._samples.append((self._clock(), dict(self._read())))

    def series(self, *, to_now: bool = False) -> dict[str, list[float]]:
        """Per name, the rate (per second) between each two samples, oldest first; a count
        that went down (a restarted source) shows as 0, not as a negative rate.

        ``to_now``: and a last point for the step in progress (the totals now, read, not
        kept), so a chart shows it before it is complete. That point is the rate over at
        least one whole step, from the newest sample at least a step old to now: over only
        the seconds since the newest sample, a burst in them (five events in the second
        after it: 5/s, where the step's rate is 0.5/s) would draw a spike that is gone at
        the next sample, and set the chart's scale from it."""
        samples = list(self._samples)
        now = self._clock()
        names = list(samples[-1][1]) if samples else []
        out: dict[str, list[float]] = {name: [] for name in names}
        for (t0, before), (t1, after) in pairwise(samples):
            self._add(out, names, before, after, t1 - t0)
        if to_now and samples and now - samples[-1][0] >= 1.0:
            since, before = next(((t, totals) for t, totals in reversed(samples)
                                  if now - t >= self.step), samples[0])
            self._add(out, names, before, self._read(), now - since)
        return out

    @staticmethod
    def _add(out: dict[str, list[float]], names: list[str], before: Mapping[str, float],
             after: Mapping[str, float], seconds: float) -> None:
        for name in names:
            delta = after.get(name, 0.0) - before.get(name, 0.0)
            out[name].append(max(0.0, delta) / seconds if seconds > 0 else 0.0)

    def latest(self) -> dict[str, float]:
        """The rate of each name since the newest sample (or between the last two, within
        a second of a sample; 0 before there are two)."""
        return {name: (rates[-1] if rates else 0.0)
                for name, rates in self.series(to_now=True).items()}
