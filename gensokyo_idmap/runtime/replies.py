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

Which message a send answers (:meth:`ReplyBudget.take_newest`): the newest one of its chat
still in the window with replies left. Replies go to the newest first, so what is spent in
a chat lies in runs of consecutive messages (:class:`SpentRuns`); the choice jumps over a
whole run in one step, so its cost does not grow with how many messages are used up (a
group that received 400 messages can take 2,000 replies, each found in a few seeks).
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Final, Protocol, TypeVar

from gensokyo_idmap.tables import Named, compacted, estimate

__all__ = [
    "MAX_REPLIES",
    "REPLY_WINDOW_SECONDS",
    "Received",
    "ReplyBudget",
    "ReplyTo",
    "SpentRuns",
    "seq_base_for_process",
]

#: How long a received message can be replied to, per chat kind.
REPLY_WINDOW_SECONDS: Final = {"group": 5 * 60, "c2c": 60 * 60, "channel": 5 * 60, "dms": 5 * 60}
#: Replies the platform accepts per ``msg_id``.
MAX_REPLIES: Final = 5
_REMEMBERED: Final = 100_000
_LONGEST_WINDOW: Final = float(max(REPLY_WINDOW_SECONDS.values()))
#: Where a received message stands in its chat: (created ms, virtual id), time order.
Position = tuple[int, int]


class Received(Protocol):
    """A received message (or reply-able event) of a chat, as the message-id map keeps it."""

    @property
    def real_id(self) -> str: ...
    @property
    def created_ms(self) -> int: ...
    @property
    def virtual_id(self) -> int: ...


R = TypeVar("R", bound=Received)
K = TypeVar("K")
V = TypeVar("V")
#: The newest live message of a chat within its window older than the position given
#: (None: the newest of all); None when there is none.
Newest = Callable[[Position | None], R | None]


def position(message: Received) -> Position:
    return (message.created_ms, message.virtual_id)


