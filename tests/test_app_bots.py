"""The daemon with two bots (issue 34.2, 34.3), in process over real sockets: one webhook URL
for both (each callback verified with its bot's key), a reverse-WS connection per bot to the
one shared framework URL (each with its X-Self-ID, carrying that bot's events), HTTP POST of
each event with its bot's X-Self-ID (the second bot to its own URL), and the ready line
naming each bot's connections."""

from __future__ import annotations

import asyncio
import json
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from aiohttp import ClientSession, web

from gensokyo_idmap.app import build_daemon
from gensokyo_idmap.config import Config
from gensokyo_idmap.testing import (
    EmulatedPlatform,
    WebhookSender,
    c2c_message,
    free_port,
    group_message,
    until,
)
from gensokyo_idmap.testing.daemon import NO_PLATFORM_TOKEN_URL

TIMEOUT = 10
BOTS = {"102000001": ("first-secret-Hk2", None), "102000002": ("second-secret-Q7x", 20002)}
GROUP = "A1B2C3D4E5F60718293A4B5C6D7E8F90"
USER = "0F1E2D3C4B5A69788796A5B4C3D2E1F0"


def test_two_bots_each_with_its_self_id_on_every_connection(tmp_path: Path) -> None:
    async def scenario() -> None:
        sockets: dict[str, list[dict[str, Any]]] = {}  # X-Self-ID → the frames it carried
        posts: list[tuple[str, str | None, dict[str, Any]]] = []

        async def framework(request: web.Request) -> web.StreamResponse:
            if request.method == "POST":
                posts.append((request.path, request.headers.get("X-Self-ID"),
                              await request.json()))
                return web.Response(status=204)
            frames = sockets.setdefault(request.headers["X-Self-ID"], [])
            ws = web.WebSocketResponse()
            await ws.prepare(request)
            async for message in ws:
                frames.append(json.loads(message.data))
            return ws

        app = web.Application()
        app.add_routes([web.get("/{name}", framework), web.post("/{name}", framework)])
        runner = web.AppRunner(app)
        await runner.setup()
        port, webhook = free_port(), free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        (first, (secret_a, _)), (second, (secret_b, self_id_b)) = BOTS.items()
        config = Config.model_validate({
            "bots": [{"app_id": first, "secret": secret_a},
                     {"app_id": second, "secret": secret_b, "self_id": self_id_b,
                      "onebot": {"http_post": [{"url": f"http://127.0.0.1:{port}/own"}]}}],
            "qq": {"token_url": NO_PLATFORM_TOKEN_URL},
            "webhook": {"listen": f"127.0.0.1:{webhook}"},
            "idmap": {"data_dir": str(tmp_path / "data"), "map_size_mb": 1},
            "api": {"listen": ""},
            "onebot": {"heartbeat_interval_seconds": 60,
                       "reverse_ws": [f"ws://127.0.0.1:{port}/rws"],
                       "http_post": [{"url": f"http://127.0.0.1:{port}/shared"}]}})
        url = f"http://127.0.0.1:{webhook}/qqbot"
        try:
            async with AsyncExitStack() as stack:
                daemon = await build_daemon(config, asyncio.Event(), stack)
                assert daemon.listeners() == [
                    f"webhook {url}",
                    f"reverse ws ws://127.0.0.1:{port}/rws (self_id {first})",
                    f"reverse ws ws://127.0.0.1:{port}/rws (self_id {self_id_b})",
                    f"http post http://127.0.0.1:{port}/shared (self_id {first})",
                    f"http post http://127.0.0.1:{port}/own (self_id {self_id_b})"]
                await until(lambda: len(sockets) == 2, TIMEOUT, "a connection per bot")
                async with WebhookSender(url, first, secret_a) as to_a, \
                        WebhookSender(url, second, secret_b) as to_b:
                    assert (await to_a.dispatch("GROUP_AT_MESSAGE_CREATE",
                                                group_message(1, GROUP, USER))).status == 200
                    assert (await to_b.dispatch("GROUP_AT_MESSAGE_CREATE",
                                                group_message(2, GROUP, USER))).status == 200
                    # signed with the other bot's key: refused
                    wrong = to_a.build("GROUP_AT_MESSAGE_CREATE", group_message(3, GROUP, USER))
                    wrong.headers["X-Bot-Appid"] = second
                    assert (await to_a.post(wrong)).status == 401
                await until(lambda: len(posts) == 2, TIMEOUT, "a POST of each bot's event")

                def messages_each() -> list[int]:
                    return [len([frame for frame in frames if frame.get("post_type") == "message"])
                            for frames in sockets.values()]

                await until(lambda: messages_each() == [1, 1], TIMEOUT,
                            "each bot's event on its own connection")
        finally:
            await runner.cleanup()
        # each connection carried its own bot's events only, lifecycle first
        for header, frames in sockets.items():
            assert frames[0]["meta_event_type"] == "lifecycle"
            assert {frame["self_id"] for frame in frames} == {int(header)}
            [message] = [frame for frame in frames if frame.get("post_type") == "message"]
            assert message["raw_message"].startswith(f"[CQ:at,qq={header}]")
        assert sorted(sockets) == sorted([first, str(self_id_b)])
        assert sorted((path, header, body["self_id"]) for path, header, body in posts) == [
            ("/own", str(self_id_b), self_id_b), ("/shared", first, int(first))]

    asyncio.run(scenario())


