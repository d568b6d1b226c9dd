"""End to end inside one process: the daemon (run_daemon) with the gateway, a forward-WS
framework and the HTTP API; messages in from the emulated platform, sends out, both
transports answering actions with the same service. The reverse path's choice among several
identities of one vUIN (the one that spoke last) is checked here too, where a bot developer
would see it: at the OpenID the platform receives the send on."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession, ClientWebSocketResponse, WSMsgType

from gensokyo_idmap.app import run_daemon
from gensokyo_idmap.config import Config

from gensokyo_idmap.testing import (
    EmulatedPlatform,
    c2c_message,
    daemon_config,
    free_port,
    group_message,
    until,
    until_listening,
)

from ..redis_server import PrivateRedis

TOKEN = "ob-token-e2e"
GROUP1 = "A1B2C3D4E5F60718293A4B5C6D7E8F90"
GROUP2 = "B2C3D4E5F60718293A4B5C6D7E8F90A1"
MEMBER = "0F1E2D3C4B5A69788796A5B4C3D2E1F0"
UA = "AAAA2D3C4B5A69788796A5B4C3D2E1F0"
UB = "BBBB2D3C4B5A69788796A5B4C3D2E1F0"
M1 = "1111AAAA4B5A69788796A5B4C3D2E1F0"
M2 = "2222AAAA4B5A69788796A5B4C3D2E1F0"
UNION = "UNION0000000000000000000000000P1"


@dataclass
class Framework:
    """A OneBot framework on the daemon's forward WebSocket: events kept in arrival order
    while it waits for the answer to an action."""

    ws: ClientWebSocketResponse
    platform: EmulatedPlatform
    http: ClientSession
    api_port: int
    events: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0

    async def _frame(self) -> dict[str, Any]:
        message = await self.ws.receive(timeout=20)
        assert message.type == WSMsgType.TEXT, message
        frame: dict[str, Any] = json.loads(message.data)
        return frame

    async def message(self, kind: str, d: dict[str, Any]) -> dict[str, Any]:
        """Push ``d`` from the platform; the OneBot message event the framework gets."""
        await self.platform.push(kind, d)
        while not self.events:
            frame = await self._frame()
            if frame.get("post_type") == "message":
                self.events.append(frame)
        return self.events.pop(0)

    async def call(self, action: str, **params: Any) -> dict[str, Any]:
        self.calls += 1
        echo = f"e{self.calls}"
        await self.ws.send_json({"action": action, "params": params, "echo": echo})
        while True:
            frame = await self._frame()
            if frame.get("echo") == echo:
                return frame
            if frame.get("post_type") == "message":
                self.events.append(frame)

    def last_send(self) -> tuple[str, Any]:
        return self.platform.api_requests("POST", "/messages")[-1]


@asynccontextmanager
async def daemon_and_framework(tmp_path: Path, idmap: dict[str, Any] | None = None
                               ) -> AsyncIterator[Framework]:
    """The emulated platform, the daemon (gateway, forward WS, HTTP API) and a framework
    connected to it; all stopped on the way out. ``idmap``: more of that config section."""
    ws_port, api_port = free_port(), free_port()
    platform = EmulatedPlatform()
    await platform.start()
    config = Config.model_validate(daemon_config(tmp_path / "data", platform=platform, onebot={
        "forward_ws": f"127.0.0.1:{ws_port}", "http_api": f"127.0.0.1:{api_port}",
        "access_token": TOKEN}, idmap=idmap or {}))
    stop = asyncio.Event()
    daemon = asyncio.create_task(run_daemon(config, stop))

    def alive() -> None:
        if daemon.done():
            daemon.result()

    try:
        await until_listening(ws_port, alive=alive)
        await until_listening(api_port, alive=alive)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with ClientSession() as http:
            async with http.ws_connect(f"ws://127.0.0.1:{ws_port}/", headers=headers) as ws:
                await until(lambda: platform.identifies, 10, "the daemon on the gateway")
                yield Framework(ws, platform, http, api_port)
    finally:
        stop.set()
        await asyncio.wait_for(daemon, 10)
        await platform.close()


def test_forward_ws_and_http_api_actions_reach_the_platform(tmp_path: Path) -> None:
    async def main() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], EmulatedPlatform]:
        async with daemon_and_framework(tmp_path) as framework:
            event = await framework.message("GROUP_AT_MESSAGE_CREATE", group_message(1))
            answer = await framework.call("send_group_msg", group_id=event["group_id"],
                                          message="pong")
            async with framework.http.get(
                    f"http://127.0.0.1:{framework.api_port}/get_msg",
                    params={"message_id": answer["data"]["message_id"]},
                    headers={"Authorization": f"Bearer {TOKEN}"}) as resp:
                got = await resp.json()
        return event, answer, got, framework.platform

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


# --- the reverse path: several identities of one vUIN -------------------------------------


async def send_text(framework: Framework, action: str, message: Any,
                    **params: Any) -> tuple[str, Any]:
    """Call a send action; (path, body) of what the platform received."""
    answer = await framework.call(action, message=message, **params)
    assert answer["status"] == "ok", answer
    return framework.last_send()


async def bound_pair(framework: Framework, kind: str, first: dict[str, Any], second: str,
                     field: str) -> dict[str, Any]:
    """The OneBot event of the ``first`` message, with ``second`` (an OpenID not seen yet)
    bound to its vUIN in ``field``: an operator's bind."""
    event = await framework.message(kind, first)
    bound = await framework.call("bind_identity", key=second, vuin=event[field])
    assert bound["status"] == "ok" and bound["data"]["outcome"] == "moved", bound
    return event


