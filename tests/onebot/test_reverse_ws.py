"""Reverse WebSocket client against a real framework-side WS server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import WSMsgType, web
from aiohttp.test_utils import TestServer
from structlog.testing import capture_logs

from gensokyo_idmap.onebot.reverse_ws import ReverseWsClient

from ..loopback import framework_server

TIMEOUT = 10


class Framework:
    """A minimal OneBot framework endpoint: records handshakes and frames, can drop peers."""

    def __init__(self) -> None:
        self.handshakes: list[dict[str, str]] = []
        self.frames: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.sockets: list[web.WebSocketResponse] = []

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.handshakes.append(dict(request.headers))
        self.sockets.append(ws)
        async for message in ws:
            if message.type == WSMsgType.TEXT:
                await self.frames.put(json.loads(message.data))
        return ws

    async def next_frame(self, skip_heartbeats: bool = True) -> dict[str, Any]:
        while True:
            frame = await asyncio.wait_for(self.frames.get(), TIMEOUT)
            if not (skip_heartbeats and frame.get("meta_event_type") == "heartbeat"):
                return frame


async def start(framework: Framework) -> TestServer:
    app = web.Application()
    app.router.add_get("/onebot/v11/ws", framework.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server


def test_handshake_lifecycle_events_and_heartbeats() -> None:
    async def main() -> None:
        framework = Framework()
        server = await start(framework)
        client = ReverseWsClient(str(server.make_url("/onebot/v11/ws")), 10001,
                                 access_token="tok-xyz", heartbeat_interval=0.05,
                                 clock=lambda: 1700000000)
        client.publish({"post_type": "message", "n": 1})  # before connecting: waits
        client.start()
        try:
            first = await framework.next_frame()
            assert first == {"time": 1700000000, "self_id": 10001, "post_type": "meta_event",
                             "meta_event_type": "lifecycle", "sub_type": "connect"}
            assert await framework.next_frame() == {"post_type": "message", "n": 1}
            client.publish({"post_type": "message", "n": 2})
            assert await framework.next_frame() == {"post_type": "message", "n": 2}
            beat = await framework.next_frame(skip_heartbeats=False)
            while beat.get("meta_event_type") != "heartbeat":
                beat = await framework.next_frame(skip_heartbeats=False)
            assert beat["status"] == {"online": True, "good": True} and beat["interval"] == 50
            headers = framework.handshakes[0]
            assert headers["X-Self-ID"] == "10001"
            assert headers["X-Client-Role"] == "Universal"
            assert headers["Authorization"] == "Bearer tok-xyz"
        finally:
            await client.close()
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_reconnects_and_delivers_what_was_queued_meanwhile() -> None:
    async def main() -> None:
        framework = Framework()
        server = await start(framework)
        client = ReverseWsClient(str(server.make_url("/onebot/v11/ws")), 10001,
                                 reconnect_interval=0.05, heartbeat_interval=60)
        client.start()
        try:
            assert (await framework.next_frame())["sub_type"] == "connect"
            await framework.sockets[0].close()  # the framework restarts
            for _ in range(200):
                if not client.connected.is_set():
                    break
                await asyncio.sleep(0.01)
            client.publish({"post_type": "message", "n": 3})
            assert (await framework.next_frame())["sub_type"] == "connect"
            assert await framework.next_frame() == {"post_type": "message", "n": 3}
            assert client.connects == 2 and len(framework.handshakes) == 2
        finally:
            await client.close()
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_full_queue_drops_the_oldest_and_counts() -> None:
    async def main() -> None:
        client = ReverseWsClient("ws://127.0.0.1:9/unused", 1, queue_size=2)
        for n in range(5):
            client.publish({"n": n})
        assert client.dropped == 3
        assert client.queue.pending() == [{"n": 3}, {"n": 4}]

    asyncio.run(main())


def test_actions_are_answered() -> None:
    async def main() -> None:
        framework = Framework()
        server = await start(framework)

        async def on_action(frame: dict[str, Any]) -> dict[str, Any]:
            return {"status": "ok", "retcode": 0, "data": {"echoed": frame["params"]},
                    "echo": frame.get("echo")}

        handled = ReverseWsClient(str(server.make_url("/onebot/v11/ws")), 1,
                                  heartbeat_interval=60, on_action=on_action)
        handled.start()
        try:
            await framework.next_frame()  # connect
            await framework.sockets[0].send_json({"action": "x", "params": {"a": 1}, "echo": "e1"})
            assert await framework.next_frame() == {"status": "ok", "retcode": 0,
                                                    "data": {"echoed": {"a": 1}}, "echo": "e1"}
            await framework.sockets[0].send_str("{bad")
            assert (await framework.next_frame())["retcode"] == 1400
        finally:
            await handled.close()
        plain = ReverseWsClient(str(server.make_url("/onebot/v11/ws")), 1, heartbeat_interval=60)
        plain.start()
        try:
            await framework.next_frame()  # connect
            await framework.sockets[1].send_json({"action": "get_status", "echo": 7})
            reply = await framework.next_frame()
            assert (reply["status"], reply["retcode"], reply["echo"]) == ("failed", 1404, 7)
        finally:
            await plain.close()
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_drain_sends_what_is_queued_before_close() -> None:
    async def main() -> None:
        framework = Framework()
        server = await start(framework)
        client = ReverseWsClient(str(server.make_url("/onebot/v11/ws")), 1, heartbeat_interval=60)
        client.start()
        try:
            await framework.next_frame()  # connect
            for n in range(3000):  # ~6 MB: more than the socket takes in one go
                client.publish({"n": n, "pad": "x" * 2000})
            await client.drain(timeout=10)
            assert len(client.queue) == 0
            await client.close()
            got = [await framework.next_frame() for _ in range(3000)]
            assert [frame["n"] for frame in got] == list(range(3000))
        finally:
            await client.close()
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_refused_handshake_logs_the_status_and_the_url_without_credentials() -> None:
    """A framework answering 403 (a wrong token) was logged only as WSServerHandshakeError,
    and the URL as written, password included."""
    refusals: list[str | None] = []

    async def refuse(request: web.Request) -> web.StreamResponse:
        refusals.append(request.headers.get("Authorization"))
        return web.json_response({"message": "bad token"}, status=403)

    async def main() -> list[dict[str, Any]]:
        server = await framework_server(refuse)
        port = server.port
        client = ReverseWsClient(f"ws://user:pw-Zq9x@127.0.0.1:{port}/ws", 10001,
                                 reconnect_interval=0.01)
        try:
            with capture_logs() as logs:
                client.start()
                for _ in range(int(TIMEOUT / 0.01)):
                    if any(line["event"] == "[onebot] reverse ws unavailable" for line in logs):
                        break
                    await asyncio.sleep(0.01)
                await client.close()
        finally:
            await server.close()
        return logs

    logs = asyncio.run(asyncio.wait_for(main(), TIMEOUT * 2))
    unavailable = [line for line in logs if line["event"] == "[onebot] reverse ws unavailable"]
    assert unavailable and refusals  # the framework was reached, and refused
    first = unavailable[0]
    assert (first["error"], first["status"]) == ("WSServerHandshakeError", 403)
    assert first["url"].startswith("ws://***@127.0.0.1:") and first["url"].endswith("/ws")
    assert "pw-Zq9x" not in repr(logs)
