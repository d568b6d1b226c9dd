"""QQ channels (guilds) end to end: the emulated platform's guild events over the gateway
and over the signed webhook, through the daemon, to a reverse-WS framework that answers
with actions; what the daemon then asked of the platform's OpenAPI is checked against the
platform's own endpoints (``/channels/{id}/messages``, ``/dms/{guild_id}/messages``,
``/users/@me``, ``/users/@me/guilds``, ``/guilds/{id}/channels``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Final

import pytest
from aiohttp import WSMsgType, web
from aiohttp.test_utils import TestServer

from gensokyo_idmap.app import run_daemon
from gensokyo_idmap.config import Config
from gensokyo_idmap.testing import (
    APP,
    SECRET,
    EmulatedPlatform,
    WebhookSender,
    channel_message,
    daemon_config,
    direct_message,
    free_port,
    guild_member,
    message_delete,
    until,
    until_listening,
)
from gensokyo_idmap.testing.platform_emulator import CHANNEL, GUILD, GUILD_USER

SELF_ID: Final = int(APP)
WAIT: Final = 5.0
OTHER_USER: Final = "144115218677563301"
DM_GUILD: Final = "7000000099"


class Framework:
    """A reverse-WS framework: events in a queue, actions answered by echo."""

    def __init__(self) -> None:
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.answers: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.socket: web.WebSocketResponse | None = None
        self.connected = asyncio.Event()
        self.server: TestServer | None = None
        self._echo = 0

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.socket = ws
        async for message in ws:
            if message.type != WSMsgType.TEXT:
                continue
            frame = json.loads(message.data)
            if "echo" in frame and frame["echo"] in self.answers:
                self.answers.pop(frame["echo"]).set_result(frame)
            elif frame.get("post_type") == "meta_event":
                self.connected.set()
            else:
                await self.events.put(frame)
        return ws

    async def call(self, action: str, **params: Any) -> dict[str, Any]:
        assert self.socket is not None
        self._echo += 1
        echo = f"e{self._echo}"
        self.answers[echo] = asyncio.get_running_loop().create_future()
        await self.socket.send_json({"action": action, "params": params, "echo": echo})
        return await asyncio.wait_for(self.answers[echo], WAIT)

    async def next_event(self) -> dict[str, Any]:
        return await asyncio.wait_for(self.events.get(), WAIT)


async def scenario(tmp_path: Path, transport: str) -> None:
    platform = EmulatedPlatform()
    await platform.start()
    fw = Framework()
    app = web.Application()
    app.router.add_get("/ws", fw.handle)
    fw.server = TestServer(app, host="127.0.0.1")
    await fw.server.start_server()
    port = free_port()
    stop = asyncio.Event()
    config = Config.model_validate(daemon_config(
        tmp_path / "data", platform=platform, webhook=f"127.0.0.1:{port}",
        onebot={"reverse_ws": [str(fw.server.make_url("/ws")).replace("http", "ws", 1)]}))
    daemon = asyncio.create_task(run_daemon(config, stop))
    sender = WebhookSender(f"http://127.0.0.1:{port}/qqbot", APP, SECRET)

    async def deliver(t: str, d: dict[str, Any]) -> dict[str, Any]:
        if transport == "gateway":
            await platform.push(t, d)
        else:
            answer = await sender.dispatch(t, d)
            assert (answer.status, answer.json()) == (200, {"op": 12}), t
        return await fw.next_event()

    try:
        await until_listening(port, WAIT, alive=lambda: daemon.done() and daemon.result())
        await until(lambda: bool(platform.identifies), WAIT, "READY")
        await asyncio.wait_for(fw.connected.wait(), WAIT)
        async with sender:
            await check_guild(platform, fw, deliver)
    finally:
        stop.set()
        await asyncio.wait_for(daemon, 10)
        await fw.server.close()
        await platform.close()


async def check_guild(platform: EmulatedPlatform, fw: Framework, deliver: Any) -> None:
    # --- a public guild's @bot message: a group message of the channel, guild alongside
    at_bot = channel_message(1, "ping", mentions=(OTHER_USER,))
    event = await deliver("AT_MESSAGE_CREATE", at_bot)
    channel_vuin, author = event["group_id"], event["user_id"]
    assert (event["post_type"], event["message_type"], event["sub_type"]) == (
        "message", "group", "normal")
    assert (event["guild_id"], event["channel_id"]) == (GUILD, CHANNEL)
    assert event["message"][0] == {"type": "at", "data": {"qq": str(SELF_ID)}}
    assert event["message"][1] == {"type": "text", "data": {"text": " ping "}}
    mentioned = int(event["message"][2]["data"]["qq"])
    assert len({channel_vuin, author, mentioned, SELF_ID}) == 4
    answer = await fw.call("send_group_msg", group_id=channel_vuin,
                           message=f"pong [CQ:at,qq={author}]")
    assert answer["retcode"] == 0, answer
    [(path, body)] = platform.api_requests("POST", f"/channels/{CHANNEL}/messages")
    assert body["msg_id"] == at_bot["id"]  # a passive reply to that message
    assert body["content"] == f"pong <@{GUILD_USER}>"
    sent_id = answer["data"]["message_id"]

    # --- a private bot's plain message: the same group; the go-cqhttp channel send
    plain = channel_message(2, "hello", at_bot=False)
    event = await deliver("MESSAGE_CREATE", plain)
    assert (event["group_id"], event["user_id"]) == (channel_vuin, author)
    assert event["message"] == [{"type": "text", "data": {"text": "hello"}}]
    answer = await fw.call("send_guild_channel_msg", guild_id=GUILD, channel_id=CHANNEL,
                           message=[{"type": "text", "data": {"text": "look"}},
                                    {"type": "image",
                                     "data": {"file": "https://example.com/a.png"}}])
    assert answer["retcode"] == 0, answer
    (_, body) = platform.api_requests("POST", f"/channels/{CHANNEL}/messages")[-1]
    assert (body["content"], body["image"], body["msg_id"]) == (
        "look", "https://example.com/a.png", plain["id"])
    refused = await fw.call("send_guild_channel_msg", guild_id=GUILD, channel_id=CHANNEL,
                            message="[CQ:record,file=https://example.com/a.silk]")
    assert refused["retcode"] == 100 and "images only" in refused["message"]

    # --- a guild DM: a private message; the answer goes to the DM session
    dm = direct_message(3, "psst")
    event = await deliver("DIRECT_MESSAGE_CREATE", dm)
    assert (event["message_type"], event["sub_type"], event["user_id"]) == (
        "private", "friend", author)
    assert not {"guild_id", "channel_id", "src_guild_id"} & set(event), event  # private
    answer = await fw.call("send_private_msg", user_id=author, message="hush")
    assert answer["retcode"] == 0, answer
    [(_, body)] = platform.api_requests("POST", f"/dms/{DM_GUILD}/messages")
    assert (body["content"], body["msg_id"]) == ("hush", dm["id"])

    # --- recalls, in channels and DMs, name the message the framework saw
    recall = await deliver("PUBLIC_MESSAGE_DELETE", message_delete(at_bot, OTHER_USER))
    assert (recall["notice_type"], recall["group_id"], recall["user_id"],
            recall["operator_id"]) == ("group_recall", channel_vuin, author, mentioned)
    again = await deliver("MESSAGE_DELETE", message_delete(plain))
    assert (again["notice_type"], again["operator_id"]) == ("group_recall", author)
    gone = await deliver("DIRECT_MESSAGE_DELETE", message_delete(dm))
    assert (gone["notice_type"], gone["user_id"]) == ("friend_recall", author)
    assert not {"guild_id", "channel_id"} & set(gone), gone
    assert len({recall["message_id"], again["message_id"], gone["message_id"]}) == 3

    # --- guild members: the guild's own number, as a group
    joined = await deliver("GUILD_MEMBER_ADD", guild_member(OTHER_USER))
    assert (joined["notice_type"], joined["sub_type"], joined["user_id"],
            joined["guild_id"]) == ("group_increase", "approve", mentioned, GUILD)
    left = await deliver("GUILD_MEMBER_REMOVE", guild_member(OTHER_USER, operator=GUILD_USER))
    assert (left["notice_type"], left["sub_type"], left["operator_id"],
            left["group_id"]) == ("group_decrease", "kick", author, joined["group_id"])
    assert joined["group_id"] not in (channel_vuin, author, mentioned)

    # --- the bot recalls its own channel message
    answer = await fw.call("delete_msg", message_id=sent_id)
    assert answer["retcode"] == 0, answer
    [(path, _)] = platform.api_requests("DELETE", "")
    assert path.startswith(f"/channels/{CHANNEL}/messages/")

    # --- the guild actions frameworks call on connect answer the platform's data
    profile = await fw.call("get_guild_service_profile")
    assert profile["data"]["tiny_id"] == "1" and profile["data"]["nickname"] == "bot"
    guilds = await fw.call("get_guild_list")
    assert guilds["data"] == [{"guild_id": GUILD, "guild_name": "Test guild",
                               "guild_display_id": GUILD}]
    channels = await fw.call("get_guild_channel_list", guild_id=GUILD)
    [channel] = channels["data"]
    assert (channel["channel_id"], channel["channel_name"], channel["owner_guild_id"],
            channel["group_id"]) == (CHANNEL, "general", GUILD, channel_vuin)
    unknown = await fw.call("get_guild_channel_list")
    assert unknown["retcode"] == 100 and "guild_id" in unknown["message"]


@pytest.mark.parametrize("transport", ["gateway", "webhook"])
def test_guild_events_and_sends(tmp_path: Path, transport: str) -> None:
    asyncio.run(asyncio.wait_for(scenario(tmp_path, transport), 60))
