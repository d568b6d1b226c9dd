"""Forward WebSocket (we are the server): frameworks dial in, at go-cqhttp's three paths.

- ``/``: Universal (events and actions on one connection);
- ``/event``: events only; action frames sent there are ignored, as go-cqhttp does;
- ``/api``: actions only: no lifecycle event, no heartbeat, no events.

Each path also takes a trailing ``/``, and the prefix ``/<self_id>`` naming a bot: one
listener serves every bot of the daemon (:class:`ForwardWsRouter`, one
:class:`ForwardWsServer` per bot; which one by
:mod:`~gensokyo_idmap.onebot.self_id_routing`), each connection getting the events and
answering the actions of its bot. The handshake's ``Host`` and ``Origin`` (a browser
page may open a WebSocket to any address and read what comes), then the token
(``onebot.forward_ws_access_token``, default ``onebot.access_token``) are checked on upgrade
(:mod:`~gensokyo_idmap.onebot.http_auth`: a name not in ``api.allowed_hosts`` 421, a
foreign Origin 403, a missing token 401, a wrong one 403, a client with 10 wrong ones in a
minute 429) and no socket opens without them.
Every connection that takes events gets its own bounded queue and runs :func:`serve_socket`
(events confirmed by ping/pong). Events published while no framework is connected are not
kept: that is what the reverse direction is for.

A client that stops reading never slows the others (docs/delivery.md, "To frameworks"). A
forward client is owed nothing durably, so an event is owed to it only while it confirms
(event_queue rule 6): its confirmations are waited for once it has answered a ping (one goes
right after the lifecycle event) and until one is overdue by
:data:`~gensokyo_idmap.onebot.event_queue.LAG_GRACE`; at that moment the waits already under
way end too, and it is a framework owed nothing until it answers again. It is closed with
1013 (logged with its address) once a ping has gone unanswered for ``ping_timeout`` or its
queue is full, whichever comes first: taken off the connections at once, then given
``ping_timeout`` to take the close frame (behind what it has not read) before the TCP
connection is dropped. Its events count as not delivered.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, Literal

import structlog
from aiohttp import web

from gensokyo_idmap.admission import Admission
from gensokyo_idmap.api.failure_limit import FailureLimit
from gensokyo_idmap.onebot.actions import failed
from gensokyo_idmap.onebot.connection import ActionHandler, serve_actions, serve_socket
from gensokyo_idmap.onebot.event_queue import DEFAULT_WINDOW, EventQueue
from gensokyo_idmap.onebot.http_auth import admission_refusal, token_refusal
from gensokyo_idmap.onebot.self_id_routing import (
    SELF_ID_HEADER,
    Chosen,
    Refused,
    choose_bot,
)

__all__ = ["ForwardWsRouter", "ForwardWsServer", "Role"]

log = structlog.get_logger("gensokyo_idmap.onebot.forward_ws")

#: A forward client has no outbox to spill into: how far (in events held in memory) it may
#: fall behind before it is closed; a client that stops answering goes after ping_timeout.
FORWARD_QUEUE: Final = 10_000


#: What a connection carries, by the path it was opened on (go-cqhttp's paths).
Role = Literal["universal", "event", "api"]
_PATHS: Final[dict[str, Role]] = {"/": "universal", "/event": "event", "/event/": "event",
                                  "/api": "api", "/api/": "api"}


def _peer(request: web.Request) -> str:
    """host:port of the client (``request.remote`` has no port)."""
    transport = request.transport
    peer = transport.get_extra_info("peername") if transport is not None else None
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(request.remote)


class ForwardWsServer:
    def __init__(
        self,
        self_id: int,
        *,
        access_token: str | None = None,
        heartbeat_interval: float = 5.0,
        ping_timeout: float = 10.0,
        queue_size: int = FORWARD_QUEUE,
        window: int = DEFAULT_WINDOW,
        on_action: ActionHandler | None = None,
        clock: Callable[[], float] = time.time,
        confirm_on_write: bool = False,
        admission: Admission | None = None,
        token_failures: FailureLimit | None = None,
    ) -> None:
        """``admission``: the rules over ``api.allowed_hosts`` (default: none listed);
        ``token_failures``: the wrong tokens per client, the daemon's one count for its OneBot
        servers (default: one of its own)."""
        self.self_id = self_id
        self._token = access_token or None
        self._admission = admission if admission is not None else Admission()
        self._failures = token_failures if token_failures is not None else FailureLimit()
        self.heartbeat_interval = heartbeat_interval
        self.ping_timeout = ping_timeout
        self._queue_size = queue_size
        self._window = window
        self._confirm_on_write = confirm_on_write
        self._on_action = on_action
        self._clock = clock
        self._queues: set[EventQueue] = set()
        self._closing = asyncio.Event()
        self._sessions: set[asyncio.Task[Any]] = set()
        self.refused = 0
        self.fell_behind = 0

    @property
    def connections(self) -> int:
        return len(self._queues)

    def owed(self) -> list[int]:
        """Per connection, the events handed to it and not yet confirmed (the console's
        overview shows them)."""
        return [len(queue) for queue in self._queues]

    def routes(self) -> list[web.RouteDef]:
        return [web.get(path, self.handle) for path in _PATHS]

    def publish(self, event: dict[str, Any]) -> asyncio.Future[Any] | None:
        """Queue for every connected framework; the future resolves when every one that is
        confirming has confirmed it or lagged (one that is not is not waited for, a full one
        is closed)."""
        if not self._queues:
            return None
        now = asyncio.get_running_loop().time()
        confirmed = []
        for queue in list(self._queues):
            if queue.full:
                self._behind(queue)
                continue
            future = queue.publish(event)
            if queue.confirming(now):
                confirmed.append(future)
        if len(confirmed) == 1:
            return confirmed[0]  # the usual case: no gather to build per event
        return asyncio.gather(*confirmed) if confirmed else None

    def _behind(self, queue: EventQueue) -> None:
        """A client whose queue is full: closed with 1013, nobody waits for it any more."""
        self.fell_behind += 1
        log.warning("[onebot] forward ws client fell behind: closed", peer=queue.name,
                    queued=len(queue), code=1013)
        self._gone(queue)
        queue.end()

    def _gone(self, queue: EventQueue) -> None:
        """A client given up on (or closed): no more events, its futures turn False."""
        self._queues.discard(queue)
        queue.fail_all()  # a forward client's events die with its connection

    def refusal(self, request: web.Request) -> web.StreamResponse | None:
        """The answer to a handshake whose ``Host``, ``Origin`` or token is refused (counted
        and logged); None: it may open."""
        refused = admission_refusal(request, self._admission, "forward_ws")
        if refused is None:
            refused = token_refusal(request, self._token, self._failures, "forward_ws")
            if refused is not None and refused.status != 429:  # its lockout was logged
                log.warning("[onebot] forward ws refused: wrong or missing access token",
                            peer=request.remote, path=request.path, status=refused.status)
        if refused is not None:
            self.refused += 1
        return refused

    async def handle(self, request: web.Request) -> web.StreamResponse:
        refused = self.refusal(request)
        if refused is not None:
            return refused
        return await self.serve(request, _PATHS.get(request.path, "universal"))

    async def serve(self, request: web.Request, role: Role) -> web.StreamResponse:
        """Open the WebSocket of an admitted handshake and run it in ``role``."""
        ws = web.WebSocketResponse(autoping=False)
        await ws.prepare(request)
        peer = _peer(request)
        if role == "api":
            await self._serve_api(ws, peer)
            return ws
        queue = EventQueue(self._queue_size, peer, kind="forward_ws", window=self._window,
                           confirm_on_write=self._confirm_on_write, owed_while_lagging=False)
        self._queues.add(queue)
        task = asyncio.current_task()
        if task is not None:
            self._sessions.add(task)
        log.info("[onebot] forward ws connected", peer=peer, role=role)
        try:
            await serve_socket(ws, queue, self_id=self.self_id,
                               heartbeat_interval=self.heartbeat_interval,
                               ping_timeout=self.ping_timeout,
                               on_action=self._on_action, clock=self._clock,
                               stop=self._closing, name=f"forward ws {peer}",
                               on_closing=lambda: self._gone(queue),
                               close_patience=self.ping_timeout, probe_first=True,
                               answer_actions=role == "universal")
        finally:
            self._gone(queue)
            if task is not None:
                self._sessions.discard(task)
            log.info("[onebot] forward ws closed", peer=peer)
        return ws

    async def _serve_api(self, ws: web.WebSocketResponse, peer: str) -> None:
        """An actions-only connection (``/api``): no queue, so it never counts among the
        connections events are handed to."""
        task = asyncio.current_task()
        if task is not None:
            self._sessions.add(task)
        log.info("[onebot] forward ws connected", peer=peer, role="api")
        try:
            await serve_actions(ws, on_action=self._on_action, stop=self._closing,
                                close_patience=self.ping_timeout)
        finally:
            if task is not None:
                self._sessions.discard(task)
            log.info("[onebot] forward ws closed", peer=peer)

    async def close(self) -> None:
        """Close every connection with a close frame (before the HTTP server stops)."""
        self._closing.set()
        for _ in range(100):
            if not self._sessions:
                return
            await asyncio.sleep(0.01)


class ForwardWsRouter:
    """One forward-WS listener for every bot: a handshake is admitted (``Host``,
    ``Origin``, token: one setting for all), then goes to the server of the bot its path
    prefix or ``X-Self-ID`` names (:func:`~gensokyo_idmap.onebot.self_id_routing.choose_bot`:
    with one bot, that one), in the role the rest of its path names."""

    def __init__(self, servers: Sequence[ForwardWsServer]) -> None:
        self.servers = {server.self_id: server for server in servers}
        self._self_ids = list(self.servers)
        self._first = servers[0]
        self.refused = 0

    @property
    def connections(self) -> int:
        return sum(server.connections for server in self.servers.values())

    def owed(self) -> list[int]:
        """Per connection of every bot, the events handed to it and not yet confirmed."""
        return [events for server in self.servers.values() for events in server.owed()]

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/{path:.*}", self.handle)]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        choice = choose_bot(self._self_ids, request.headers.get(SELF_ID_HEADER), request.path)
        role = _PATHS.get(choice.path) if isinstance(choice, Chosen) else None
        if isinstance(choice, Chosen) and role is None:
            raise web.HTTPNotFound()  # no such path, as before there were several bots
        refused = self._first.refusal(request)
        if refused is not None:
            return refused
        if isinstance(choice, Refused):
            self.refused += 1
            log.warning("[onebot] forward ws refused: no bot chosen", peer=request.remote,
                        path=request.path, status=choice.status, reason=choice.reason)
            return web.json_response(failed(1000 + choice.status, choice.reason),
                                     status=choice.status)
        assert role is not None
        return await self.servers[choice.self_id].serve(request, role)

    async def close(self) -> None:
        """Close every bot's connections (before the HTTP server stops)."""
        await asyncio.gather(*(server.close() for server in self.servers.values()))
