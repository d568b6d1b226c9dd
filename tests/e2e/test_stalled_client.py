"""End to end inside one process: a forward-WS client that stops reading costs the others
nothing (issue 29 item 4). Signed webhook callbacks from the emulated platform, a healthy
forward-WS framework, and a raw socket that completes the handshake and never reads again."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
from pathlib import Path
from typing import Any

from aiohttp import ClientSession, WSMsgType
from structlog.testing import capture_logs

from gensokyo_idmap.app import run_daemon
from gensokyo_idmap.config import Config

from gensokyo_idmap.testing import SECRET as EMU_SECRET
from gensokyo_idmap.testing import WebhookSender, daemon_config, free_port, until
from gensokyo_idmap.testing import group_message as gw_message

APP = "102000001"
PING_TIMEOUT = 2.0
CALLBACKS = 200
#: a line of text per event, so that the stalled client's kernel buffers fill
PADDING = "x" * 1500
NO_PONG = "[onebot] no pong in time: connection dropped"


async def stalled_client(port: int) -> socket.socket:
    """Handshake on the forward WS, then never read: a small receive buffer, so the daemon's
    writes soon find the kernel's buffers full."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, ("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    await loop.sock_sendall(sock, (
        f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        "\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:  # a byte at a time: nothing after the head is read
        byte = await loop.sock_recv(sock, 1)
        assert byte, f"the handshake was cut: {head!r}"
        head += byte
    assert head.startswith(b"HTTP/1.1 101 "), head
    return sock


async def read_to_the_end(sock: socket.socket) -> bytes:
    """Everything the daemon sends from now on, until it ends the connection."""
    loop = asyncio.get_running_loop()
    data = bytearray()
    while True:
        try:
            chunk = await loop.sock_recv(sock, 1 << 16)
        except ConnectionResetError:
            return bytes(data)
        if not chunk:
            return bytes(data)
        data += chunk


def frames(data: bytes) -> list[tuple[int, bytes]]:
    """(opcode, payload) of each whole server frame (unmasked) in ``data``; the stream read
    after the handshake may start mid-frame only if something read it before, which
    nothing did."""
    out = []
    at = 0
    while at + 2 <= len(data):
        opcode, length = data[at] & 0x0F, data[at + 1] & 0x7F
        at += 2
        if length == 126:
            length, at = int.from_bytes(data[at:at + 2], "big"), at + 2
        elif length == 127:
            length, at = int.from_bytes(data[at:at + 8], "big"), at + 8
        if at + length > len(data):
            break
        out.append((opcode, data[at:at + length]))
        at += length
    return out


def test_a_client_that_stops_reading_is_closed_with_1013_and_holds_up_nobody(
        tmp_path: Path) -> None:
    """The stalled client is there from before the first callback. Every callback is
    acknowledged (200), the first ones while the stalled client is still connected (before,
    each waited for its confirmation until it was dropped); the healthy framework gets every
    event, in order; the stalled client is closed ``ping_timeout`` after its handshake, and
    once it reads again it finds every frame it was sent, then a close frame with 1013
    (before, it was dropped 0.2 s after the decision: its close frame never left)."""
    hook_port, forward_port = free_port(), free_port()
    config = Config.model_validate(daemon_config(
        tmp_path / "data", app_id=APP, secret=EMU_SECRET, webhook=f"127.0.0.1:{hook_port}",
        onebot={"forward_ws": f"127.0.0.1:{forward_port}",
                "ping_timeout_seconds": PING_TIMEOUT}))
    acked_before_close: list[bool] = []

    async def main(logs: list[dict[str, Any]]) -> tuple[list[str], bytes, str]:
        stop = asyncio.Event()
        daemon = asyncio.create_task(run_daemon(config, stop))
        got: list[str] = []
        stalled: socket.socket | None = None
        try:
            async with ClientSession() as session:
                for _ in range(500):  # the listener may still be starting
                    try:
                        healthy = await session.ws_connect(f"ws://127.0.0.1:{forward_port}/")
                        break
                    except OSError:
                        await asyncio.sleep(0.01)

                async def read() -> None:
                    async for message in healthy:
                        if message.type == WSMsgType.TEXT:
                            frame = json.loads(message.data)
                            if frame.get("post_type") == "message":
                                got.append(frame["message"][-1]["data"]["text"])

                reading = asyncio.create_task(read())
                stalled = await stalled_client(forward_port)
                peer = "%s:%d" % stalled.getsockname()[:2]

                def closed() -> bool:
                    return any(e["event"] == NO_PONG and peer in e["connection"] for e in logs)

                async with WebhookSender(f"http://127.0.0.1:{hook_port}/qqbot", APP,
                                         EMU_SECRET, session=session) as sender:
                    for n in range(CALLBACKS):
                        d = {**gw_message(n), "content": f"m{n} {PADDING}"}
                        delivery = await sender.post(sender.build("GROUP_AT_MESSAGE_CREATE", d))
                        assert (delivery.status, delivery.json()) == (200, {"op": 12}), n
                        acked_before_close.append(not closed())
                await until(lambda: len(got) == CALLBACKS, 20,
                            lambda: f"{len(got)} of {CALLBACKS} events at the healthy client")
                await until(closed, PING_TIMEOUT + 10, "the stalled client closed")
                # it reads again, well within the ping_timeout it was given to take the
                # close frame (and after the 0.2 s the code before gave it)
                await asyncio.sleep(0.5)
                sent = await asyncio.wait_for(read_to_the_end(stalled), 20)
                reading.cancel()
                await asyncio.gather(reading, return_exceptions=True)
                await healthy.close()
                return got, sent, peer
        finally:
            if stalled is not None:
                stalled.close()
            stop.set()
            await asyncio.wait_for(daemon, 20)

    with capture_logs() as logs:
        got, sent, peer = asyncio.run(asyncio.wait_for(main(logs), 120))
    assert got == [f"m{n} {PADDING}" for n in range(CALLBACKS)]
    assert all(acked_before_close[:10]), acked_before_close[:10]
    received = frames(sent)
    assert received, "the stalled client was sent nothing"
    opcode, payload = received[-1]
    assert (opcode, int.from_bytes(payload[:2], "big")) == (0x8, 1013), received[-3:]
    # what it was sent before the close frame is whole: the lifecycle event, the pings,
    # events in order
    texts = [json.loads(p) for op, p in received if op == 0x1]
    assert texts[0]["sub_type"] == "connect"
    numbers = [t["message"][-1]["data"]["text"].split()[0] for t in texts[1:]]
    assert numbers == [f"m{n}" for n in range(len(numbers))]
    [line] = [e for e in logs if e["event"] == NO_PONG and peer in e["connection"]]
    assert line["code"] == 1013
