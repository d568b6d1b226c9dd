"""What every HTTP listener of the daemon owes the others: no connection holds a socket for
ever, no listener takes every file descriptor, and running out of them costs a log line a
minute, not a traceback per try.

Rules (each listener: the webhook, the identity API, the OneBot HTTP API, the forward WS):

1. A connection has ``header_timeout`` from its opening, or from the end of its previous
   request (keep-alive), to send a whole request head, and ``body_timeout`` from the head to
   send the whole body; past it, it is closed. Half a header dripped a byte at a time
   (slowloris) or a body that trickles in holds a socket no longer than that. A request being
   answered, or a WebSocket, has no deadline here: it is the handler's business.
2. Each listener holds at most its cap of connections. The caps come from the open-files
   limit (``RLIMIT_NOFILE``): a reserve stays for the process itself (stores, outbound
   connections), the platform's webhook may take half of the rest, the other listeners share
   what is left. So the listeners together never reach the limit, and a flood on one of the
   others never stops the webhook accepting.
3. At its cap, a listener makes room for a new connection by closing the one that has
   waited longest for its client (a head or the rest of a body; by when that wait began);
   when every one is busy with a request, the new one is closed at once. A fresh request
   thus gets in even while a flood holds the cap.
4. Out of file descriptors all the same (``EMFILE``, ``ENFILE``): asyncio pauses that
   listener's accepts for a second itself, but Python before gh-151615 retries ``accept()``
   up to the backlog (128 times) per wake-up, logging a traceback and scheduling a retry each
   time, so a daemon at its limit wrote a million tracebacks in minutes. The loop's exception
   handler here counts them and logs one line a minute with the count.

Connections closed under rules 1 and 3 are counted the same way, per listener; one idle past
its header deadline (no byte of a new request sent) is a keep-alive expiring, not logged.

5. A request aiohttp cannot parse (a bad request line or header, a head line past 8 KiB) is
   answered 400 by aiohttp, which logged each with a full traceback (``aiohttp.server`` at
   ERROR): a client could fill the log with them. A listener's handlers log through
   :class:`ServerLog` instead, which counts them (``gensokyo_http_malformed_requests`` by
   listener) and writes one line a minute per listener (a :class:`CountedWarning`: the
   parse errors' counts, the last peer and its error in a few words, never the request's
   bytes); everything else aiohttp logs (a handler's unexpected exception: a bug of ours)
   goes on to ``aiohttp.server`` as before.

Every state change is noted by aiohttp's own hooks: the server's ``request_factory`` (a head
was parsed) and ``request_handler`` (a request ended), both public attributes of
:class:`aiohttp.web.Server`, and a thin protocol around its request handler (connection made
and lost); a sweep per listener reads the deadlines while it has connections.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import re
import resource
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import structlog
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.log import server_logger
from aiohttp.web_protocol import RequestHandler

from gensokyo_idmap import counters

__all__ = ["ConnectionPlan", "CountedWarning", "Deadlines", "GuardedSite", "ListenerGuard",
           "ServerLog", "connection_caps", "open_files_limit", "parse_error",
           "quiet_accept_errors"]

log = structlog.get_logger("gensokyo_idmap.http_guard")

#: File descriptors kept for the process's own use (stores, log, outbound connections) at
#: most; a quarter of the limit when that is smaller.
PROCESS_RESERVE: Final = 256

#: How often the out-of-descriptors line and each listener's closed-connections line may be
#: written: the first at once, then one per interval with how many happened meanwhile.
REPORT_INTERVAL: Final = 60.0

#: The accept errors of rule 4.
_OUT_OF_FILES: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_ACCEPT_ERROR: Final = "socket.accept() out of system resource"  # asyncio's message

#: Why a connection was closed (rules 1 and 3), as the log line counts them.
_HEAD: Final = "no_head_in_time"
_BODY: Final = "no_body_in_time"
_MADE_ROOM: Final = "closed_for_room"
_REFUSED: Final = "refused_at_cap"
_IDLE: Final = "idle"  # not reported


@dataclass(frozen=True, slots=True)
class Deadlines:
    """Rule 1's two timeouts, in seconds."""

    header_seconds: float
    body_seconds: float

    @property
    def sweep_seconds(self) -> float:
        """How often a listener looks: a quarter of the shorter deadline, within 50 ms..1 s
        (a connection lives at most that much past its deadline)."""
        return min(1.0, max(0.05, min(self.header_seconds, self.body_seconds) / 4))


# --- the caps (pure) ------------------------------------------------------------------------


