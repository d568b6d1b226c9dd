"""One token rule on every OneBot server: the HTTP API and the forward WS's three paths
answer the same credentials with the same status and body (missing 401, wrong 403)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer

from gensokyo_idmap.onebot.actions import ok
from gensokyo_idmap.onebot.forward_ws import ForwardWsServer
from gensokyo_idmap.onebot.http_api import HttpApiServer

TOKEN = "one-rule-T8"
#: A WebSocket upgrade's headers, so the forward WS gets as far as its token check.
UPGRADE = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
           "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}


async def action(frame: dict[str, Any]) -> dict[str, Any]:
    return ok(None, frame.get("echo"))


@pytest.mark.parametrize(("headers", "query", "status", "retcode"), [
    ({}, "", 401, 1401),
    ({"Authorization": "Bearer"}, "", 401, 1401),
    ({"Authorization": "Basic " + TOKEN}, "", 401, 1401),
    ({"Authorization": "Bearer nope"}, "", 403, 1403),
    ({"Authorization": "token nope"}, "", 403, 1403),
    ({}, "?access_token=nope", 403, 1403),
    ({"Authorization": "Bearer nope"}, f"?access_token={TOKEN}", 403, 1403),  # header first
])
def test_every_server_answers_a_bad_token_alike(headers: dict[str, str], query: str,
                                                 status: int, retcode: int) -> None:
    async def main() -> None:
        app = web.Application()
        app.add_routes(HttpApiServer(action, access_token=TOKEN).routes())
        forward = web.Application()
        forward.add_routes(ForwardWsServer(1, access_token=TOKEN, on_action=action).routes())
        servers = [TestServer(app, host="127.0.0.1"), TestServer(forward, host="127.0.0.1")]
        for server in servers:
            await server.start_server()
        try:
            answers = []
            async with ClientSession() as http:
                targets = [(servers[0], "/get_status", {}), (servers[1], "/", UPGRADE),
                           (servers[1], "/api", UPGRADE), (servers[1], "/event", UPGRADE)]
                for server, path, upgrade in targets:
                    async with http.get(str(server.make_url(path)) + query,
                                        headers={**upgrade, **headers}) as resp:
                        answers.append((resp.status, json.loads(await resp.read())))
            assert answers[0][0] == status and answers[0][1]["retcode"] == retcode
            assert all(answer == answers[0] for answer in answers), answers
            assert TOKEN not in json.dumps(answers)
        finally:
            for server in servers:
                await server.close()

    asyncio.run(asyncio.wait_for(main(), 10))