def run_scenario(scenario: Any, tmp_path: Path) -> None:
    async def main() -> None:
        async with daemon_and_framework(tmp_path) as framework:
            await scenario(framework)

    asyncio.run(asyncio.wait_for(main(), 60))


@dataclass(frozen=True)
class Chat:
    """A kind of chat as the tests below drive it."""

    event: str  # the platform's message event type
    message: Callable[[int, str], dict[str, Any]]  # (n, OpenID) → its ``d``
    field: str  # the OneBot id field naming the chat's vUIN
    action: str
    path: str  # the platform's send path segment
    real_id: str  # the prefix of the messages' real ids


CHATS = {
    "c2c": Chat("C2C_MESSAGE_CREATE", c2c_message, "user_id", "send_private_msg", "users",
                "ROBOT1.0_c2c"),
    "group": Chat("GROUP_AT_MESSAGE_CREATE", lambda n, openid: group_message(n, openid),
                  "group_id", "send_group_msg", "groups", "ROBOT1.0_gw"),
}


@pytest.mark.parametrize(("kind", "first", "second"),
                         [("c2c", UA, UB), ("group", GROUP1, GROUP2)], ids=["c2c", "group"])
def test_a_send_goes_to_the_openid_that_spoke_last(kind: str, first: str, second: str,
                                                   tmp_path: Path) -> None:
    """C2C: UA, UB, UA again (one person bound across two C2C OpenIDs); group: G1, G2, G1
    again (a group vUIN owning two group OpenIDs). The send to the vUIN goes to the first;
    once the second speaks again, to the second."""
    chat = CHATS[kind]

    async def scenario(f: Framework) -> None:
        event = await bound_pair(f, chat.event, chat.message(1, first), second, chat.field)
        vuin = event[chat.field]
        for n, speaker in ((2, second), (3, first), (4, second)):
            assert (await f.message(chat.event, chat.message(n, speaker)))[chat.field] == vuin
            if n >= 3:
                path, body = await send_text(f, chat.action, "hi", **{chat.field: vuin})
                assert (path, body["msg_id"]) == (f"/v2/{chat.path}/{speaker}/messages",
                                                  f"{chat.real_id}{n}")

    run_scenario(scenario, tmp_path)