def open_files_limit() -> int:
    """This process's soft limit of open files (a large number when unlimited)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 20 if soft == resource.RLIM_INFINITY else soft


def connection_caps(fd_limit: int, listeners: Sequence[str], *, most: int,
                    first: str | None = None) -> dict[str, int]:
    """Each listener's cap (rule 2): at most ``most``, and together at most ``fd_limit``
    less the process's reserve; ``first`` (the webhook) may take half of that (rounded up),
    the others share the rest evenly. Each gets at least one."""
    budget = fd_limit - min(PROCESS_RESERVE, fd_limit // 4)
    others = [name for name in listeners if name != first]
    caps: dict[str, int] = {}
    if first is not None and first in listeners:
        caps[first] = max(1, min(most, budget - budget // 2 if others else budget))
        budget -= caps[first]
    for name in others:
        caps[name] = max(1, min(most, budget // len(others)))
    return caps


# --- counted warnings -----------------------------------------------------------------------


class CountedWarning:
    """A warning written at most once per ``interval`` seconds: the first occurrence at once,
    later ones counted and written together when the interval has passed (``times`` by
    reason), so a storm costs one line a minute however long it lasts."""

    def __init__(self, event: str, interval: float = REPORT_INTERVAL, **fields: object) -> None:
        self.event = event
        self.interval = interval
        self.fields = fields
        self.counts: Counter[str] = Counter()
        self.lines = 0
        self._last: float | None = None
        self._timer: asyncio.TimerHandle | None = None

    def note(self, reason: str, **fields: object) -> None:
        """One occurrence (``fields``: the latest one's details, shown in the next line)."""
        self.counts[reason] += 1
        self.fields.update(fields)
        if self._timer is not None:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._last is None or now - self._last >= self.interval:
            self._write(now)
        else:
            self._timer = loop.call_at(self._last + self.interval, self._flush)

    def close(self) -> None:
        """Write what was counted since the last line, if anything."""
        if self._timer is not None:
            self._timer.cancel()
            self._flush()

    def _flush(self) -> None:
        self._timer = None
        if self.counts:
            self._write(asyncio.get_running_loop().time())

    def _write(self, now: float) -> None:
        self._last = now
        self.lines += 1
        log.warning(self.event, **self.fields, **dict(self.counts),
                    next_line_within_seconds=self.interval)
        self.counts.clear()


# --- rule 4: accept errors ------------------------------------------------------------------


def quiet_accept_errors(loop: asyncio.AbstractEventLoop,
                        interval: float = REPORT_INTERVAL) -> Callable[[], None]:
    """Route ``loop``'s accept-out-of-descriptors reports (and the failures of the retries
    asyncio left scheduled for a listener closed since) to one :class:`CountedWarning`;
    everything else to the handler there was. Returns what puts that handler back."""
    previous = loop.get_exception_handler()
    warning = CountedWarning("[http] out of file descriptors: accepting paused", interval)

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        reason = _accept_trouble(context)
        if reason is not None:
            sock = context.get("socket")  # a retry's failure names none
            warning.note(reason, **({} if sock is None else {"listener": _address(sock)}))
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handle)

    def restore() -> None:
        loop.set_exception_handler(previous)
        warning.close()

    return restore


def _accept_trouble(context: Mapping[str, Any]) -> str | None:
    """The errno name of an accept that found no descriptor, or ``retry`` for the failure of
    a retry asyncio scheduled for a listener that has closed since; None for anything else."""
    exc = context.get("exception")
    if context.get("message") == _ACCEPT_ERROR and isinstance(exc, OSError):
        return errno.errorcode.get(exc.errno or 0, "OSError")
    if isinstance(exc, OSError) and exc.errno in _OUT_OF_FILES and "socket" in context:
        return errno.errorcode.get(exc.errno or 0, "OSError")
    handle = context.get("handle")
    callback = getattr(handle, "_callback", None)  # asyncio.Handle's, no public accessor
    if getattr(callback, "__name__", "") == "_start_serving" and isinstance(exc, ValueError):
        return "retry"
    return None


def _address(sock: object) -> str:
    try:
        host, port = sock.getsockname()[:2]  # type: ignore[attr-defined]
    except (AttributeError, OSError, TypeError, ValueError):
        return "?"
    return f"{host}:{port}"


# --- rule 5: requests aiohttp cannot parse --------------------------------------------------

#: Where aiohttp's parse errors start quoting the request (``b'…'``, ``bytearray(b'…')``).
_QUOTED: Final = re.compile(r"""\s*(?:bytearray\()?b['"]""")
#: The most of a parse error's words a line keeps.
_ERROR_CHARS: Final = 80


