"""What every OneBot WebSocket connection does, whichever side dialled.

A connection sends ``lifecycle/connect`` first, then the events of its queue in order and a
heartbeat every interval; incoming frames are actions answered through the handler. The
queue is bounded and :meth:`EventQueue.publish` never waits: a slow or dead framework drops
its own oldest events (logged, counted) and holds up nobody else.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import structlog

from gensokyo_idmap import jsonio
from gensokyo_idmap.onebot import events as ob
from gensokyo_idmap.onebot.actions import RETCODE_BAD_JSON, failed, unknown_action

__all__ = ["ActionHandler", "EventQueue", "serve_socket"]

log = structlog.get_logger("gensokyo_idmap.onebot")

ActionHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class _Socket(Protocol):
    """The part of aiohttp's client and server WebSocket objects a connection uses."""

    @property
    def closed(self) -> bool: ...
    async def send_str(self, data: str) -> None: ...
    async def close(self) -> bool: ...
    def __aiter__(self) -> Any: ...


class EventQueue:
    """Events waiting for one connection, oldest first, at most ``size`` of them.

    :meth:`publish` returns a future that turns True once the event was written to the
    socket (or posted), False if it was dropped: the webhook waits on it, for connected
    frameworks, before acknowledging.
    """

    def __init__(self, size: int, name: str) -> None:
        self._events: deque[tuple[dict[str, Any], asyncio.Future[bool]]] = deque()
        self._size = size
        self._wakeup = asyncio.Event()
        self.name = name
        self.dropped = 0
        self.sent = 0

    def publish(self, event: dict[str, Any]) -> asyncio.Future[bool]:
        if len(self._events) >= self._size:
            _, evicted = self._events.popleft()
            if not evicted.done():
                evicted.set_result(False)
            self.dropped += 1
            log.warning("[onebot] queue full: oldest event dropped", connection=self.name,
                        dropped=self.dropped)
        written: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._events.append((event, written))
        self._wakeup.set()
        return written

    def __len__(self) -> int:
        return len(self._events)

    def pending(self) -> list[dict[str, Any]]:
        return [event for event, _ in self._events]

    async def drain_into(self, ws: _Socket) -> None:
        """Send queued events in order; an event leaves the queue once it was written."""
        while not ws.closed:
            while self._events:
                event, written = self._events[0]
                await ws.send_str(jsonio.dumps(event))
                self._events.popleft()
                self.sent += 1
                if not written.done():
                    written.set_result(True)
            self._wakeup.clear()
            if not self._events:
                await self._wakeup.wait()

    def wake(self) -> None:
        self._wakeup.set()

    async def next_or_none(
        self, stop: asyncio.Event
    ) -> tuple[dict[str, Any], asyncio.Future[bool]] | None:
        """The oldest event and its future, taken off the queue; None once ``stop`` is set."""
        while not self._events:
            if stop.is_set():
                return None
            self._wakeup.clear()
            await self._wakeup.wait()
        self.sent += 1
        return self._events.popleft()


async def _heartbeats(ws: _Socket, self_id: int, interval: float,
                      clock: Callable[[], float]) -> None:
    while not ws.closed:
        await asyncio.sleep(interval)
        await ws.send_str(jsonio.dumps(ob.heartbeat(
            self_id=self_id, time=int(clock()), interval_ms=int(interval * 1000))))


async def _answer(ws: _Socket, on_action: ActionHandler | None, frame: Any) -> None:
    if not isinstance(frame, dict):
        response = failed(RETCODE_BAD_JSON, "an action frame must be a JSON object")
    elif on_action is None:
        response = unknown_action(str(frame.get("action")), frame.get("echo"))
    else:
        response = await on_action(frame)
    if not ws.closed:
        await ws.send_str(jsonio.dumps(response))


async def _actions(ws: _Socket, on_action: ActionHandler | None) -> None:
    """Answer every action frame; each runs on its own, so a slow send (the platform may
    take seconds) never holds up a quick ``get_status`` on the same connection."""
    running: set[asyncio.Task[None]] = set()
    try:
        async for message in ws:
            if message.type.name != "TEXT":
                continue
            try:
                frame = jsonio.loads(message.data)
            except (ValueError, RecursionError):
                await ws.send_str(jsonio.dumps(failed(RETCODE_BAD_JSON, "bad JSON")))
                continue
            task = asyncio.create_task(_answer(ws, on_action, frame))
            running.add(task)
            task.add_done_callback(running.discard)
    finally:
        for task in running:
            task.cancel()


async def serve_socket(
    ws: _Socket,
    queue: EventQueue,
    *,
    self_id: int,
    heartbeat_interval: float,
    on_action: ActionHandler | None,
    clock: Callable[[], float],
    stop: asyncio.Event,
    on_open: Callable[[], None] | None = None,
) -> None:
    """Run one connection until it closes or ``stop`` is set; then close it properly."""
    await ws.send_str(jsonio.dumps(ob.lifecycle(self_id=self_id, time=int(clock()),
                                              sub_type="connect")))
    if on_open is not None:
        on_open()
    tasks = [asyncio.create_task(queue.drain_into(ws)),
             asyncio.create_task(_heartbeats(ws, self_id, heartbeat_interval, clock)),
             asyncio.create_task(_actions(ws, on_action)),
             asyncio.create_task(stop.wait())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if not ws.closed:
            await ws.close()
