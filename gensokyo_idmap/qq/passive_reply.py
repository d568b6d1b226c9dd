"""Which ``msg_id`` / ``event_id`` a send replies to, and its ``msg_seq`` (reference §5.2).

The platform only delivers passive replies: a send names a received message (``msg_id``,
usable 5 minutes in groups, 60 in C2C, at most 5 replies each) or, for non-message events,
their envelope id (``event_id``). The same ``msg_id`` + ``msg_seq`` twice is refused, so each
reply takes the next ``msg_seq`` of its ``msg_id``.

:class:`ReplyBudget` counts replies per id in memory, newest ids kept, so a burst of sends
in one chat moves on to the next newest message once one is used up. A count is kept while
its message may still be replied to: a reply window after its last reply (5 minutes for a
group message, 60 for C2C), so memory follows the replies of the last window, not of the
process's life. The counts do not
survive a restart, so each process numbers its ``msg_seq`` from its own offset
(:func:`seq_base_for_process`: no pair repeats across restarts), and when the platform
answers that an id is used up or a pair was seen, the sender moves on (next ``msg_seq``,
or the next newest message) instead of failing.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

__all__ = [
    "MAX_REPLIES",
    "REPLY_WINDOW_SECONDS",
    "ReplyBudget",
    "ReplyTo",
    "seq_base_for_process",
]

#: How long a received message can be replied to, per chat kind.
REPLY_WINDOW_SECONDS: Final = {"group": 5 * 60, "c2c": 60 * 60}
#: Replies the platform accepts per ``msg_id``.
MAX_REPLIES: Final = 5
_REMEMBERED: Final = 100_000
_LONGEST_WINDOW: Final = float(max(REPLY_WINDOW_SECONDS.values()))


@dataclass(frozen=True, slots=True)
class ReplyTo:
    """What a send answers: a message (``msg_id``), an event (``event_id``) or nothing."""

    msg_id: str | None = None
    event_id: str | None = None

    @property
    def reference(self) -> str | None:
        return self.msg_id or self.event_id


class ReplyBudget:
    """Replies sent per ``msg_id`` / ``event_id`` (and so the next ``msg_seq``).

    At most ``remembered`` ids, the least recently taken forgotten first; and an id is
    forgotten ``window`` seconds after its last :meth:`take` (the reply window of its chat
    kind; by default the longest), when it can no longer be replied to anyway.
    """

    def __init__(self, limit: int = MAX_REPLIES, remembered: int = _REMEMBERED,
                 seq_base: int = 0, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self._used: OrderedDict[str, int] = OrderedDict()
        self._remembered = remembered
        self.seq_base = seq_base
        self._clock = clock
        # per window: id → when its window lapses, oldest first (one queue per window
        # keeps each in lapsing order)
        self._lapse: dict[float, OrderedDict[str, float]] = {}

    def __len__(self) -> int:
        """How many ids are remembered."""
        return len(self._used)

    def used(self, reference: str) -> int:
        return self._used.get(reference, 0)

    def exhausted(self, reference: str) -> bool:
        return self.used(reference) >= self.limit

    def take(self, reference: str | None, window: float = _LONGEST_WINDOW) -> int:
        """The ``msg_seq`` for the next send on ``reference`` (``seq_base`` + 1, + 2, …);
        counts it. ``window``: how long ``reference`` can be replied to."""
        if reference is None:
            return self.seq_base + 1
        used = self._used.pop(reference, 0) + 1
        self._count(reference, used, window)
        return self.seq_base + used

    def use_up(self, reference: str, window: float = _LONGEST_WINDOW) -> None:
        """The platform said ``reference`` takes no more replies: skip it from now on."""
        self._used.pop(reference, None)
        self._count(reference, max(self.limit, 1), window)

    def _count(self, reference: str, used: int, window: float) -> None:
        self._used[reference] = used
        if len(self._used) > self._remembered:
            self._used.popitem(last=False)  # the oldest id is long out of its window
        now = self._clock()
        lapse = self._lapse.get(window)
        if lapse is None:
            lapse = self._lapse[window] = OrderedDict()
        lapse.pop(reference, None)
        lapse[reference] = now + window
        for queue in self._lapse.values():
            while queue:
                oldest, until = next(iter(queue.items()))
                if until > now:
                    break
                del queue[oldest]
                self._used.pop(oldest, None)


def seq_base_for_process(now: float) -> int:
    """A ``msg_seq`` offset of this process: the platform refuses a ``msg_id`` + ``msg_seq``
    pair it saw before, and the counts of a process before a restart are gone. Seconds
    since the epoch modulo 2,000,000 (23 days, far beyond any reply window) times 1000
    stays below 2**31 and differs for every start."""
    return int(now) % 2_000_000 * 1000