def parse_error(exc: HttpProcessingError) -> str:
    """A parse error in a few words: the first line of aiohttp's message, cut where it
    starts quoting the request (which may hold a header's value: a token), at most
    :data:`_ERROR_CHARS` characters."""
    text = str(exc.message).split("\n", 1)[0]
    found = _QUOTED.search(text)
    if found is not None:
        text = text[:found.start()]
    return text.strip().rstrip(":.").strip()[:_ERROR_CHARS]


class ServerLog(logging.Logger):
    """The ``logger`` of a guarded listener's aiohttp request handlers (rule 5): a request
    it could not parse is counted and noted on ``malformed``; anything else goes on to
    ``aiohttp.server`` (its parent) as aiohttp logs it."""

    def __init__(self, listener: str, malformed: CountedWarning) -> None:
        super().__init__(server_logger.name)
        self.parent = server_logger
        self.malformed = malformed
        self._count = counters.HTTP_MALFORMED.labels(listener)

    def exception(self, msg: object, *args: object, exc_info: Any = True,
                  **kwargs: Any) -> None:
        """aiohttp's ``Error handling request from <peer>`` with the parse error as
        ``exc_info``: one count, no traceback."""
        if isinstance(exc_info, HttpProcessingError):
            self._count.inc()
            peer = args[0] if args else None
            self.malformed.note(type(exc_info).__name__, peer=peer,
                                error=parse_error(exc_info))
            return
        super().exception(msg, *args, exc_info=exc_info, **kwargs)


# --- rules 1 and 3: one listener's connections ----------------------------------------------


class _Connection(asyncio.Protocol):
    """One accepted connection: aiohttp's request handler inside, made only once the
    listener admitted it, and where it stands against its deadlines."""

    __slots__ = ("body", "body_since", "guard", "handler", "heard", "request", "since",
                 "transport")

    def __init__(self, guard: ListenerGuard) -> None:
        self.guard = guard
        self.handler: RequestHandler | None = None
        self.transport: asyncio.Transport | None = None
        self.since: float | None = None  # waiting for a head since (None: a request is in)
        self.heard = False  # a byte of that head came
        self.request: web.BaseRequest | None = None  # the one in, while it is
        self.body: Any = None  # its payload (an aiohttp StreamReader)
        self.body_since = 0.0

    # asyncio.Protocol, handed on to aiohttp's handler

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.since = self.guard.now()
        if not self.guard.admit(self):
            transport.abort()
            return
        self.handler = self.guard.server()
        self.handler.logger = self.guard.server_log  # rule 5
        self.guard.adopt(self)
        self.handler.connection_made(transport)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.guard.forget(self)
        if self.handler is not None:
            self.handler.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.since is not None:
            self.heard = True
        if self.handler is not None:
            self.handler.data_received(data)

    def eof_received(self) -> None:
        if self.handler is not None:
            self.handler.eof_received()

    def pause_writing(self) -> None:
        if self.handler is not None:
            self.handler.pause_writing()

    def resume_writing(self) -> None:
        if self.handler is not None:
            self.handler.resume_writing()

    # where it stands

    def head_in(self, request: web.BaseRequest, now: float) -> None:
        self.since = None
        self.request, self.body, self.body_since = request, request.content, now

    def request_done(self, now: float) -> None:
        self.request = self.body = None
        self.since, self.heard = now, False

    def waiting(self) -> bool:
        """Whether it waits for its client (a head, or the rest of a body), not for its
        request's handler."""
        return self.since is not None or (self.body is not None and not self.body.is_eof())

    def overdue(self, now: float, deadlines: Deadlines) -> str | None:
        """Why it must close now (rule 1), or None."""
        if self.since is not None:
            if now - self.since < deadlines.header_seconds:
                return None
            return _HEAD if self.heard else _IDLE
        if (self.body is not None and not self.body.is_eof()
                and now - self.body_since >= deadlines.body_seconds):
            return _BODY
        return None


