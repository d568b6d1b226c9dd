"""What every OneBot WebSocket connection does, whichever side dialled.

A connection sends ``lifecycle/connect`` first, then the events of its queue in order, each
burst followed by a ping (:mod:`event_queue`: the pong confirms the events), and a heartbeat
every interval (followed by a ping too, so a framework that gets nothing is still checked);
incoming frames are actions answered through the handler, pings answered with pongs, pongs
handed to the queue. aiohttp swallows pongs when ``autoping`` is on, so both sides open their
sockets with ``autoping=False`` and this module answers pings itself.

A framework that answers no ping within ``ping_timeout`` is frozen or unreachable: the
connection is closed, and when the peer does not even take the close frame, dropped
(:func:`abort`). What it had in flight is the owner's to requeue or fail.

go-cqhttp's forward WebSocket also serves one-way connections: ``/event`` (events only; an
action frame sent there is read and ignored, as go-cqhttp never reads that socket:
``answer_actions=False``) and ``/api`` (actions only: :func:`serve_actions`, no lifecycle
event, no heartbeat).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, Protocol

import structlog
from aiohttp import WSMsgType

from gensokyo_idmap import jsonio
from gensokyo_idmap.onebot import events as ob
from gensokyo_idmap.onebot.actions import RETCODE_BAD_JSON, failed, unknown_action
from gensokyo_idmap.onebot.event_queue import LAG_GRACE, EventQueue
from gensokyo_idmap.onebot.status import StatusSource, unknown

__all__ = ["ActionHandler", "EventQueue", "abort", "serve_actions", "serve_socket"]

log = structlog.get_logger("gensokyo_idmap.onebot")

ActionHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]

#: WebSocket close codes: a normal close, and "try again later" (fell behind, no pong)
CLOSE_NORMAL: Final = 1000
CLOSE_TRY_LATER: Final = 1013
#: How long a peer that stopped answering gets to take our close frame before the TCP
#: connection is dropped
_UNRESPONSIVE_CLOSE: Final = 0.2


class _Socket(Protocol):
    """The part of aiohttp's client and server WebSocket objects a connection uses."""

    @property
    def closed(self) -> bool: ...
    async def send_str(self, data: str) -> None: ...
    async def send_frame(self, message: bytes, opcode: WSMsgType,
                         compress: int | None = None) -> None: ...
    async def ping(self, message: bytes = b"") -> None: ...
    async def pong(self, message: bytes = b"") -> None: ...
    async def close(self, *, code: int = CLOSE_NORMAL, message: bytes = b"") -> bool: ...
    def __aiter__(self) -> Any: ...


def abort(ws: Any) -> None:
    """Drop the TCP connection under ``ws`` now, unsent bytes and all.

    ``close()`` waits for the peer's close frame, and the transport's own ``close()`` waits
    until its write buffer drained: a frozen peer never reads, so neither ever ends and the
    connection would never be noticed as lost. aiohttp has no public handle on a client
    socket's transport; both of its WebSocket classes write through ``_writer.transport``.
    """
    transport = getattr(getattr(ws, "_writer", None), "transport", None)
    if transport is not None:
        transport.abort()  # also when closing: it may be waiting for its buffer to drain


