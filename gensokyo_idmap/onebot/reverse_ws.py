"""Reverse WebSocket (Universal role): we dial the framework, push events, answer actions.

Rules (reference onebot-v11.md §1.4):

1. **Handshake**: ``X-Self-ID``, ``X-Client-Role: Universal``, ``User-Agent``, and
   ``Authorization: Bearer <token>`` when a token is set (the token is never logged).
2. **Per connection** (:func:`serve_socket`): ``lifecycle/connect`` first, then the queued
   events in order and a heartbeat meta event every ``heartbeat_interval`` seconds.
3. **Never blocks the platform side**: :meth:`publish` only queues (bounded; the oldest is
   dropped, logged and counted). Events published while the framework is away wait in the
   queue and go out after the next connect.
4. **Reconnects forever**, every ``reconnect_interval`` seconds, until :meth:`close`; an
   outage is logged once, then retried quietly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Final

import aiohttp
import structlog

from gensokyo_idmap.onebot.connection import ActionHandler, EventQueue, serve_socket
from gensokyo_idmap.redaction import redact_url

__all__ = ["ActionHandler", "ReverseWsClient"]

log = structlog.get_logger("gensokyo_idmap.onebot.reverse_ws")

USER_AGENT: Final = "gensokyo-idmap/0.1 (OneBot/11)"


class ReverseWsClient:
    """One reverse-WS connection to one framework URL."""

    def __init__(
        self,
        url: str,
        self_id: int,
        *,
        access_token: str | None = None,
        reconnect_interval: float = 3.0,
        heartbeat_interval: float = 5.0,
        queue_size: int = 10_000,
        on_action: ActionHandler | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.url = url
        self.self_id = self_id
        self._token = access_token
        self.reconnect_interval = reconnect_interval
        self.heartbeat_interval = heartbeat_interval
        self.queue = EventQueue(queue_size, url)
        self._on_action = on_action
        self._clock = clock
        self._closed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._failing = False
        self.connected = asyncio.Event()
        self.connects = 0

    @property
    def dropped(self) -> int:
        return self.queue.dropped

    def publish(self, event: dict[str, Any]) -> asyncio.Future[bool] | None:
        """Queue an event for this framework; never waits. The future (only while connected:
        otherwise nobody should wait for it) turns True once the event was written."""
        written, connected = self.publish_tracked(event)
        return written if connected else None

    @property
    def outbox_name(self) -> str:
        return f"reverse_ws {self.url}"

    def publish_tracked(self, event: dict[str, Any]) -> tuple[asyncio.Future[bool], bool]:
        """Queue an event; its write future even while disconnected (the outbox keeps such
        events durably), and whether the framework is connected now."""
        return self.queue.publish(event), self.connected.is_set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"reverse-ws {self.url}")

    async def drain(self, timeout: float) -> None:
        """While connected, give queued events up to ``timeout`` seconds to go out."""
        deadline = asyncio.get_running_loop().time() + timeout
        while len(self.queue) and self.connected.is_set():
            if asyncio.get_running_loop().time() >= deadline:
                return
            await asyncio.sleep(0.01)

    async def close(self) -> None:
        """Stop reconnecting and close the connection with a proper close frame."""
        self._closed.set()
        self.queue.wake()
        if self._task is not None:
            await self._task

    def _headers(self) -> dict[str, str]:
        headers = {"X-Self-ID": str(self.self_id), "X-Client-Role": "Universal",
                   "User-Agent": USER_AGENT}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        return headers

    async def _run(self) -> None:
        async with aiohttp.ClientSession() as session:
            while not self._closed.is_set():
                try:
                    async with session.ws_connect(self.url, headers=self._headers(),
                                                  heartbeat=None, autoping=True) as ws:
                        self.connects += 1
                        self._failing = False
                        log.info("[onebot] reverse ws connected", url=self.url)
                        await serve_socket(ws, self.queue, self_id=self.self_id,
                                           heartbeat_interval=self.heartbeat_interval,
                                           on_action=self._on_action, clock=self._clock,
                                           stop=self._closed, on_open=self.connected.set)
                except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                    # loud once per outage, quiet while it lasts; a refused handshake says
                    # what the framework answered (401/403: the token; 404: the path)
                    report = log.warning if not self._failing else log.debug
                    status = exc.status if isinstance(exc, aiohttp.ClientResponseError) else None
                    report("[onebot] reverse ws unavailable", url=redact_url(self.url),
                           error=type(exc).__name__, status=status,
                           retry_in=self.reconnect_interval)
                    self._failing = True
                finally:
                    self.connected.clear()
                if self._closed.is_set():
                    break
                try:
                    await asyncio.wait_for(self._closed.wait(), self.reconnect_interval)
                except TimeoutError:
                    pass