def test_a_mention_names_the_person_as_last_seen_in_that_group(tmp_path: Path) -> None:
    """One person (one union_openid) as M1 in G1, then as M2 in G2: an at of that vUIN in
    G1 names M1 and in G2 names M2, whichever spoke last anywhere."""
    async def scenario(f: Framework) -> None:
        in_g1 = await f.message("GROUP_AT_MESSAGE_CREATE",
                                group_message(1, GROUP1, M1, union=UNION))
        in_g2 = await f.message("GROUP_AT_MESSAGE_CREATE",
                                group_message(2, GROUP2, M2, union=UNION))
        person = in_g1["user_id"]
        assert in_g2["user_id"] == person
        for event, chat, member in ((in_g1, GROUP1, M1), (in_g2, GROUP2, M2)):
            path, body = await send_text(f, "send_group_msg", f"[CQ:at,qq={person}] hi",
                                         group_id=event["group_id"])
            assert path == f"/v2/groups/{chat}/messages"
            assert body["content"] == f'<qqbot-at-user id="{member}" /> hi'

    run_scenario(scenario, tmp_path)


def test_a_reply_goes_to_the_chat_of_the_message_it_answers(tmp_path: Path) -> None:
    """UA, then UB: a send that answers UA's message (a reply segment, or a quick operation
    on UA's event) goes to UA, though UB spoke last; one without goes to UB."""
    async def scenario(f: Framework) -> None:
        first = await bound_pair(f, "C2C_MESSAGE_CREATE", c2c_message(1, UA), UB, "user_id")
        person = first["user_id"]
        await f.message("C2C_MESSAGE_CREATE", c2c_message(2, UB))
        reply = [{"type": "reply", "data": {"id": str(first["message_id"])}},
                 {"type": "text", "data": {"text": "re"}}]
        path, body = await send_text(f, "send_private_msg", reply, user_id=person)
        assert (path, body["msg_id"]) == (f"/v2/users/{UA}/messages", "ROBOT1.0_c2c1")
        quick = await f.call(".handle_quick_operation", context=first,
                             operation={"reply": "quick"})
        assert quick["status"] == "ok", quick
        assert f.last_send()[0] == f"/v2/users/{UA}/messages"
        path, body = await send_text(f, "send_private_msg", "plain", user_id=person)
        assert (path, body["msg_id"]) == (f"/v2/users/{UB}/messages", "ROBOT1.0_c2c2")

    run_scenario(scenario, tmp_path)


@pytest.mark.parametrize("runtime_backend", ["lmdb", "redis"])
def test_after_n_messages_the_next_5n_sends_all_reply_newest_first(
        tmp_path: Path, runtime_backend: str) -> None:
    """A busy group: N messages in, then 5 x N sends (a broadcast, a busy command). Each
    send is a passive reply (the platform limits active messages to a handful), to the
    newest message with replies left: N is above the 64 messages the choice once stepped
    back over at most. On LMDB and with the runtime state on a (private) Redis."""
    n = 80
    idmap: dict[str, Any] = {}
    if runtime_backend == "redis":
        redis_server = PrivateRedis(tmp_path)
        redis_server.start()
        idmap = {"runtime_backend": "redis", "redis_url": redis_server.url}

    async def main() -> list[dict[str, Any]]:
        async with daemon_and_framework(tmp_path, idmap) as framework:
            for i in range(1, n + 1):
                event = await framework.message("GROUP_AT_MESSAGE_CREATE", group_message(i))
            for _ in range(5 * n):
                answer = await framework.call("send_group_msg", group_id=event["group_id"],
                                              message="pong")
                assert answer["status"] == "ok", answer
            return [body for _, body in framework.platform.api_requests("POST", "/messages")]

    try:
        bodies = asyncio.run(asyncio.wait_for(main(), 120))
    finally:
        if runtime_backend == "redis":
            redis_server.stop()
    assert [body.get("msg_id") for body in bodies] == [
        f"ROBOT1.0_gw{i}" for i in range(n, 0, -1) for _ in range(5)]
    seqs = [body["msg_seq"] for body in bodies]
    assert [seq - seqs[0] for seq in seqs] == [k for _ in range(n) for k in range(5)]
