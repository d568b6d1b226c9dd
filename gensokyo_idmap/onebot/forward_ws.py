"""Forward WebSocket (we are the server, Universal at ``/``): frameworks dial in.

The token (``onebot.access_token``) is checked on upgrade, in constant time, from
``Authorization: Bearer|Token <t>`` or ``?access_token=``; a wrong or missing one is 401 and
no socket opens. Every connection gets its own bounded queue (a slow framework drops its own
oldest events, nobody else's) and runs :func:`serve_socket`. Events published while no
framework is connected are not kept: that is what the reverse direction is for.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import structlog
from aiohttp import web

from gensokyo_idmap.api.access import same_token
from gensokyo_idmap.onebot.connection import ActionHandler, EventQueue, serve_socket

__all__ = ["ForwardWsServer", "presented_token"]

log = structlog.get_logger("gensokyo_idmap.onebot.forward_ws")


def presented_token(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() in ("bearer", "token") and value:
        return value.strip()
    return request.query.get("access_token")


class ForwardWsServer:
    def __init__(
        self,
        self_id: int,
        *,
        access_token: str | None = None,
        heartbeat_interval: float = 5.0,
        queue_size: int = 10_000,
        on_action: ActionHandler | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.self_id = self_id
        self._token = access_token or None
        self.heartbeat_interval = heartbeat_interval
        self._queue_size = queue_size
        self._on_action = on_action
        self._clock = clock
        self._queues: set[EventQueue] = set()
        self._closing = asyncio.Event()
        self._sessions: set[asyncio.Task[Any]] = set()
        self.refused = 0

    @property
    def connections(self) -> int:
        return len(self._queues)

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/", self.handle)]

    def publish(self, event: dict[str, Any]) -> asyncio.Future[Any] | None:
        """Queue for every connected framework; the future resolves when all were written."""
        written = [queue.publish(event) for queue in self._queues]
        if len(written) == 1:
            return written[0]  # the usual case: no gather to build per event
        return asyncio.gather(*written) if written else None

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
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        queue = EventQueue(self._queue_size, f"forward ws {request.remote}")
        self._queues.add(queue)
        task = asyncio.current_task()
        if task is not None:
            self._sessions.add(task)
        log.info("[onebot] forward ws connected", peer=request.remote)
        try:
            await serve_socket(ws, queue, self_id=self.self_id,
                               heartbeat_interval=self.heartbeat_interval,
                               on_action=self._on_action, clock=self._clock,
                               stop=self._closing)
        finally:
            self._queues.discard(queue)
            if task is not None:
                self._sessions.discard(task)
            log.info("[onebot] forward ws closed", peer=request.remote)
        return ws

    async def close(self) -> None:
        """Close every connection with a close frame (before the HTTP server stops)."""
        self._closing.set()
        for _ in range(100):
            if not self._sessions:
                return
            await asyncio.sleep(0.01)
