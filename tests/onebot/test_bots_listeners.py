"""The forward WebSocket and the OneBot HTTP API shared by two bots (issue 34.3), over real
sockets: a client picks its bot with the path prefix /<self_id>/ or X-Self-ID, and gets that
bot's events and actions (each connection's lifecycle event names it); several bots and no
choice is a 400 naming the self_ids, after the token is checked; one bot: nothing changes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import ClientSession, WSServerHandshakeError, web
from aiohttp.test_utils import TestServer

from gensokyo_idmap.onebot.forward_ws import ForwardWsRouter, ForwardWsServer
from gensokyo_idmap.onebot.http_api import HttpApiServer
from gensokyo_idmap.testing.wait import until

TIMEOUT = 10
TOKEN = "s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def acting_as(self_id: int) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
    """An action handler answering which bot took the action."""
    async def on_action(frame: dict[str, Any]) -> dict[str, Any]:
        return {"status": "ok", "retcode": 0, "data": {"bot": self_id,
                                                       "action": frame["action"]},
                "echo": frame.get("echo")}
    return on_action


def servers(*self_ids: int) -> list[ForwardWsServer]:
    return [ForwardWsServer(self_id, access_token=TOKEN, heartbeat_interval=60,
                            on_action=acting_as(self_id)) for self_id in self_ids]


def serve(routes: list[web.RouteDef], scenario: Callable[[ClientSession, str], Awaitable[None]],
          close: Callable[[], Awaitable[None]] | None = None) -> None:
    async def main() -> None:
        app = web.Application()
        app.add_routes(routes)
        http = TestServer(app, host="127.0.0.1")
        await http.start_server()
        try:
            async with ClientSession() as session:
                await asyncio.wait_for(scenario(session, str(http.make_url("")).rstrip("/")),
                                       TIMEOUT)
        finally:
            if close is not None:
                await close()
            await http.close()

    asyncio.run(main())


async def next_json(ws: Any) -> dict[str, Any]:
    frame: dict[str, Any] = json.loads((await asyncio.wait_for(ws.receive(), TIMEOUT)).data)
    return frame


def test_forward_ws_connections_pick_their_bot_by_prefix_or_header() -> None:
    first, second = servers(10001, 20002)
    router = ForwardWsRouter([first, second])

    async def scenario(session: ClientSession, base: str) -> None:
        async with session.ws_connect(f"{base}/20002/", headers=AUTH) as by_prefix, \
                session.ws_connect(f"{base}/", headers={**AUTH, "X-Self-ID": "10001"}) \
                as by_header, \
                session.ws_connect(f"{base}/20002/api", headers=AUTH) as api:
            assert (await next_json(by_prefix))["self_id"] == 20002
            assert (await next_json(by_header))["self_id"] == 10001
            await until(lambda: first.connections == second.connections == 1,
                        what="a connection to each bot")
            assert router.connections == 2 and len(router.owed()) == 2
            first.publish({"post_type": "message", "self_id": 10001})
            second.publish({"post_type": "message", "self_id": 20002})
            assert (await next_json(by_header))["self_id"] == 10001
            assert (await next_json(by_prefix))["self_id"] == 20002
            # each connection's actions are its bot's
            for ws, bot in ((by_prefix, 20002), (by_header, 10001), (api, 20002)):
                await ws.send_json({"action": "get_login_info", "echo": "e"})
                answer = await next_json(ws)
                assert answer["data"] == {"bot": bot, "action": "get_login_info"}, answer

    serve(router.routes(), scenario, router.close)


@pytest.mark.parametrize(("path", "headers", "status", "says"), [
    ("/", AUTH, 400, "several bots (self_ids: 10001, 20002)"),
    ("/api", AUTH, 400, "choose one with the X-Self-ID header or the path prefix"),
    ("/30003/", AUTH, 404, "no bot with self_id 30003 here (self_ids: 10001, 20002)"),
    ("/", {**AUTH, "X-Self-ID": "30003"}, 400, "X-Self-ID '30003' is no bot"),
    ("/10001/", {**AUTH, "X-Self-ID": "20002"}, 400, "name different bots"),
    # the token first: a client without it learns nothing of the bots
    ("/", {}, 401, ""), ("/30003/", {"Authorization": "Bearer wrong"}, 403, ""),
])
def test_forward_ws_refusals_name_the_self_ids(path: str, headers: dict[str, str],
                                               status: int, says: str) -> None:
    router = ForwardWsRouter(servers(10001, 20002))

    async def scenario(session: ClientSession, base: str) -> None:
        async with session.get(f"{base}{path}", headers={
                **headers, "Connection": "Upgrade", "Upgrade": "websocket",
                "Sec-WebSocket-Version": "13",
                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}) as resp:
            assert resp.status == status
            text = await resp.text()
            assert says in text
            if not says:
                assert "10001" not in text and "20002" not in text
        assert router.connections == 0

    serve(router.routes(), scenario, router.close)


def test_forward_ws_of_one_bot_is_as_it_was_and_unknown_paths_are_404() -> None:
    [server] = servers(10001)
    router = ForwardWsRouter([server])

    async def scenario(session: ClientSession, base: str) -> None:
        for path, headers in (("/", AUTH), ("/event", {**AUTH, "X-Self-ID": "999"}),
                              ("/10001/", AUTH)):
            async with session.ws_connect(f"{base}{path}", headers=headers) as ws:
                assert (await next_json(ws))["self_id"] == 10001
        with pytest.raises(WSServerHandshakeError) as err:
            async with session.ws_connect(f"{base}/nowhere", headers=AUTH):
                pass
        assert err.value.status == 404

    serve(router.routes(), scenario, router.close)


def test_http_api_requests_pick_their_bot() -> None:
    api = HttpApiServer({10001: acting_as(10001), 20002: acting_as(20002)},
                        access_token=TOKEN)

    async def scenario(session: ClientSession, base: str) -> None:
        async def bot_of(method: str, path: str, headers: dict[str, str] | None = None,
                         body: Any = None) -> tuple[int, Any]:
            async with session.request(method, f"{base}{path}", json=body,
                                       headers={**AUTH, **(headers or {})}) as resp:
                return resp.status, await resp.json()

        status, answer = await bot_of("POST", "/20002/send_msg", body={"message": "x"})
        assert status == 200 and answer["data"] == {"bot": 20002, "action": "send_msg"}
        status, answer = await bot_of("GET", "/10001/get_login_info/")
        assert answer["data"] == {"bot": 10001, "action": "get_login_info"}
        status, answer = await bot_of("POST", "/20002", body={"action": "get_status"})
        assert answer["data"] == {"bot": 20002, "action": "get_status"}
        status, answer = await bot_of("POST", "/get_status", {"X-Self-ID": "10001"})
        assert answer["data"] == {"bot": 10001, "action": "get_status"}
        status, answer = await bot_of("POST", "/send_msg")
        assert status == 400 and answer["retcode"] == 1400
        assert "several bots (self_ids: 10001, 20002)" in answer["message"]
        status, answer = await bot_of("POST", "/30003/send_msg")
        assert status == 404 and "no bot with self_id 30003" in answer["message"]
        async with session.post(f"{base}/send_msg") as resp:  # no token: that first
            assert resp.status == 401 and "10001" not in await resp.text()

    serve(api.routes(), scenario)


def test_http_api_of_one_bot_is_as_it_was() -> None:
    api = HttpApiServer({10001: acting_as(10001)}, access_token=TOKEN)

    async def scenario(session: ClientSession, base: str) -> None:
        for path, headers in (("/get_status", {}), ("/get_status", {"X-Self-ID": "999"}),
                              ("/10001/get_status", {})):
            async with session.post(f"{base}{path}", headers={**AUTH, **headers}) as resp:
                answer = await resp.json()
                assert answer["data"] == {"bot": 10001, "action": "get_status"}, path

    serve(api.routes(), scenario)
