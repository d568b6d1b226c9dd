"""The OneBot HTTP API transport on a real socket: paths, params, auth, status codes."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import ClientSession, FormData
from aiohttp.test_utils import TestServer
from aiohttp.web import Application

from gensokyo_idmap.admission import Admission
from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.onebot.actions import failed_from, ok, parse_action, unknown_action
from gensokyo_idmap.onebot.http_api import HttpApiServer

from gensokyo_idmap.testing.loopback import raw_request

TOKEN = "api-token-5Rw"


async def echo_params(frame: dict[str, Any]) -> dict[str, Any]:
    """A stand-in action table: ``echo_params`` answers its params, anything else is unknown."""
    try:
        request = parse_action(frame)
    except BadInputError as err:
        return failed_from(err, frame.get("echo"))
    if request.action != "echo_params":
        return unknown_action(request.action, request.echo)
    return ok(dict(request.params), request.echo)


def with_server(scenario: Any, token: str | None = TOKEN,
                allowed_hosts: tuple[str, ...] = ()) -> None:
    async def main() -> None:
        app = Application()
        app.add_routes(HttpApiServer(echo_params, access_token=token,
                                     admission=Admission(allowed_hosts)).routes())
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        try:
            async with ClientSession(str(server.make_url("/"))) as http:
                await asyncio.wait_for(scenario(http), 10)
        finally:
            await server.close()

    asyncio.run(main())


AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_params_from_query_form_and_json() -> None:
    async def scenario(http: ClientSession) -> None:
        async with http.get("/echo_params?user_id=12&message=hi", headers=AUTH) as resp:
            assert resp.status == 200
            assert (await resp.json())["data"] == {"user_id": "12", "message": "hi"}
        async with http.post("/echo_params/", data=FormData({"group_id": "7"}),
                             headers=AUTH) as resp:
            assert (await resp.json())["data"] == {"group_id": "7"}
        async with http.post("/echo_params", json={"group_id": 7, "message": [1]},
                             headers=AUTH) as resp:
            body = await resp.json()
            assert body["status"] == "ok" and body["data"] == {"group_id": 7, "message": [1]}
        async with http.post("/", json={"action": "echo_params", "params": {"a": 1},
                                        "echo": "z"}, headers=AUTH) as resp:
            body = await resp.json()
            assert (body["data"], body["echo"]) == ({"a": 1}, "z")

    with_server(scenario)


def test_token_missing_401_wrong_403_query_token_accepted() -> None:
    async def scenario(http: ClientSession) -> None:
        async with http.get("/echo_params") as resp:
            assert resp.status == 401
        async with http.get("/echo_params", headers={"Authorization": "Bearer nope"}) as resp:
            assert resp.status == 403
            assert TOKEN not in await resp.text()
        async with http.get(f"/echo_params?access_token={TOKEN}&x=1") as resp:
            assert resp.status == 200
            assert (await resp.json())["data"] == {"x": "1"}  # the token is not a param
        async with http.get("/echo_params", headers={"Authorization": f"Token {TOKEN}"}) as resp:
            assert resp.status == 200

    with_server(scenario)


def test_a_token_that_is_not_utf8_is_a_wrong_token_not_a_500() -> None:
    async def scenario(http: ClientSession) -> None:
        async with http.get("/echo_params", headers=AUTH) as resp:
            assert resp.url.port is not None
            port = resp.url.port
        for head in (b"GET /echo_params HTTP/1.1\r\nAuthorization: Bearer " + TOKEN.encode()
                     + b"\xff\r\n",
                     b"GET /echo_params?access_token=%ff%fe HTTP/1.1\r\n"):
            status, body = await raw_request(port, head)
            assert status == 403
            assert json.loads(body)["retcode"] == 1403

    with_server(scenario)


def test_unknown_action_404_bad_body_400_bad_type_406_without_a_token() -> None:
    async def scenario(http: ClientSession) -> None:
        async with http.post("/nope", json={}) as resp:
            assert resp.status == 404
            body = await resp.json()
            assert (body["status"], body["retcode"]) == ("failed", 1404)
        async with http.post("/echo_params", data=b"{not json",
                             headers={"Content-Type": "application/json"}) as resp:
            assert resp.status == 400
        async with http.post("/echo_params", data=b"[1]",
                             headers={"Content-Type": "application/json"}) as resp:
            assert resp.status == 400
        async with http.post("/echo_params", data=b"x",
                             headers={"Content-Type": "text/plain"}) as resp:
            assert resp.status == 406
        async with http.delete("/echo_params") as resp:
            assert resp.status == 405
        async with http.post("/", json={"params": {}}) as resp:
            body = await resp.json()
            assert body["retcode"] == 100 and "action" in body["message"]

    with_server(scenario, token=None)


def test_absurdly_nested_json_body_is_400() -> None:
    async def scenario(http: ClientSession) -> None:
        async with http.post("/echo_params", data=b"[" * 100_000,
                             headers={"Content-Type": "application/json"}) as resp:
            assert resp.status == 400

    with_server(scenario, token=None)


def test_a_browser_pages_request_is_refused_before_its_token_or_action() -> None:
    """Every OneBot action may write (send_msg), also by GET: a foreign Origin, a
    cross-site fetch and a rebound Host are refused with the failed body, token or not."""
    async def scenario(http: ClientSession) -> None:
        for headers, status in [
            ({"Origin": "http://evil.example"}, 403), ({"Origin": "null"}, 403),
            ({"Sec-Fetch-Site": "cross-site"}, 403), ({"Host": "evil.example"}, 421),
            ({"Host": "evil.example:5700", "Origin": "http://evil.example:5700"}, 421)]:
            for request in (http.get("/echo_params?user_id=1", headers={**AUTH, **headers}),
                            http.post("/echo_params", data=FormData({"user_id": "1"}),
                                      headers={**AUTH, **headers}),
                            http.post("/", json={"action": "echo_params"},
                                      headers={**AUTH, **headers})):
                async with request as resp:
                    body = await resp.json()
                    assert (resp.status, body["retcode"]) == (status, 1000 + status), headers
                    assert body["status"] == "failed" and TOKEN not in str(body)

    with_server(scenario)


def test_clients_by_address_name_or_own_origin_keep_every_content_type() -> None:
    """Frameworks send no Origin and may POST a form or GET a query (OneBot v11 §1.1):
    those stay; so do a listed name and the listener's own origin."""
    async def scenario(http: ClientSession) -> None:
        async with http.get("/echo_params", headers=AUTH) as first:
            own = f"http://{first.url.host}:{first.url.port}"  # the server's own origin
        for headers in ({}, {"Host": "gensokyo:5700"}, {"Host": "LocalHost."},
                        {"Origin": own, "Sec-Fetch-Site": "same-origin"}):
            async with http.get("/echo_params?user_id=1", headers={**AUTH, **headers}) as r:
                assert (await r.json())["data"] == {"user_id": "1"}, headers
            async with http.post("/echo_params", data=FormData({"user_id": "2"}),
                                 headers={**AUTH, **headers}) as r:
                assert (await r.json())["data"] == {"user_id": "2"}, headers

    with_server(scenario, allowed_hosts=("gensokyo",))
