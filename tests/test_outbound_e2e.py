"""End to end inside one process: the daemon (run_daemon) with the gateway, a forward-WS
framework and the HTTP API; a group message in, a ``send_group_msg`` out, both transports
answering actions with the same service."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from aiohttp import ClientSession, WSMsgType

from gensokyo_idmap.app import run_daemon
from gensokyo_idmap.config import Config

from .qq.platform_emulator import APP, SECRET, EmulatedPlatform, group_message
from .loopback import free_port

TOKEN = "ob-token-e2e"


async def until_listening(port: int, daemon: asyncio.Task[None]) -> None:
    for _ in range(1000):
        if daemon.done():
            daemon.result()
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.01)
            continue
        writer.close()
        await writer.wait_closed()
        return
    raise AssertionError(f"nothing listens on {port}")


def test_forward_ws_and_http_api_actions_reach_the_platform(tmp_path: Path) -> None:
    ws_port, api_port = free_port(), free_port()

    async def main() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], EmulatedPlatform]:
        platform = EmulatedPlatform()
        await platform.start()
        config = Config.model_validate({
            "bot": {"app_id": APP, "secret": SECRET},
            "idmap": {"data_dir": str(tmp_path / "data")},
            "qq": {"gateway": True, "api_base": platform.url("/").rstrip("/"),
                   "token_url": platform.url("/app/getAppAccessToken")},
            "webhook": {"listen": ""},
            "onebot": {"forward_ws": f"127.0.0.1:{ws_port}", "http_api": f"127.0.0.1:{api_port}",
                       "access_token": TOKEN, "heartbeat_interval_seconds": 60},
        })
        stop = asyncio.Event()
        daemon = asyncio.create_task(run_daemon(config, stop))
        try:
            await until_listening(ws_port, daemon)
            await until_listening(api_port, daemon)
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with ClientSession() as http:
                async with http.ws_connect(f"ws://127.0.0.1:{ws_port}/", headers=headers) as ws:
                    for _ in range(1000):
                        if platform.identifies:
                            break
                        await asyncio.sleep(0.01)
                    await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(1))
                    event: dict[str, Any] = {}
                    async for message in ws:
                        assert message.type == WSMsgType.TEXT
                        frame = json.loads(message.data)
                        if frame.get("post_type") == "message":
                            event = frame
                            break
                    await ws.send_json({"action": "send_group_msg", "echo": "s1",
                                        "params": {"group_id": event["group_id"],
                                                   "message": "pong"}})
                    answer: dict[str, Any] = {}
                    async for message in ws:
                        frame = json.loads(message.data)
                        if frame.get("echo") == "s1":
                            answer = frame
                            break
                async with http.get(f"http://127.0.0.1:{api_port}/get_msg",
                                    params={"message_id": answer["data"]["message_id"]},
                                    headers=headers) as resp:
                    got = await resp.json()
        finally:
            stop.set()
            await asyncio.wait_for(daemon, 10)
            assert platform.server is not None
            await platform.server.close()
        return event, answer, got, platform

    event, answer, got, platform = asyncio.run(asyncio.wait_for(main(), 60))
    assert answer["status"] == "ok" and isinstance(answer["data"]["message_id"], int)
    [(path, body)] = platform.api_requests("POST", "/messages")
    seq = body.pop("msg_seq")  # counted from this process's offset (unique across restarts)
    assert type(seq) is int and 0 < seq < 2**31
    assert (path, body) == ("/v2/groups/A1B2C3D4E5F60718293A4B5C6D7E8F90/messages",
                            {"msg_type": 0, "content": "pong", "msg_id": "ROBOT1.0_gw1"})
    assert got["status"] == "ok" and got["data"]["direction"] == "out"
    assert got["data"]["message_type"] == "group" and event["message_id"] != got["data"][
        "message_id"]
