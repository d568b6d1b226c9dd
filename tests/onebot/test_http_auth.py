"""One token rule on every OneBot server: the HTTP API and the forward WS's three paths
answer the same credentials with the same status and body (missing 401, wrong 403), and
limit a client's wrong ones with one count (429)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiohttp import ClientSession, TCPConnector, web
from aiohttp.test_utils import TestServer

from gensokyo_idmap.api.failure_limit import FailureLimit
from gensokyo_idmap.logging import configure_logging
from gensokyo_idmap.onebot.actions import ok
from gensokyo_idmap.onebot.forward_ws import ForwardWsServer
from gensokyo_idmap.onebot.http_api import HttpApiServer

from ..conftest import FakeClock

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


def test_wrong_tokens_are_limited_per_client_on_every_server_with_one_count(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The HTTP API and the forward WS share one count: five wrong tokens on each and the
    client (127.0.0.1) is refused 429 with ``Retry-After`` on both, the right token too and
    no socket opened, until the window passes (a fake clock); another address (127.0.0.2)
    is untouched; a missing token is no guess. One lockout line, no token in the log."""
    configure_logging("info")
    clock = FakeClock(1000.0)
    failures = FailureLimit(clock=clock)

    async def main() -> None:
        app = web.Application()
        app.add_routes(HttpApiServer(action, access_token=TOKEN,
                                     token_failures=failures).routes())
        forward_ws = ForwardWsServer(1, access_token=TOKEN, on_action=action,
                                     token_failures=failures)
        forward = web.Application()
        forward.add_routes(forward_ws.routes())
        api_server, ws_server = (TestServer(app, host="127.0.0.1"),
                                 TestServer(forward, host="127.0.0.1"))
        for server in (api_server, ws_server):
            await server.start_server()
        api_url, ws_url = str(api_server.make_url("/get_status")), str(ws_server.make_url("/"))

        async def answer(http: ClientSession, token: str | None, ws: bool = False
                         ) -> tuple[int, int, str | None]:
            headers = {**(UPGRADE if ws else {}),
                       **({} if token is None else {"Authorization": f"Bearer {token}"})}
            async with http.get(ws_url if ws else api_url, headers=headers) as resp:
                retcode = json.loads(await resp.read())["retcode"] if resp.status != 101 \
                    else 0
                return resp.status, retcode, resp.headers.get("Retry-After")

        try:
            async with ClientSession() as http, ClientSession(
                    connector=TCPConnector(local_addr=("127.0.0.2", 0))) as neighbour:
                for _ in range(30):
                    assert (await answer(http, None))[:2] == (401, 1401)
                for n in range(5):
                    assert (await answer(http, f"guess-{n}"))[:2] == (403, 1403)
                    assert (await answer(http, f"guess-ws-{n}", ws=True))[:2] == (403, 1403)
                    clock.advance(1)
                for token, ws in (("guess-x", False), (TOKEN, False), (TOKEN, True)):
                    assert await answer(http, token, ws) == (429, 1429, "55"), (token, ws)
                assert forward_ws.connections == 0
                assert (await answer(neighbour, "guess-n"))[:2] == (403, 1403)
                assert (await answer(neighbour, TOKEN))[0] == 200
                clock.advance(55)
                assert (await answer(http, TOKEN))[0] == 200
        finally:
            for server in (api_server, ws_server):
                await server.close()

    asyncio.run(asyncio.wait_for(main(), 10))
    captured = capsys.readouterr()
    logged = captured.out + captured.err
    lockouts = [line for line in logged.splitlines() if "refused for a while" in line]
    assert len(lockouts) == 1 and "127.0.0.1" in lockouts[0], logged
    assert TOKEN not in logged and "guess-" not in logged
