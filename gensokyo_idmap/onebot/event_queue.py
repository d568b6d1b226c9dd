"""What one framework connection owes, in order: events waiting to be sent, and events sent
but not confirmed yet (*in flight*). No I/O here: :mod:`connection` drives it over a socket,
:mod:`http_post` over HTTP.

Rules (docs/delivery.md):

1. **Delivered means confirmed, not written.** OneBot v11 has no event acknowledgement, so
   the WebSocket itself confirms: every event taken for sending is tagged with the number of
   the next ping; when the pong of that ping (or of a later one: pongs echo the ping's
   payload) comes back, the framework's WebSocket layer has read every frame before it, and
   only then do those events' futures turn True (their outbox entries may go). HTTP POST: a
   2xx answer confirms the event it carried.
2. **Pings go per burst, not per event**: after the writer ran out of events (or every
   :data:`PING_EVERY` events of a long burst, so confirmations flow while it writes), and
   at most :data:`PINGS_UNANSWERED` unanswered at a time: the events written meanwhile wait
   for the next ping, sent as soon as a pong is back (:meth:`EventQueue.ping_due`). Under a
   steady trickle (webhook callbacks, each its own burst) a ping per event made the
   framework answer a pong per event and the daemon read one, for confirmations that a
   ping or two per round trip give as well. Two, not one: a peer may answer only the
   newest of the pings it has read (RFC 6455 5.5.3), and one whose pong is slow or never
   comes must not hold back the confirmation of everything written after it.
3. **Bounded**: at most ``window`` events in flight, the rest wait; ``size`` bounds the
   whole. What happens beyond ``size`` is the owner's choice (a reverse-WS or HTTP POST
   framework spills into ``outbox.db``, a forward-WS client is closed); :meth:`publish`
   itself drops the oldest waiting event (logged, counted) for owners without either.
4. **A connection that ends** puts its in-flight events back at the front, in their order
   (:meth:`requeue`: they are sent again on the next connection; repeats are allowed, loss is
   not), or fails every future (:meth:`fail_all`: a forward-WS client is gone for good).
5. **An event that cannot be sent is dropped from this queue alone** (:meth:`encoded`;
   :func:`~gensokyo_idmap.onebot.encoding.event_bytes` logs and counts it), never retried:
   its future turns True, because nothing is owed for an event no framework can ever be
   given, and a future left False would keep it in the outbox and resend it at every start.
6. **A peer that stopped confirming is waited for by nobody.** It is *lagging* once a
   confirmation is overdue by :data:`LAG_GRACE` (:meth:`lagging`), and *confirming* only
   once it has answered a ping at all (:meth:`confirming`: a client that never reads after
   the handshake never is). Owners wait for the futures of confirming peers only. A queue
   made with ``owed_while_lagging=False`` (a forward-WS client: nothing durable to fall back
   on) also lets go of the waits already under way: the connection's watcher calls
   :meth:`lagged` once the grace has passed, and every future still pending turns False
   then (the events stay queued and are still sent), instead of at the owner's timeout.

A future turns True once nothing more is owed for its event (confirmed, or dropped as
unsendable), False when the event left the queue unconfirmed (dropped by a full queue, the
connection closed for good) or, with ``owed_while_lagging=False``, when the peer lagged
(rule 6).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any, Final, Protocol

import structlog

from gensokyo_idmap.onebot.encoding import event_bytes

__all__ = ["DEFAULT_QUEUE", "DEFAULT_WINDOW", "LAG_GRACE", "PINGS_UNANSWERED", "PING_EVERY",
           "EventBacklog", "EventQueue", "MakeBacklog", "Tracked"]

log = structlog.get_logger("gensokyo_idmap.onebot")

#: Events a connection may have in flight (sent, not yet confirmed).
DEFAULT_WINDOW: Final = 1_000
#: Events a connection keeps in memory, waiting and in flight together.
DEFAULT_QUEUE: Final = 2_000
#: A long burst pings after this many events, not only at its end.
PING_EVERY: Final = 256
#: Pings for events that may be unanswered at once (rule 2; heartbeats' pings go anyway).
PINGS_UNANSWERED: Final = 2
#: A connection whose oldest unanswered ping is older than this is *lagging*: the pipeline
#: stops waiting for its confirmations (it keeps owed events durably instead) until it
#: answers again, so one slow framework never holds up the acknowledgements of everyone.
LAG_GRACE: Final = 1.0


#: What publishing to a framework with a backlog returns: the event's future, whether waiting
#: for it is worthwhile (the framework is connected and answering), and the outbox entry id
#: the event got, for :meth:`EventBacklog.keep_through`; 0 when the backlog keeps it already
#: (spilled: the future then turns True once it is durable, False if that failed).
Tracked = tuple["asyncio.Future[bool]", bool, int]


class EventBacklog(Protocol):
    """Where the events a reverse-WS or HTTP POST framework is owed go beyond its queue,
    durably and in order: :class:`gensokyo_idmap.bridge.outbox.Backlog`, handed in by the daemon
    (the OneBot side knows the outbox only by this)."""

    def publish(self, event: dict[str, Any], key: str | None, wait: bool) -> Tracked: ...

    async def keep_through(self, entry: int) -> None: ...

    def restore(self) -> list[str]: ...

    def start(self) -> None: ...

    async def close(self) -> None: ...


#: Makes a framework's backlog from its outbox name and its queue.
MakeBacklog = Callable[[str, "EventQueue"], EventBacklog]


class EventQueue:
    """The events of one connection, oldest first (rules in the module docstring)."""

    def __init__(self, size: int, name: str, *, kind: str = "reverse_ws",
                 window: int = DEFAULT_WINDOW, confirm_on_write: bool = False,
                 owed_while_lagging: bool = True) -> None:
        self._waiting: deque[tuple[dict[str, Any], asyncio.Future[bool]]] = deque()
        # (event, future, number of the ping that confirms it), in the order sent
        self._flight: deque[tuple[dict[str, Any], asyncio.Future[bool], int]] = deque()
        self._pings: deque[tuple[int, float]] = deque()  # unanswered: (number, sent at)
        self._next_ping = 1
        self._unpinged = 0  # events taken since the last ping
        self._unpinged_since = 0.0  # when the first of them was taken (loop time)
        self._wakeup = asyncio.Event()
        self.size = size
        self.window = max(1, window)
        self.name = name
        self.kind = kind  # the transport, as gensokyo_events_unencodable counts it
        #: bench only: an event counts as confirmed once written (the behaviour before
        #: confirmation by ping), to measure what confirmation costs
        self.confirm_on_write = confirm_on_write
        #: False: a lagging peer is owed nothing any more (rule 6, :meth:`lagged`)
        self.owed_while_lagging = owed_while_lagging
        #: whether the peer has answered a ping of ours (it reads: rule 6)
        self.answered = False
        #: called whenever events leave the queue (an ower refilling it from elsewhere)
        self.on_room: Callable[[], None] | None = None
        #: set to end the connection (its owner closes it, e.g. a client that fell behind)
        self.ended = asyncio.Event()
        self.dropped = 0
        self.sent = 0
        self.confirmed = 0
        self.unsendable_events = 0

    # -- the owner's side

    def publish(self, event: dict[str, Any]) -> asyncio.Future[bool]:
        """Queue ``event`` (never waits); its future (module docstring). A full queue drops
        its oldest waiting event first (rule 3)."""
        if len(self._waiting) + len(self._flight) >= self.size and self._waiting:
            _, evicted = self._waiting.popleft()
            if not evicted.done():
                evicted.set_result(False)
            self.dropped += 1
            log.warning("[onebot] queue full: oldest event dropped", connection=self.name,
                        dropped=self.dropped)
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting.append((event, future))
        if len(self._flight) < self.window:  # else only a confirmation makes it sendable:
            self._wakeup.set()  # a peer that stopped reading costs no wake-up per event
        return future

    def __len__(self) -> int:
        return len(self._waiting) + len(self._flight)

    @property
    def full(self) -> bool:
        return len(self._waiting) + len(self._flight) >= self.size

    @property
    def in_flight(self) -> int:
        return len(self._flight)

    def pending(self) -> list[dict[str, Any]]:
        """Every event not confirmed yet, in the order it goes out."""
        return [event for event, _, _ in self._flight] + [event for event, _ in self._waiting]

    def lagging(self, now: float) -> bool:
        """Whether a confirmation is overdue by more than :data:`LAG_GRACE`."""
        oldest = self.oldest_ping()
        return oldest is not None and now - oldest > LAG_GRACE

    def confirming(self, now: float) -> bool:
        """Whether the peer's confirmations are worth a wait (rule 6): it has answered a
        ping, and none is overdue."""
        return self.answered and not self.lagging(now)

    def lagged(self) -> None:
        """A confirmation is overdue by :data:`LAG_GRACE` (the connection's watcher saw it):
        without ``owed_while_lagging`` every future still pending turns False, so nobody
        waits for this peer any more (rule 6); the events stay queued."""
        if self.owed_while_lagging:
            return
        # newest first: those before the first one already done were let go by an earlier
        # call (or confirmed), so a peer that stays lagging costs only its new events
        for _, future in reversed(self._waiting):
            if future.done():
                return
            future.set_result(False)
        for _, future, _ in reversed(self._flight):
            if future.done():
                return
            future.set_result(False)

    def oldest_ping(self) -> float | None:
        """Since when a confirmation is awaited: the oldest unanswered ping, or the first
        event taken since the last ping (a write blocked because the peer stopped reading
        never gets to its ping); None when nothing is awaited."""
        if self._pings:
            return self._pings[0][1]
        return self._unpinged_since if self._unpinged else None

    def wake(self) -> None:
        self._wakeup.set()

    def end(self) -> None:
        """Ask whoever serves this queue to close its connection."""
        self.ended.set()
        self._wakeup.set()

    def requeue(self) -> None:
        """The connection ended: events in flight go back to the front, in order (rule 4)."""
        if self._flight:
            self._waiting.extendleft((event, future)
                                     for event, future, _ in reversed(self._flight))
            self._flight.clear()
        self._pings.clear()
        self._unpinged = 0

    def drop_waiting(self) -> int:
        """The operator dropped this framework's backlog: every event not sent yet leaves
        the queue, nothing owed for it any more (its future turns True); those in flight
        stay (confirmed, or sent again on the next connection, rule 4). How many went."""
        dropped = len(self._waiting)
        for _, future in self._waiting:
            if not future.done():
                future.set_result(True)
        self._waiting.clear()
        self.dropped += dropped
        if dropped:
            self._room()
        return dropped

    def fail_all(self) -> None:
        """The connection is gone for good: every future turns False (rule 4)."""
        for _, future, _ in self._flight:
            if not future.done():
                future.set_result(False)
        for _, future in self._waiting:
            if not future.done():
                future.set_result(False)
        self._flight.clear()
        self._waiting.clear()
        self._pings.clear()
        self._unpinged = 0
        self._room()

    # -- the sender's side

    def ready(self) -> bool:
        """Whether :meth:`take` has an event to give (one waits, the window has room)."""
        return bool(self._waiting) and len(self._flight) < self.window

    async def wait_ready(self) -> None:
        """Until :meth:`ready` (or :meth:`end`)."""
        while not self.ready() and not self.ended.is_set():
            self._wakeup.clear()
            await self._wakeup.wait()

    def ping_due(self) -> bool:
        """Whether events were written that no ping covers, and a ping may go: the ping
        held back while too many were unanswered (rule 2) is to go now."""
        return (bool(self._unpinged) and len(self._pings) < PINGS_UNANSWERED
                and not self.confirm_on_write)

    async def wait_sendable(self) -> None:
        """Until :meth:`ready` or :meth:`ping_due` (or :meth:`end`): the WebSocket sender's
        wait (an HTTP POST sender, which never pings, waits with :meth:`wait_ready`)."""
        while not self.ready() and not self.ping_due() and not self.ended.is_set():
            self._wakeup.clear()
            await self._wakeup.wait()

    def take(self) -> dict[str, Any] | None:
        """The next event to send, now in flight (None: nothing waits, or the window is
        full). Taken before it is written: if the write fails, :meth:`requeue` has it."""
        if not self._waiting or len(self._flight) >= self.window:
            return None
        event, future = self._waiting.popleft()
        self._flight.append((event, future, self._next_ping))
        if not self.confirm_on_write:
            if not self._unpinged:  # once per burst
                self._unpinged_since = asyncio.get_running_loop().time()
            self._unpinged += 1
        self.sent += 1
        return event

    def written(self) -> bool:
        """The event last taken was written; whether a ping is due before the next one."""
        if self.confirm_on_write:
            self._confirm_through(self._next_ping)
            return False
        return self._unpinged >= PING_EVERY

    def ping(self, now: float, *, probe: bool = False) -> int | None:
        """The number of a ping to send now: when events were taken since the last one and
        fewer than :data:`PINGS_UNANSWERED` are unanswered (rule 2), or always with ``probe``
        (a framework that got nothing must still answer); else None."""
        if self.confirm_on_write or not (self._unpinged or probe):
            return None
        if len(self._pings) >= PINGS_UNANSWERED and not probe:
            return None  # a pong wakes the sender, which pings then (ping_due)
        number = self._next_ping
        self._next_ping += 1
        self._unpinged = 0
        self._pings.append((number, now))
        return number

    def pong(self, payload: bytes) -> None:
        """A pong came back: it confirms what was sent before the ping it echoes (and any
        earlier one). Anything but a number we sent is ignored (a peer may pong unasked)."""
        if not payload.isdigit() or len(payload) > 19:
            return
        number = int(payload)
        if number < self._next_ping:
            self._confirm_through(number)

    def settle(self, ok: bool) -> None:
        """The oldest event in flight was answered (HTTP POST: ``ok`` is a 2xx)."""
        if self._flight:
            _, future, _ = self._flight.popleft()
            if not future.done():
                future.set_result(ok)
            self.confirmed += ok
            self._room()

    def encoded(self, event: dict[str, Any]) -> bytes | None:
        """The event last taken as JSON bytes, or None when it cannot be encoded: then it is
        dropped from this queue (rule 5)."""
        data = event_bytes(event, self.name, self.kind)
        if data is None:
            _, future, _ = self._flight.pop()
            self._unpinged = max(0, self._unpinged - 1)
            self.unsendable_events += 1
            if not future.done():
                future.set_result(True)
            self._room()
        return data

    def _confirm_through(self, number: int) -> None:
        flight = self._flight
        confirmed = 0
        while flight and flight[0][2] <= number:
            _, future, _ = flight.popleft()
            if not future.done():
                future.set_result(True)
            confirmed += 1
        self.answered = True
        pings = self._pings
        while pings and pings[0][0] <= number:
            pings.popleft()
        if self._unpinged and len(pings) < PINGS_UNANSWERED:
            self._wakeup.set()  # the ping held back is due (rule 2)
        if confirmed:
            self.confirmed += confirmed
            self._wakeup.set()  # the window has room again
            self._room()

    def _room(self) -> None:
        if self.on_room is not None:
            self.on_room()
