"""What tests running real servers on 127.0.0.1 share: a free port, a framework's reverse-WS
endpoint in the test's process, and a framework that holds the daemon to stable vUINs."""

from __future__ import annotations

import asyncio
import json
import random
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

from aiohttp import WSMsgType, web
from aiohttp.test_utils import TestServer

#: Where :func:`free_port` looks when the kernel's ephemeral range cannot be read.
_EPHEMERAL_FALLBACK: Final = (32768, 60999)
_handed_out: set[int] = set()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return _EPHEMERAL_FALLBACK


def free_port() -> int:
    """A port nobody listens on right now (for a daemon the test starts), chosen *below* the
    kernel's ephemeral range.

    A port the kernel handed out for ``bind(0)`` goes back to that pool when the probe
    closes, so a server that binds port 0 meanwhile (the demo's emulated platform, any
    client socket) can take it before the daemon does: a test failed that way ("address
    already in use"). Below the range only an explicit bind lands, and this process never
    hands the same port out twice.
    """
    low, _ = _ephemeral_range()
    candidates = list(range(max(1024, low - 12000), low))
    random.shuffle(candidates)
    for port in candidates:
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    with socket.socket() as sock:  # nothing free below the range: the kernel's choice
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def framework_server(handler: Handler, post: Handler | None = None) -> TestServer:
    """The framework's reverse-WS endpoint (``/ws``) in this process, and its HTTP POST
    receiver (``/post``) when ``post`` is given."""
    app = web.Application()
    app.router.add_get("/ws", handler)
    if post is not None:
        app.router.add_post("/post", post)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server


async def raw_request(port: int, head: bytes) -> tuple[int, bytes]:
    """Send ``head`` (request line and header lines, each ending in CRLF) to 127.0.0.1:port
    byte for byte, as aiohttp's client will not (header bytes that are not UTF-8): the
    status and the body of the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head + b"Host: 127.0.0.1\r\nConnection: close\r\n\r\n")
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
        await writer.wait_closed()
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def ws_url(server: TestServer) -> str:
    return str(server.make_url("/ws")).replace("http", "ws")


class RecordingFramework:
    """A reverse-WS framework (:meth:`handle` is its aiohttp handler) that counts its
    connections, keeps the request headers of each (``Authorization``, ``X-Self-ID`` …) and
    their close codes, and hands every JSON frame to :meth:`on_frame`. ``socket`` is the
    newest connection, for a test that sends actions on it."""

    def __init__(self) -> None:
        self.connections = 0
        self.socket: web.WebSocketResponse | None = None
        self.headers: list[dict[str, str]] = []
        self.close_codes: list[int | None] = []

    def on_frame(self, frame: dict[str, Any]) -> None:
        """One frame the daemon sent (override)."""

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.connections += 1
        self.socket = ws
        self.headers.append(dict(request.headers))
        async for message in ws:
            if message.type == WSMsgType.TEXT:
                self.on_frame(json.loads(message.data))
        self.close_codes.append(ws.close_code)
        return ws


class StableVuinFramework(RecordingFramework):
    """A framework that fails the test if a user (by the extension field ``real_user_id``)
    ever arrives with another ``user_id``."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, int] = {}  # real_user_id → the vUIN it came with

    def on_frame(self, frame: dict[str, Any]) -> None:
        if frame.get("post_type") == "message":
            openid = frame["real_user_id"]
            assert self.seen.setdefault(openid, frame["user_id"]) == frame["user_id"]