def test_an_action_goes_out_as_its_connections_bot(tmp_path: Path) -> None:
    """Issue 34.4: each bot's actions with its token, to its platform, as its AppID; a vUIN
    only the other bot has seen is retcode 100 naming both AppIDs, and nothing is sent."""
    async def scenario() -> None:
        platforms = [EmulatedPlatform(app_id=app_id, secret=secret, token_prefix=prefix)
                     for (app_id, (secret, _)), prefix in zip(BOTS.items(), "AB", strict=True)]
        for platform in platforms:
            await platform.start()
        first, second = platforms
        forward, api = free_port(), free_port()
        config = Config.model_validate({
            "bots": [first.bot_entry(), second.bot_entry(self_id=20002)],
            "idmap": {"data_dir": str(tmp_path / "data"), "map_size_mb": 1},
            "api": {"listen": ""},
            "onebot": {"heartbeat_interval_seconds": 60, "forward_ws": f"127.0.0.1:{forward}",
                       "http_api": f"127.0.0.1:{api}"}})
        try:
            async with AsyncExitStack() as stack, ClientSession() as http:
                await build_daemon(config, asyncio.Event(), stack)
                for platform in platforms:
                    await until(lambda p=platform: len(p.identifies) == 1,  # type: ignore[misc]
                                TIMEOUT, "a gateway session per bot")
                async with http.ws_connect(f"ws://127.0.0.1:{forward}/{first.app_id}/") as ws:
                    assert (await ws.receive_json(timeout=TIMEOUT))["self_id"] == int(
                        first.app_id)
                    await first.push("C2C_MESSAGE_CREATE", c2c_message(1, USER, "hi"))
                    event = await ws.receive_json(timeout=TIMEOUT)
                assert event["self_id"] == int(first.app_id)
                vuin = event["user_id"]

                async def send(self_id: object) -> dict[str, Any]:
                    async with http.post(f"http://127.0.0.1:{api}/{self_id}/send_private_msg",
                                         json={"user_id": vuin, "message": "hello"}) as resp:
                        answer: dict[str, Any] = await resp.json()
                        return answer

                refused = await send(20002)
                assert (refused["status"], refused["retcode"]) == ("failed", 100), refused
                assert (f"none is an OpenID of QQ AppID {second.app_id}; its OpenIDs are of "
                        f"AppID {first.app_id}") in refused["message"]
                assert second.api_requests("POST", "/messages") == []
                sent = await send(first.app_id)
                assert sent["status"] == "ok", sent
                [(path, body)] = first.api_requests("POST", "/messages")
                assert (path, body["content"]) == (f"/v2/users/{USER}/messages", "hello")
        finally:
            for platform in platforms:
                await platform.close()

    asyncio.run(scenario())
