"""End to end inside one process: signed webhook POST → daemon → reverse WS framework."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from aiohttp import ClientSession, web

from gensokyo_idmap.app import run_daemon
from gensokyo_idmap.config import Config
from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.onebot.http_post import sign_body
from gensokyo_idmap.qq.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, WebhookKey
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore

from gensokyo_idmap.testing import SECRET as EMU_SECRET
from gensokyo_idmap.testing import (
    EmulatedPlatform,
    WebhookSender,
    daemon_config,
    framework_server,
    free_port,
    until,
    ws_url,
)
from gensokyo_idmap.testing import group_message as gw_message
from gensokyo_idmap.testing import RecordingFramework

APP = "102000001"
SECRET = "e2e-secret-Zq9x"
GROUP = "A1B2C3D4E5F60718293A4B5C6D7E8F90"
USER = "0F1E2D3C4B5A69788796A5B4C3D2E1F0"


def group_message(n: int) -> bytes:
    return json.dumps({
        "op": 0, "s": n, "t": "GROUP_AT_MESSAGE_CREATE", "id": f"GROUP_AT_MESSAGE_CREATE:{n}",
        "d": {"id": f"ROBOT1.0_msg{n}", "content": f" hello {n}",
              "timestamp": "2025-01-01T12:00:00+08:00", "group_openid": GROUP,
              "author": {"id": USER, "member_openid": USER}},
    }).encode()


class QueueFramework(RecordingFramework):
    """A reverse-WS framework that puts the frames it gets in ``received``: every frame, or
    only the message events."""

    def __init__(self, *, only_messages: bool = True) -> None:
        super().__init__()
        self.only_messages = only_messages
        self.received: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    def on_frame(self, frame: dict[str, Any]) -> None:
        if not self.only_messages or frame.get("post_type") == "message":
            self.received.put_nowait(frame)


def test_webhook_event_reaches_the_framework_with_stored_vuins(tmp_path: Path) -> None:
    framework = QueueFramework(only_messages=False)
    received = framework.received
    posted: asyncio.Queue[tuple[dict[str, str], bytes]] = asyncio.Queue()

    async def post_receiver(request: web.Request) -> web.Response:
        await posted.put((dict(request.headers), await request.read()))
        return web.Response(status=204)

    async def next_message() -> dict[str, Any]:
        while True:
            frame = await asyncio.wait_for(received.get(), 10)
            if frame.get("post_type") == "message":
                return frame

    port = free_port()
    forward_port = free_port()

    async def main() -> list[dict[str, Any]]:
        server = await framework_server(framework.handle, post_receiver)
        config = Config.model_validate(daemon_config(
            tmp_path / "data", app_id=APP, secret=SECRET, webhook=f"127.0.0.1:{port}",
            onebot={"reverse_ws": [ws_url(server)], "forward_ws": f"127.0.0.1:{forward_port}",
                    "http_post": [{"url": str(server.make_url("/post")),
                                   "secret": "post-secret"}],
                    "access_token": "tok"}))
        stop = asyncio.Event()
        daemon = asyncio.create_task(run_daemon(config, stop))
        key = WebhookKey.from_secret(SECRET)
        try:
            first = await asyncio.wait_for(received.get(), 10)
            assert first["meta_event_type"] == "lifecycle"
            messages = []
            async with ClientSession() as session:
                forward = None
                for _ in range(500):  # the forward listener may still be starting
                    try:
                        forward = await session.ws_connect(
                            f"ws://127.0.0.1:{forward_port}/",
                            headers={"Authorization": "Bearer tok"})
                        break
                    except OSError:
                        await asyncio.sleep(0.01)
                assert forward is not None
                assert json.loads((await forward.receive()).data)["sub_type"] == "connect"
                for n in (1, 2):
                    body = group_message(n)
                    ts = str(int(time.time()))
                    async with session.post(
                        f"http://127.0.0.1:{port}/qqbot", data=body,
                        headers={TIMESTAMP_HEADER: ts, SIGNATURE_HEADER: key.sign_callback(ts, body)},
                    ) as resp:
                        assert resp.status == 200 and await resp.json() == {"op": 12}
                    messages.append(await next_message())
                    via_forward = json.loads((await asyncio.wait_for(forward.receive(), 10)).data)
                    assert via_forward == messages[-1]  # every transport gets the same event
                    headers, body = await asyncio.wait_for(posted.get(), 10)
                    assert json.loads(body) == messages[-1]
                    assert headers["X-Signature"] == sign_body("post-secret", body)
                async with session.post(f"http://127.0.0.1:{port}/qqbot", data=group_message(3),
                                        headers={TIMESTAMP_HEADER: "1"}) as resp:
                    assert resp.status == 401
                await forward.close()
            return messages
        finally:
            stop.set()
            await asyncio.wait_for(daemon, 10)
            await server.close()

    messages = asyncio.run(asyncio.wait_for(main(), 60))
    assert framework.headers[0]["Authorization"] == "Bearer tok"
    assert framework.headers[0]["X-Self-ID"] == APP
    store = LmdbIdentityStore(tmp_path / "data" / "openid-map.db")
    try:
        with store.read() as view:
            group_vuin = view.vuin_of(OpenId(APP, GROUP).key)
            user_vuin = view.vuin_of(OpenId(APP, USER).key)
    finally:
        store.close()
    for n, message in enumerate(messages, start=1):
        assert (message["group_id"], message["user_id"]) == (group_vuin, user_vuin)
        assert message["message"][1] == {"type": "text", "data": {"text": f" hello {n}"}}
        assert message["message_id"] == n


def test_gateway_events_reach_the_framework_and_a_restart_resumes(tmp_path: Path) -> None:
    framework = QueueFramework()
    received = framework.received

    async def main() -> list[dict[str, Any]]:
        platform = EmulatedPlatform()
        await platform.start()
        server = await framework_server(framework.handle)
        config = Config.model_validate(daemon_config(
            tmp_path / "data", platform=platform, onebot={"reverse_ws": [ws_url(server)]}))
        got: list[dict[str, Any]] = []
        try:
            for round_ in (1, 2):
                stop = asyncio.Event()
                daemon = asyncio.create_task(run_daemon(config, stop))
                if round_ == 1:
                    await until(lambda: platform.identifies, 10, "the daemon on the gateway")
                    await platform.push("GROUP_AT_MESSAGE_CREATE", gw_message(1))
                got.append(await asyncio.wait_for(received.get(), 10))
                stop.set()
                await asyncio.wait_for(daemon, 10)
                if round_ == 1:  # sent while the daemon is down: replayed on Resume
                    await platform.push("GROUP_AT_MESSAGE_CREATE", gw_message(2))
            assert len(platform.identifies) == 1 and len(platform.resumes) == 1
        finally:
            await server.close()
            await platform.close()
        return got

    got = asyncio.run(asyncio.wait_for(main(), 60))
    assert [m["message"][-1]["data"]["text"] for m in got] == ["m1", "m2"]
    assert got[0]["user_id"] == got[1]["user_id"] and got[0]["group_id"] == got[1]["group_id"]


def test_a_poison_event_is_repaired_and_holds_up_nobody(tmp_path: Path) -> None:
    """A signed event whose text holds a lone surrogate (as the JSON escape \\ud83d) or
    bytes that are not UTF-8, on the webhook and on the gateway: ACKed (200, not 503 or 400
    for ever), it reaches the framework (reverse WS and HTTP POST) with U+FFFD, the events
    after it do too, and the gateway session goes on (no reconnect, no replay loop)."""

    framework = QueueFramework()
    via_ws = framework.received
    via_post: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def post_receiver(request: web.Request) -> web.Response:
        await via_post.put(json.loads(await request.read()))
        return web.Response(status=204)

    async def texts(source: asyncio.Queue[dict[str, Any]], count: int) -> list[str]:
        frames = [await asyncio.wait_for(source.get(), 10) for _ in range(count)]
        return [frame["message"][-1]["data"]["text"] for frame in frames]

    port = free_port()

    async def main() -> None:
        platform = EmulatedPlatform()
        await platform.start()
        server = await framework_server(framework.handle, post_receiver)
        config = Config.model_validate(daemon_config(
            tmp_path / "data", platform=platform, webhook=f"127.0.0.1:{port}",
            onebot={"reverse_ws": [ws_url(server)],
                    "http_post": [{"url": str(server.make_url("/post"))}]}))
        stop = asyncio.Event()
        daemon = asyncio.create_task(run_daemon(config, stop))
        try:
            await until(lambda: platform.identifies, 10, "the daemon on the gateway")
            async with WebhookSender(f"http://127.0.0.1:{port}/qqbot", APP,
                                     EMU_SECRET) as sender:
                for n, content in ((1, "bad \ud83d"), (2, "raw XX"), (3, "fine")):
                    envelope = {"op": 0, "s": n, "t": "GROUP_AT_MESSAGE_CREATE",
                                "id": f"GROUP_AT_MESSAGE_CREATE:w{n}",
                                "d": {**gw_message(100 + n), "content": content}}
                    # the surrogate as \ud83d; XX as bytes that are not UTF-8
                    body = json.dumps(envelope).encode().replace(b"XX", b"\xff(")
                    delivery = await sender.post_raw(body, sender.headers(body))
                    assert (delivery.status, delivery.json()) == (200, {"op": 12})
            expected = ["bad \ufffd", "raw \ufffd(", "fine"]
            assert await texts(via_ws, 3) == expected
            assert await texts(via_post, 3) == expected
            await platform.push("GROUP_AT_MESSAGE_CREATE",
                                {**gw_message(201), "content": "gw \udc00 bad"})
            await platform.push_bytes("GROUP_AT_MESSAGE_CREATE",
                                      {**gw_message(202), "content": "gw XX raw"},
                                      lambda frame: frame.replace(b"XX", b"\xff"))
            await platform.push("GROUP_AT_MESSAGE_CREATE", gw_message(203))
            expected = ["gw \ufffd bad", "gw \ufffd raw", "m203"]
            assert await texts(via_ws, 3) == expected
            assert await texts(via_post, 3) == expected
            assert len(platform.identifies) == 1 and platform.resumes == []
        finally:
            stop.set()
            await asyncio.wait_for(daemon, 10)
            await server.close()
            await platform.close()

    asyncio.run(asyncio.wait_for(main(), 60))