class ListenerGuard:
    """Rules 1 and 3 for one listener: the protocol factory its server socket is given (in
    place of aiohttp's :class:`~aiohttp.web.Server` itself, which it wraps)."""

    def __init__(self, server: web.Server, name: str, cap: int, deadlines: Deadlines) -> None:
        self.server = server
        self.name = name
        self.cap = cap
        self.deadlines = deadlines
        #: by when they began to wait for their client, the longest first (a request ended
        #: moves its connection to the end)
        self.live: dict[_Connection, None] = {}
        self._by_handler: dict[RequestHandler, _Connection] = {}
        self._sweeping: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()
        self.closed = CountedWarning("[http] connections closed", listener=name, cap=cap)
        self.malformed = CountedWarning("[http] requests not understood: answered 400",
                                        listener=name)
        self.server_log = ServerLog(name, self.malformed)
        factory, handler = server.request_factory, server.request_handler

        def request(message: Any, payload: Any, protocol: RequestHandler, *rest: Any
                    ) -> web.BaseRequest:
            made = factory(message, payload, protocol, *rest)
            connection = self._by_handler.get(protocol)
            if connection is not None:
                connection.head_in(made, self.now())
            return made

        async def handle(request: web.BaseRequest) -> web.StreamResponse:
            try:
                return await handler(request)
            finally:
                connection = self._by_handler.get(request.protocol)
                if connection is not None:
                    connection.request_done(self.now())
                    self.live.pop(connection, None)  # waiting again: last in the order
                    self.live[connection] = None

        server.request_factory = request
        server.request_handler = handle

    def __call__(self) -> _Connection:
        return _Connection(self)

    def now(self) -> float:
        return self._loop.time()

    def admit(self, connection: _Connection) -> bool:
        """Rule 3: room for ``connection``, made if need be; False when there is none."""
        if len(self.live) >= self.cap:
            # the first waiting in the order: past the busy ones only, not every connection
            longest = next((other for other in self.live if other.waiting()), None)
            if longest is None:
                self.closed.note(_REFUSED)
                return False
            self._close(longest, _MADE_ROOM)
        self.live[connection] = None
        if self._sweeping is None:
            self._sweeping = self._loop.call_later(self.deadlines.sweep_seconds, self._sweep)
        return True

    def forget(self, connection: _Connection) -> None:
        self.live.pop(connection, None)
        if connection.handler is not None:
            self._by_handler.pop(connection.handler, None)

    def adopt(self, connection: _Connection) -> None:
        assert connection.handler is not None
        self._by_handler[connection.handler] = connection

    def _sweep(self) -> None:
        """Rule 1: close what is overdue; look again while connections remain."""
        self._sweeping = None
        now = self.now()
        for connection in list(self.live):
            reason = connection.overdue(now, self.deadlines)
            if reason is not None:
                self._close(connection, reason)
        if self.live:
            self._sweeping = self._loop.call_later(self.deadlines.sweep_seconds, self._sweep)

    def _close(self, connection: _Connection, reason: str) -> None:
        """Close ``connection``; a request waiting for its body is cancelled first, as a
        client gone away does (its handler otherwise fails reading, and aiohttp logs a
        traceback for each)."""
        self.forget(connection)
        if connection.request is not None:
            connection.request.task.cancel()
        if connection.transport is not None:
            connection.transport.abort()
        if reason != _IDLE:
            self.closed.note(reason)


# --- the sites ------------------------------------------------------------------------------


class GuardedSite(web.BaseSite):
    """A TCP site like :class:`aiohttp.web.TCPSite` whose connections go through a
    :class:`ListenerGuard`; stopped with its runner as any site."""

    __slots__ = ("_guard", "_host", "_port")

    def __init__(self, runner: web.BaseRunner, host: str, port: int, guard: ListenerGuard
                 ) -> None:
        super().__init__(runner)
        self._host, self._port, self._guard = host, port, guard

    @property
    def name(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._guard, self._host, self._port,
                                                backlog=128)

    async def stop(self) -> None:
        await super().stop()
        self._guard.closed.close()  # what it counted since its last line
        self._guard.malformed.close()


@dataclass(frozen=True, slots=True)
class ConnectionPlan:
    """Rules 1 and 2 for the daemon: the deadlines, and each listener's cap by its config
    key (``webhook.listen`` …)."""

    deadlines: Deadlines
    caps: Mapping[str, int]

    @classmethod
    def for_listeners(cls, deadlines: Deadlines, listeners: Sequence[str], *, most: int,
                      first: str | None, fd_limit: int | None = None) -> ConnectionPlan:
        """The caps of ``listeners`` under this process's open-files limit (or
        ``fd_limit``), logged once."""
        limit = open_files_limit() if fd_limit is None else fd_limit
        plan = cls(deadlines, connection_caps(limit, listeners, most=most, first=first))
        if listeners:
            log.info("[http] connection limits", open_files_limit=limit, caps=dict(plan.caps),
                     header_timeout_seconds=deadlines.header_seconds,
                     body_timeout_seconds=deadlines.body_seconds)
        return plan

    def site(self, runner: web.BaseRunner, host: str, port: int, listener: str
             ) -> GuardedSite:
        """The site of ``listener`` on ``host:port`` (``runner`` set up)."""
        assert runner.server is not None, "set the runner up first"
        guard = ListenerGuard(runner.server, listener, self.caps[listener],
                              self.deadlines)
        return GuardedSite(runner, host, port, guard)