async def _close_socket(ws: _Socket, code: int, patience: float,
                        stop: asyncio.Event | None = None) -> None:
    """Close with ``code``; drop the connection if the peer has not answered in time, or
    once ``stop`` is set (a daemon's stop never waits on a peer that does not read)."""
    if ws.closed:
        return
    closing = asyncio.ensure_future(ws.close(code=code))
    waits: list[asyncio.Future[Any]] = [closing]
    if stop is not None:
        waits.append(asyncio.ensure_future(stop.wait()))
    try:
        await asyncio.wait(waits, timeout=patience, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
    if not closing.done() or closing.cancelled() or closing.exception() is not None:
        abort(ws)


async def _ping(ws: _Socket, queue: EventQueue, *, probe: bool = False) -> None:
    number = queue.ping(asyncio.get_running_loop().time(), probe=probe)
    if number is not None:
        await ws.ping(b"%d" % number)


async def _send_events(ws: _Socket, queue: EventQueue) -> None:
    """Send queued events in order, within the window, a ping after each burst (a few
    unanswered at a time: event_queue rule 2)."""
    text = WSMsgType.TEXT
    while not ws.closed:
        await queue.wait_sendable()
        if queue.ended.is_set():
            return
        while (event := queue.take()) is not None:
            data = queue.encoded(event)
            if data is None:
                continue
            await ws.send_frame(data, text)
            if queue.written():
                await _ping(ws, queue)
        await _ping(ws, queue)


async def _heartbeats(ws: _Socket, queue: EventQueue, self_id: int, interval: float,
                      clock: Callable[[], float], status: StatusSource) -> None:
    """A heartbeat every ``interval``, its ``status`` the bot's at that moment."""
    while not ws.closed:
        await asyncio.sleep(interval)
        await ws.send_str(jsonio.dumps(ob.heartbeat(
            self_id=self_id, time=int(clock()), interval_ms=int(interval * 1000),
            status=status())))
        await _ping(ws, queue, probe=True)


async def _watch_pongs(queue: EventQueue, ping_timeout: float) -> None:
    """Return once a confirmation has been awaited for ``ping_timeout`` seconds; tell the
    queue once one has been awaited for :data:`LAG_GRACE` (:meth:`EventQueue.lagged`: a
    forward-WS client's waits end then). Looks every quarter of the shorter of the two, or
    at the timeout's deadline when that comes first."""
    loop = asyncio.get_running_loop()
    tick = min(LAG_GRACE, ping_timeout) / 4
    while True:
        oldest = queue.oldest_ping()
        now = loop.time()
        if oldest is None:
            await asyncio.sleep(tick)
            continue
        if now - oldest >= ping_timeout:
            return
        if now - oldest >= LAG_GRACE:
            queue.lagged()
        await asyncio.sleep(min(tick, oldest + ping_timeout - now))


async def _answer(ws: _Socket, on_action: ActionHandler | None, frame: Any) -> None:
    if not isinstance(frame, dict):
        response = failed(RETCODE_BAD_JSON, "an action frame must be a JSON object")
    elif on_action is None:
        response = unknown_action(str(frame.get("action")), frame.get("echo"))
    else:
        response = await on_action(frame)
    if not ws.closed:
        await ws.send_str(jsonio.dumps(response))


async def _receive(ws: _Socket, queue: EventQueue | None, on_action: ActionHandler | None,
                   answer_actions: bool = True) -> None:
    """Answer every action frame (each on its own, so a slow send, which the platform may
    take seconds for, never holds up a quick ``get_status``; none on an events-only
    connection) and every ping; pongs go to the queue (an actions-only connection has
    none)."""
    running: set[asyncio.Task[None]] = set()
    try:
        async for message in ws:
            kind = message.type
            if kind is WSMsgType.PONG:
                if queue is not None:
                    queue.pong(message.data)
                continue
            if kind is WSMsgType.PING:
                await ws.pong(message.data)
                continue
            if kind is not WSMsgType.TEXT or not answer_actions:
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


async def _until_one_ends(tasks: Sequence[asyncio.Task[Any]]) -> None:
    """Wait until one of a connection's tasks ends (or this wait is cancelled), then cancel
    the others and wait for them."""
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def serve_socket(
    ws: _Socket,
    queue: EventQueue,
    *,
    self_id: int,
    heartbeat_interval: float,
    ping_timeout: float,
    on_action: ActionHandler | None,
    clock: Callable[[], float],
    stop: asyncio.Event,
    name: str,
    on_open: Callable[[], None] | None = None,
    on_closing: Callable[[], None] | None = None,
    close_patience: float = _UNRESPONSIVE_CLOSE,
    probe_first: bool = False,
    answer_actions: bool = True,
    status: StatusSource = unknown,
) -> None:
    """Run one connection until it closes, ``stop`` is set, the queue is ended (its owner
    gave up on the peer: closed with 1013) or a confirmation is awaited for ``ping_timeout``
    (closed with 1013). A peer given up on gets ``close_patience`` seconds to take the close
    frame (queued behind whatever it has not read), then the connection is dropped;
    ``on_closing`` runs first, so that wait costs nobody. With ``probe_first`` a ping goes
    right after the lifecycle event, so a peer that reads nothing after the handshake is
    closed ``ping_timeout`` after it, and one that reads is known to before any event goes
    (:meth:`EventQueue.confirming`). ``status``: the bot's, which each heartbeat says. The
    queue's in-flight events stay in flight: requeueing or failing them is the owner's
    choice."""
    await ws.send_str(jsonio.dumps(ob.lifecycle(self_id=self_id, time=int(clock()),
                                              sub_type="connect")))
    if probe_first:
        await _ping(ws, queue, probe=True)
    if on_open is not None:
        on_open()
    sending = asyncio.create_task(_send_events(ws, queue))
    watching = asyncio.create_task(_watch_pongs(queue, ping_timeout))
    tasks = [sending, watching,
             asyncio.create_task(_heartbeats(ws, queue, self_id, heartbeat_interval, clock,
                                             status)),
             asyncio.create_task(_receive(ws, queue, on_action, answer_actions)),
             asyncio.create_task(stop.wait()),
             asyncio.create_task(queue.ended.wait())]
    try:
        await _until_one_ends(tasks)
    finally:
        silent = (watching.done() and not watching.cancelled()
                  and watching.exception() is None)
        if silent:
            log.warning("[onebot] no pong in time: connection dropped", connection=name,
                        ping_timeout=ping_timeout, in_flight=queue.in_flight,
                        code=CLOSE_TRY_LATER)
        if on_closing is not None:
            on_closing()
        if silent or queue.ended.is_set():
            await _close_socket(ws, CLOSE_TRY_LATER, close_patience, stop)
        else:
            # a peer that stopped reading may never take the close frame: bounded too
            await _close_socket(ws, CLOSE_NORMAL, ping_timeout)


async def serve_actions(ws: _Socket, *, on_action: ActionHandler | None, stop: asyncio.Event,
                        close_patience: float) -> None:
    """Run an actions-only connection (go-cqhttp's ``/api``) until it closes or ``stop`` is
    set: actions answered, pings answered; no event, no heartbeat, so nothing to confirm
    and no ping of ours to wait for."""
    try:
        await _until_one_ends([asyncio.create_task(_receive(ws, None, on_action)),
                               asyncio.create_task(stop.wait())])
    finally:
        await _close_socket(ws, CLOSE_NORMAL, close_patience)
