"""Forward WebSocket server: token on upgrade, per-connection queues, actions, close."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import ClientSession, WSServerHandshakeError, web
from aiohttp.test_utils import TestServer
from yarl import URL

from gensokyo_idmap.onebot.forward_ws import ForwardWsServer

from ..loopback import raw_request

TIMEOUT = 10


def serve(server: ForwardWsServer,
          scenario: Callable[[ClientSession, str], Awaitable[None]]) -> None:
    async def main() -> None:
        app = web.Application()
        app.add_routes(server.routes())
        http = TestServer(app, host="127.0.0.1")
        await http.start_server()
        try:
            async with ClientSession() as session:
                await asyncio.wait_for(scenario(session, str(http.make_url("/"))), TIMEOUT)
        finally:
            await server.close()
            await http.close()

    asyncio.run(main())


async def next_json(ws: Any) -> dict[str, Any]:
    while True:
        message = await asyncio.wait_for(ws.receive(), TIMEOUT)
        frame: dict[str, Any] = json.loads(message.data)
        if frame.get("meta_event_type") != "heartbeat":
            return frame


@pytest.mark.parametrize("how", ["bearer", "token", "query"])
def test_right_token_connects_and_every_connection_gets_the_events(how: str) -> None:
    server = ForwardWsServer(10001, access_token="s3cret", heartbeat_interval=60,
                             clock=lambda: 1700000000)

    async def scenario(session: ClientSession, url: str) -> None:
        headers = {"bearer": {"Authorization": "Bearer s3cret"},
                   "token": {"Authorization": "Token s3cret"}, "query": {}}[how]
        target = url + ("?access_token=s3cret" if how == "query" else "")
        async with session.ws_connect(target, headers=headers) as a, \
                session.ws_connect(url, headers={"Authorization": "Bearer s3cret"}) as b:
            for ws in (a, b):
                assert (await next_json(ws))["sub_type"] == "connect"
            while server.connections < 2:
                await asyncio.sleep(0.01)
            server.publish({"post_type": "message", "n": 1})
            for ws in (a, b):
                assert await next_json(ws) == {"post_type": "message", "n": 1}

    serve(server, scenario)


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"},
                                     {"Authorization": "Basic s3cret"}])
def test_wrong_or_missing_token_is_refused(headers: dict[str, str]) -> None:
    server = ForwardWsServer(1, access_token="s3cret")

    async def scenario(session: ClientSession, url: str) -> None:
        with pytest.raises(WSServerHandshakeError) as err:
            async with session.ws_connect(url, headers=headers):
                pass
        assert err.value.status == 401
        assert server.refused == 1 and server.connections == 0

    serve(server, scenario)


def test_actions_answered_and_close_sends_a_close_frame() -> None:
    async def on_action(frame: dict[str, Any]) -> dict[str, Any]:
        return {"status": "ok", "retcode": 0, "data": frame["action"], "echo": frame["echo"]}

    server = ForwardWsServer(1, heartbeat_interval=60, on_action=on_action)

    async def scenario(session: ClientSession, url: str) -> None:
        async with session.ws_connect(url) as ws:
            await next_json(ws)
            await ws.send_json({"action": "get_status", "params": {}, "echo": 5})
            assert await next_json(ws) == {"status": "ok", "retcode": 0, "data": "get_status",
                                           "echo": 5}
            closing = asyncio.create_task(server.close())
            message = await asyncio.wait_for(ws.receive(), TIMEOUT)
            assert message.type.name in ("CLOSE", "CLOSED")
            await asyncio.wait_for(closing, TIMEOUT)
        for _ in range(100):
            if server.connections == 0:
                break
            await asyncio.sleep(0.01)
        assert server.connections == 0

    serve(server, scenario)


@pytest.mark.parametrize("token", [b"Authorization: Bearer s3cret\xff\r\n",
                                   b"Authorization: Token \xc3\x28\r\n"])
def test_a_token_that_is_not_utf8_is_refused_401_not_a_500(token: bytes) -> None:
    server = ForwardWsServer(10001, access_token="s3cret", heartbeat_interval=60)

    async def scenario(session: ClientSession, url: str) -> None:
        port = URL(url).port
        assert port is not None
        status, body = await raw_request(port, (
            b"GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            + token))
        assert status == 401
        assert json.loads(body) == {"status": "failed", "retcode": 1401,
                                    "message": "wrong or missing access token"}
        assert server.connections == 0 and server.refused == 1

    serve(server, scenario)