class SpentRuns:
    """The used-up messages of one chat as runs of consecutive positions: every live
    message whose position lies in a run ``[low, high]`` has no replies left.

    Replies go to the newest message with replies left, so a chat's spent messages are a
    few such runs (a new message on top of a run starts another, which joins the run below
    once it is spent too). :meth:`newest_open` walks from the newest message down, jumping
    over each run with one ``newest`` call; a message found spent on the way extends the run
    above it, and a run reached right below another is merged into it, so each message is
    stepped over once in its life, not once per send.

    A run holds only while its newest message lives: a message is dated by the daemon's
    clock when stored (:class:`~gensokyo_idmap.runtime.base.MsgRecord` ``created_ms``, then
    its virtual id), so it arrives above every message of its chat the walk sees, and falls
    inside a run only once the run's newest message is gone (expired, or dated after a clock
    that stepped back). The walk lands on the newest live message of a run it reaches; when
    that is not the run's newest, the run is dropped and its messages walked once more. (A
    message stored while the clock stood back, under a run whose newest message is live
    again by the next choice, is not seen: nothing here tells of it.)
    """

    __slots__ = ("_highs", "_lows")

    def __init__(self) -> None:
        # runs in ascending order, none overlapping: _lows[i] <= _highs[i] < _lows[i + 1]
        self._lows: list[Position] = []
        self._highs: list[Position] = []

    def __len__(self) -> int:
        return len(self._lows)

    def runs(self) -> list[tuple[Position, Position]]:
        """The runs, oldest first (for tests and stats)."""
        return list(zip(self._lows, self._highs, strict=True))

    def _run_of(self, at: Position) -> int | None:
        """The index of the run holding ``at``, or None."""
        i = bisect_left(self._highs, at)
        return i if i < len(self._lows) and self._lows[i] <= at else None

    def newest_open(self, newest: Newest[R], spent: Callable[[R], bool]) -> R | None:
        """The newest message ``newest`` yields that is neither in a run nor ``spent``."""
        above: int | None = None  # the run just stepped over (everything above is spent)
        message = newest(None)
        while message is not None:
            at = position(message)
            run = self._run_of(at)
            if run is not None and at != self._highs[run]:
                # the run's newest message is gone (expired, or dated after the clock
                # now reads), so a message received since can lie in it: walked afresh
                del self._lows[run], self._highs[run]
                if above is not None:
                    above -= 1
                run = None
            if run is not None:
                if above is not None and above != run:  # the runs from here up hold
                    self._highs[run] = self._highs[above]  # nothing live: one from now on
                    del self._lows[run + 1:above + 1], self._highs[run + 1:above + 1]
                above = run
                message = newest(self._lows[run])
                continue
            if not spent(message):
                return message
            if above is None:  # a spent message above every run: a run of its own
                above = bisect_left(self._lows, at)
                self._lows.insert(above, at)
                self._highs.insert(above, at)
            else:
                self._lows[above] = at
                while above and self._highs[above - 1] >= at:  # a run with nothing live
                    del self._lows[above - 1], self._highs[above - 1]  # left: taken in
                    above -= 1
            message = newest(at)
        # nothing older is in the window: the runs below the last one are of no more use
        drop = len(self._lows) if above is None else above
        del self._lows[:drop], self._highs[:drop]
        return None


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
        # per window: chat → (its spent runs, when it lapses), least recently used first
        self._chats: dict[float, OrderedDict[Hashable, tuple[SpentRuns, float]]] = {}
        # a choice and a count are one step: with the graph or the message ids on a server
        # the choice runs on worker threads (outbound rule 4), several sends at once
        self._lock = threading.RLock()

    def __len__(self) -> int:
        """How many ids are remembered."""
        return len(self._used)

    def used(self, reference: str) -> int:
        return self._used.get(reference, 0)

    def exhausted(self, reference: str) -> bool:
        return self.used(reference) >= self.limit

    def take_newest(self, chat: tuple[str, str, str], newest: Newest[R],
                    window: float = _LONGEST_WINDOW) -> tuple[str, int] | None:
        """The real id of the newest message of ``chat`` (AppID, chat kind, target;
        ``newest`` yields its live messages in the window, newest first) with replies left,
        and the ``msg_seq`` of a reply to it, counted; None when every one is used up.
        ``window``: how long a message of this chat can be replied to; the chat's
        :class:`SpentRuns` are forgotten once it has taken no reply for that long (every
        message they name is out of its window then)."""
        with self._lock:
            runs = self._runs_of(chat, window)
            message = runs.newest_open(newest, lambda found: self.exhausted(found.real_id))
            if message is None:
                return None
            return message.real_id, self.take(message.real_id, window)

    def _runs_of(self, chat: Hashable, window: float) -> SpentRuns:
        now = self._clock()
        chats = self._chats.get(window)
        if chats is None:
            chats = self._chats[window] = OrderedDict()
        held = chats.pop(chat, None)
        runs = SpentRuns() if held is None else held[0]
        chats[chat] = runs, now + window
        self._forget_chats(now)
        return runs

    def _forget_chats(self, now: float) -> None:
        """Forget the chats idle for their window, oldest first."""
        for queue in self._chats.values():
            while queue:
                oldest, (_, until) = next(iter(queue.items()))
                if until > now:
                    break
                del queue[oldest]

    def chats(self) -> int:
        """How many chats' spent runs are remembered."""
        return sum(len(chats) for chats in self._chats.values())

    def take(self, reference: str | None, window: float = _LONGEST_WINDOW) -> int:
        """The ``msg_seq`` for the next send on ``reference`` (``seq_base`` + 1, + 2, …);
        counts it. ``window``: how long ``reference`` can be replied to."""
        if reference is None:
            return self.seq_base + 1
        with self._lock:
            used = self._used.pop(reference, 0) + 1
            self._count(reference, used, window)
        return self.seq_base + used

    def use_up(self, reference: str, window: float = _LONGEST_WINDOW) -> None:
        """The platform said ``reference`` takes no more replies: skip it from now on."""
        with self._lock:
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
        self._forget_lapsed(now)

    def _forget_lapsed(self, now: float) -> None:
        """Forget the counts of the ids whose window lapsed, oldest first."""
        for queue in self._lapse.values():
            while queue:
                oldest, until = next(iter(queue.items()))
                if until > now:
                    break
                del queue[oldest]
                self._used.pop(oldest, None)

    def memory_tables(self) -> list[Named]:
        return [("reply_counts", self)]

    def forget(self) -> None:
        """What :meth:`take` and :meth:`take_newest` forget as they go, now: the counts and
        chats whose window lapsed with nothing taken since (the memory chore's call,
        :mod:`gensokyo_idmap.tables`), their tables shrunk once they are far emptier than
        they grew."""
        with self._lock:
            now = self._clock()
            self._forget_lapsed(now)
            self._forget_chats(now)
            self._used = compacted(self._used)
            self._lapse = {window: compacted(queue) for window, queue in self._lapse.items()
                           if queue}
            self._chats = {window: compacted(queue) for window, queue in self._chats.items()
                           if queue}

    def footprint(self) -> int:
        """Estimated bytes (:func:`~gensokyo_idmap.tables.estimate`): the counts and their
        lapse times, and the chats' spent runs."""
        with self._lock:
            lapses = [*self._lapse.values()]
            chats = [*self._chats.values()]
            return (estimate(len(self._used), (self._used, *lapses), self._used.items())
                    + estimate(sum(map(len, lapses)), (), _items(lapses))
                    + estimate(self.chats(), chats, _items(chats)))


def _items(tables: list[OrderedDict[K, V]]) -> Iterator[tuple[K, V]]:
    return (item for table in tables for item in table.items())


def seq_base_for_process(now: float) -> int:
    """A ``msg_seq`` offset of this process: the platform refuses a ``msg_id`` + ``msg_seq``
    pair it saw before, and the counts of a process before a restart are gone. Seconds
    since the epoch modulo 2,000,000 (23 days, far beyond any reply window) times 1000
    stays below 2**31 and differs for every start."""
    return int(now) % 2_000_000 * 1000
