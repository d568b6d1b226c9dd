"""Forward WebSocket (we are the server, Universal at ``/``): frameworks dial in.

The token (``onebot.access_token``) is checked on upgrade, in constant time, from
``Authorization: Bearer|Token <t>`` or ``?access_token=``; a wrong or missing one is 401 and
no socket opens. Every connection gets its own bounded queue and runs :func:`serve_socket`
(events confirmed by ping/pong). Events published while no framework is connected are not
kept: that is what the reverse direction is for.

A client that falls behind never slows the others: once it has not answered a ping for
:data:`~gensokyo_idmap.onebot.event_queue.LAG_GRACE` its confirmations are no longer waited
for; once its queue is full it is closed with 1013 (logged with its address) and its events
count as not delivered; no pong within ``ping_timeout``: closed (dropped) as well.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Final

import structlog
from aiohttp import web

from gensokyo_idmap.api.access import same_token
from gensokyo_idmap.onebot.connection import ActionHandler, serve_socket
from gensokyo_idmap.onebot.event_queue import DEFAULT_WINDOW, EventQueue

__all__ = ["ForwardWsServer", "presented_token"]

log = structlog.get_logger("gensokyo_idmap.onebot.forward_ws")

#: A forward client has no outbox to spill into: how far (in events held in memory) it may
#: fall behind before it is closed; a client that stops answering goes after ping_timeout.
FORWARD_QUEUE: Final = 10_000


def presented_token(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() in ("bearer", "token") and value:
        return value.strip()
    return request.query.get("access_token")


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
    ) -> None:
        self.self_id = self_id
        self._token = access_token or None
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
        return [web.get("/", self.handle)]

    def publish(self, event: dict[str, Any]) -> asyncio.Future[Any] | None:
        """Queue for every connected framework; the future resolves when every one that is
        keeping up confirmed it (a lagging one is not waited for, a full one is closed)."""
        if not self._queues:
            return None
        now = asyncio.get_running_loop().time()
        confirmed = []
        for queue in list(self._queues):
            if queue.full:
                self._behind(queue)
                continue
            future = queue.publish(event)
            if not queue.lagging(now):
                confirmed.append(future)
        if len(confirmed) == 1:
            return confirmed[0]  # the usual case: no gather to build per event
        return asyncio.gather(*confirmed) if confirmed else None

    def _behind(self, queue: EventQueue) -> None:
        """A client whose queue is full: closed with 1013, nobody waits for it any more."""
        self._queues.discard(queue)
        self.fell_behind += 1
        log.warning("[onebot] forward ws client fell behind: closed", peer=queue.name,
                    queued=len(queue), code=1013)
        queue.fail_all()
        queue.end()

    def _authorised(self, request: web.Request) -> bool:
        if self._token is None:
            return True
        presented = presented_token(request)
        return presented is not None and same_token(presented, self._token)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if not self._authorised(request):
            self.refused += 1
            log.warning("[onebot] forward ws refused: wrong or missing access token",
                        peer=request.remote)
            return web.json_response({"status": "failed", "retcode": 1401,
                                      "message": "wrong or missing access token"}, status=401)
        ws = web.WebSocketResponse(autoping=False)
        await ws.prepare(request)
        peer = _peer(request)
        queue = EventQueue(self._queue_size, peer, kind="forward_ws", window=self._window,
                           confirm_on_write=self._confirm_on_write)
        self._queues.add(queue)
        task = asyncio.current_task()
        if task is not None:
            self._sessions.add(task)
        log.info("[onebot] forward ws connected", peer=peer)
        try:
            await serve_socket(ws, queue, self_id=self.self_id,
                               heartbeat_interval=self.heartbeat_interval,
                               ping_timeout=self.ping_timeout,
                               on_action=self._on_action, clock=self._clock,
                               stop=self._closing, name=f"forward ws {peer}")
        finally:
            self._queues.discard(queue)
            queue.fail_all()  # a forward client's events die with its connection
            if task is not None:
                self._sessions.discard(task)
            log.info("[onebot] forward ws closed", peer=peer)
        return ws

    async def close(self) -> None:
        """Close every connection with a close frame (before the HTTP server stops)."""
        self._closing.set()
        for _ in range(100):
            if not self._sessions:
                return
            await asyncio.sleep(0.01)
