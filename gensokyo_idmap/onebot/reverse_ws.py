"""Reverse WebSocket (Universal role): we dial the framework, push events, answer actions.

Rules (reference onebot-v11.md §1.4):

1. **Handshake**: ``X-Self-ID``, ``X-Client-Role: Universal``, ``User-Agent``, and
   ``Authorization: Bearer <token>`` when a token is set (the token is never logged).
2. **First frame** on every connection is ``lifecycle/connect``; then a heartbeat meta event
   every ``heartbeat_interval`` seconds.
3. **Never blocks the platform side**: :meth:`publish` only puts into a bounded queue; when
   it is full the oldest event is dropped, logged and counted. Events published while the
   framework is away wait in the queue and go out after the next connect.
4. **Reconnects forever**, every ``reconnect_interval`` seconds, until :meth:`close`.
5. Incoming frames are actions; each goes to ``on_action`` and its response is sent back.
   Without a handler, every action is answered ``retcode 1404``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Final

import aiohttp
import structlog

from gensokyo_idmap.onebot import events as ob

__all__ = ["ActionHandler", "ReverseWsClient"]

log = structlog.get_logger("gensokyo_idmap.onebot.reverse_ws")

ActionHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
USER_AGENT: Final = "gensokyo-idmap/0.1 (OneBot/11)"


def _unsupported(frame: dict[str, Any]) -> dict[str, Any]:
    return {"status": "failed", "retcode": 1404, "data": None,
            "message": "unsupported action", "wording": "unsupported action",
            "echo": frame.get("echo")}


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
        self._queue: deque[dict[str, Any]] = deque(maxlen=queue_size)
        self._wakeup = asyncio.Event()
        self._on_action = on_action
        self._clock = clock
        self._closed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()
        self.dropped = 0
        self.sent = 0
        self.connects = 0
        self._failing = False

    def publish(self, event: dict[str, Any]) -> None:
        """Queue an event for this framework; never waits."""
        if len(self._queue) == self._queue.maxlen:
            self.dropped += 1
            log.warning("[onebot] reverse ws queue full: oldest event dropped", url=self.url,
                        dropped=self.dropped)
        self._queue.append(event)
        self._wakeup.set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"reverse-ws {self.url}")

    async def close(self) -> None:
        """Stop reconnecting and close the connection with a proper close frame."""
        self._closed.set()
        self._wakeup.set()
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
                        await self._serve(ws)
                except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
                    # loud once per outage, quiet while it lasts
                    report = log.warning if not self._failing else log.debug
                    report("[onebot] reverse ws unavailable", url=self.url,
                           error=type(exc).__name__, retry_in=self.reconnect_interval)
                    self._failing = True
                finally:
                    self.connected.clear()
                if self._closed.is_set():
                    break
                try:
                    await asyncio.wait_for(self._closed.wait(), self.reconnect_interval)
                except TimeoutError:
                    pass

    async def _serve(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        now = int(self._clock())
        await ws.send_str(json.dumps(ob.lifecycle(self_id=self.self_id, time=now,
                                                  sub_type="connect")))
        self.connected.set()
        tasks = [asyncio.create_task(self._send_loop(ws)),
                 asyncio.create_task(self._heartbeat_loop(ws)),
                 asyncio.create_task(self._receive_loop(ws)),
                 asyncio.create_task(self._closed.wait())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if not ws.closed:
                await ws.close()

    async def _send_loop(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        while not ws.closed:
            while self._queue:
                event = self._queue[0]
                await ws.send_str(json.dumps(event, ensure_ascii=False))
                self._queue.popleft()  # only once it went out on this connection
                self.sent += 1
            self._wakeup.clear()
            if not self._queue:
                await self._wakeup.wait()

    async def _heartbeat_loop(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        while not ws.closed:
            await asyncio.sleep(self.heartbeat_interval)
            await ws.send_str(json.dumps(ob.heartbeat(
                self_id=self.self_id, time=int(self._clock()),
                interval_ms=int(self.heartbeat_interval * 1000))))

    async def _receive_loop(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        async for message in ws:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            try:
                frame = json.loads(message.data)
            except ValueError:
                await ws.send_str(json.dumps({"status": "failed", "retcode": 1400,
                                              "data": None, "message": "bad JSON",
                                              "wording": "bad JSON", "echo": None}))
                continue
            if not isinstance(frame, dict):
                continue
            handler = self._on_action
            response = await handler(frame) if handler is not None else _unsupported(frame)
            await ws.send_str(json.dumps(response, ensure_ascii=False))
