"""Every platform event type, end to end through the emulated platform, as a framework sees it.

One daemon per (transport, message format), run in-process with both the QQ gateway and the
webhook enabled; the events of one transport go in through the emulator's gateway
(``EmulatedPlatform.push``) or its signed webhook sender (``WebhookSender``). A reverse-WS
framework and an HTTP POST framework collect every non-meta event. After the daemon stops,
the identity and message-id stores are opened read-side, and each received event is compared
with the exact dict the README and the references (qq-platform.md §4, onebot-v11.md §2–§3)
promise: vUINs from the store, ``self_id`` the AppID, ``message_id`` the int32 virtual id,
``time`` the platform's timestamp for robot / member / friend events and "now" (inside the
test's wall-clock window) for messages and interactions, ``message`` as array or CQ string
with the escaping of §3.1.

Also checked: interactions are acknowledged to the platform (``PUT /interactions/{id}``),
unknown event types forward nothing and the daemon keeps serving, the same person has one
vUIN as group member, C2C user and friend (the same OpenID in every role, or two OpenIDs
linked by ``union_openid``), and a webhook delivery is answered only after the frameworks
got its event.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pytest
from aiohttp import WSMsgType, web
from aiohttp.test_utils import TestServer
from structlog.testing import capture_logs

from gensokyo_idmap.app import run_daemon
from gensokyo_idmap.config import Config
from gensokyo_idmap.identity import OpenId, UnionId
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore

from gensokyo_idmap.testing import (
    APP,
    SECRET,
    EmulatedPlatform,
    WebhookSender,
    daemon_config,
    free_port,
    until,
    until_listening,
)

SELF_ID: Final = int(APP)
INT32_MAX: Final = 2**31 - 1
WAIT: Final = 5.0  # every single wait of this file is bounded by this many seconds

GROUP: Final = "A1B2C3D4E5F60718293A4B5C6D7E8F90"
# Person 1 shows the same OpenID as group member, C2C user and friend (observed in practice:
# author.id == member_openid == union_openid).
PERSON1: Final = "0F1E2D3C4B5A69788796A5B4C3D2E1F0"
# Person 2 has a member OpenID and a different C2C OpenID, linked by one union_openid.
MEMBER2: Final = "2B3C4D5E6F708192A3B4C5D6E7F80911"
C2C2: Final = "9A8B7C6D5E4F30211203F4E5D6C7B8A9"
UNION2: Final = "7C1D2E3F405162738495A6B7C8D9E0F1"
OPERATOR: Final = "5E6F708192A3B4C5D6E7F8091A2B3C4D"

# Text that needs every CQ escape, plus an already escaped-looking sequence and a fake code.
TRICKY: Final = " a&b [x], c=1 &#91;y&#93; [CQ:face,id=1]"
# An attachment URL whose CQ parameter needs '&', ',' '[' and ']' escaped.
IMAGE_URL: Final = "https://multimedia.nt.qq.com.cn/download?appid=1407&fileid=a,b[1]"


# --------------------------------------------------------------------------- expectations


def cq_text(text: str) -> str:
    """onebot-v11.md §3.1, written independently of the daemon's codec."""
    return text.replace("&", "&amp;").replace("[", "&#91;").replace("]", "&#93;")


def cq_param(value: str) -> str:
    return cq_text(value).replace(",", "&#44;")


def cq_string(segments: list[dict[str, Any]]) -> str:
    out = []
    for segment in segments:
        if segment["type"] == "text":
            out.append(cq_text(segment["data"]["text"]))
        else:
            params = "".join(f",{k}={cq_param(v)}" for k, v in segment["data"].items())
            out.append(f"[CQ:{segment['type']}{params}]")
    return "".join(out)


def seg(kind: str, **data: str) -> dict[str, Any]:
    return {"type": kind, "data": data}


AT_BOT: Final = seg("at", qq=str(SELF_ID))


class Now:
    """Placeholder for ``time`` = the daemon's clock when it built the event."""

    def __repr__(self) -> str:
        return "<now>"


NOW: Final = Now()


@dataclass(frozen=True)
class Known:
    """What the stores said after the run: vUIN per identity key, virtual id per real id."""

    vuins: dict[str, int]
    msgids: dict[str, int]

    def v(self, openid: str) -> int:
        return self.vuins[OpenId(APP, openid).key]


Expect = Callable[[Known, str], list[dict[str, Any]]]


@dataclass(frozen=True)
class Case:
    name: str
    t: str
    d: dict[str, Any]
    expect: Expect
    interaction_id: str | None = None
    count: int = 1  # OneBot events it yields (unknown types: none)


def message_fields(segments: list[dict[str, Any]], fmt: str) -> dict[str, Any]:
    raw = cq_string(segments)
    return {"message": segments if fmt == "array" else raw, "raw_message": raw, "font": 0}


def group_message(known: Known, fmt: str, real_id: str, user: str,
                  segments: list[dict[str, Any]]) -> dict[str, Any]:
    user_id = known.v(user)
    return {"time": NOW, "self_id": SELF_ID, "post_type": "message", "message_type": "group",
            "sub_type": "normal", "message_id": known.msgids[real_id],
            "group_id": known.v(GROUP), "user_id": user_id, "anonymous": None,
            **message_fields(segments, fmt),
            "sender": {"user_id": user_id, "nickname": "", "card": "", "sex": "unknown",
                       "age": 0, "area": "", "level": "", "role": "member", "title": ""}}


def private_message(known: Known, fmt: str, real_id: str, user: str,
                    segments: list[dict[str, Any]]) -> dict[str, Any]:
    user_id = known.v(user)
    return {"time": NOW, "self_id": SELF_ID, "post_type": "message",
            "message_type": "private", "sub_type": "friend",
            "message_id": known.msgids[real_id], "user_id": user_id,
            **message_fields(segments, fmt),
            "sender": {"user_id": user_id, "nickname": "", "sex": "unknown", "age": 0}}


def notice(when: int | Now, notice_type: str, **fields: Any) -> dict[str, Any]:
    return {"time": when, "self_id": SELF_ID, "post_type": "notice",
            "notice_type": notice_type, **fields}


def cases(tag: str) -> list[Case]:
    """Every event type (reference §4 shapes, as tests/qq/test_events.py), ids unique per
    ``tag`` so that nothing is de-duplicated across runs of one daemon."""
    ts = "2025-01-01T12:00:00+08:00"
    at_id, all_id, plain_id = f"ROBOT1.0_{tag}grpAt", f"ROBOT1.0_{tag}grpAll", f"ROBOT1.0_{tag}grp"
    c2c_id, c2c2_id = f"ROBOT1.0_{tag}c2c1", f"ROBOT1.0_{tag}c2c2"
    voice_url = "multimedia.nt.qq.com.cn/v.silk"  # no scheme: https:// is prepended
    video_url = "https://multimedia.nt.qq.com.cn/v.mp4"
    file_url = "https://multimedia.nt.qq.com.cn/r.pdf"
    jpeg_url = "https://multimedia.nt.qq.com.cn/p.jpg"

    def robot(when: int | str) -> dict[str, Any]:
        return {"group_openid": GROUP, "op_member_openid": OPERATOR, "timestamp": when}

    def interaction(n: int, **chat: str) -> dict[str, Any]:
        return {"id": f"interaction-{tag}-{n}", "type": 11 if "group_openid" in chat else 12,
                "scene": "group" if "group_openid" in chat else "c2c",
                "chat_type": 1 if "group_openid" in chat else 2,
                "timestamp": "2025-01-01T12:00:02+08:00", **chat,
                "data": {"type": 11, "resolved": {"button_data": f"vote:{n}",
                                                  "button_id": f"b{n}",
                                                  "message_id": "ROBOT1.0_x"}},
                "version": 1, "application_id": APP}

    return [
        Case("group_at", "GROUP_AT_MESSAGE_CREATE", {
            "id": at_id, "content": TRICKY, "timestamp": ts,
            "group_openid": GROUP, "group_id": GROUP,
            "author": {"id": PERSON1, "member_openid": PERSON1, "union_openid": PERSON1},
            "attachments": [{"content_type": "image/png", "filename": "a.png", "height": 100,
                             "width": 200, "size": 2048, "url": IMAGE_URL}],
            "message_scene": {"source": "default"}, "message_type": 0,
        }, lambda k, f: [group_message(k, f, at_id, PERSON1, [
            AT_BOT, seg("text", text=TRICKY),
            seg("image", file=IMAGE_URL, url=IMAGE_URL, name="a.png")])]),
        Case("group_all_mention", "GROUP_MESSAGE_CREATE", {
            "id": all_id, "content": "@bot hi, all", "timestamp": ts,
            "group_openid": GROUP, "group_id": GROUP,
            "author": {"id": MEMBER2, "member_openid": MEMBER2, "union_openid": UNION2},
            "mentions": [{"scope": "single", "id": PERSON1, "member_openid": PERSON1,
                          "username": "u", "bot": False, "is_you": False},
                         {"scope": "single", "id": "B0", "member_openid": "B0",
                          "username": "bot", "bot": True, "is_you": True}],
            "attachments": [
                {"content_type": "voice", "filename": "v.silk", "size": 10, "url": voice_url},
                {"content_type": "video/mp4", "filename": "v.mp4", "url": video_url},
                {"content_type": "file", "filename": "r.pdf", "url": file_url}],
        }, lambda k, f: [group_message(k, f, all_id, MEMBER2, [
            # PERSON1, mentioned without markup in the content: an at after the text
            AT_BOT, seg("text", text="@bot hi, all"), seg("at", qq=str(k.v(PERSON1))),
            seg("record", file="https://" + voice_url, url="https://" + voice_url,
                name="v.silk"),
            seg("video", file=video_url, url=video_url, name="v.mp4"),
            seg("file", file=file_url, url=file_url, name="r.pdf")])]),
        Case("group_all_plain", "GROUP_MESSAGE_CREATE", {
            "id": plain_id, "content": "plain [not a code] & more", "timestamp": ts,
            "group_openid": GROUP, "author": {"id": PERSON1, "member_openid": PERSON1},
        }, lambda k, f: [group_message(k, f, plain_id, PERSON1, [
            seg("text", text="plain [not a code] & more")])]),
        Case("c2c", "C2C_MESSAGE_CREATE", {
            "id": c2c_id, "content": TRICKY, "timestamp": ts,
            "author": {"id": PERSON1, "user_openid": PERSON1, "union_openid": PERSON1},
            "attachments": [{"content_type": "image/jpeg", "url": jpeg_url}],
        }, lambda k, f: [private_message(k, f, c2c_id, PERSON1, [
            seg("text", text=TRICKY), seg("image", file=jpeg_url, url=jpeg_url)])]),
        Case("unknown_guild", "GUILD_CREATE", {
            "id": f"2{tag == 'g'}", "name": "guild", "owner_id": "123",
            "op_user_id": "123"}, lambda k, f: [], count=0),
        Case("c2c_union", "C2C_MESSAGE_CREATE", {
            "id": c2c2_id, "content": "hello", "timestamp": ts,
            "author": {"id": C2C2, "user_openid": C2C2, "union_openid": UNION2},
        }, lambda k, f: [private_message(k, f, c2c2_id, C2C2, [seg("text", text="hello")])]),
        Case("group_add_robot", "GROUP_ADD_ROBOT", robot(1735700000),
             lambda k, f: [notice(1735700000, "group_increase", sub_type="invite",
                                  group_id=k.v(GROUP), user_id=SELF_ID,
                                  operator_id=k.v(OPERATOR))]),
        Case("group_del_robot", "GROUP_DEL_ROBOT", robot("1735700100"),
             lambda k, f: [notice(1735700100, "group_decrease", sub_type="kick_me",
                                  group_id=k.v(GROUP), user_id=SELF_ID,
                                  operator_id=k.v(OPERATOR))]),
        Case("group_member_add", "GROUP_MEMBER_ADD", {
            "group_openid": GROUP, "member_openid": PERSON1, "op_member_openid": OPERATOR,
            "timestamp": 1735700200,
        }, lambda k, f: [notice(1735700200, "group_increase", sub_type="approve",
                                group_id=k.v(GROUP), user_id=k.v(PERSON1),
                                operator_id=k.v(OPERATOR))]),
        Case("group_member_leave", "GROUP_MEMBER_REMOVE", {
            "group_openid": GROUP, "member_openid": MEMBER2, "timestamp": 1735700300,
        }, lambda k, f: [notice(1735700300, "group_decrease", sub_type="leave",
                                group_id=k.v(GROUP), user_id=k.v(MEMBER2),
                                operator_id=k.v(MEMBER2))]),
        Case("group_member_kick", "GROUP_MEMBER_REMOVE", {
            "group_openid": GROUP, "member_openid": PERSON1, "op_member_openid": OPERATOR,
            "timestamp": 1735700301,
        }, lambda k, f: [notice(1735700301, "group_decrease", sub_type="kick",
                                group_id=k.v(GROUP), user_id=k.v(PERSON1),
                                operator_id=k.v(OPERATOR))]),
        Case("friend_add", "FRIEND_ADD", {"openid": PERSON1, "timestamp": 1735700400},
             lambda k, f: [notice(1735700400, "friend_add", user_id=k.v(PERSON1))]),
        Case("friend_del", "FRIEND_DEL", {"openid": C2C2, "timestamp": 1735700401},
             lambda k, f: [notice(1735700401, "friend_del", user_id=k.v(C2C2))]),
        Case("unknown_new", "SOMETHING_NEW_2030", {"whatever": [1, 2, 3]}, lambda k, f: [],
             count=0),
        Case("group_msg_reject", "GROUP_MSG_REJECT", robot(1735700500),
             lambda k, f: [notice(1735700500, "group_msg_reject", group_id=k.v(GROUP),
                                  operator_id=k.v(OPERATOR))]),
        Case("group_msg_receive", "GROUP_MSG_RECEIVE", robot(1735700501),
             lambda k, f: [notice(1735700501, "group_msg_receive", group_id=k.v(GROUP),
                                  operator_id=k.v(OPERATOR))]),
        Case("c2c_msg_reject", "C2C_MSG_REJECT", {"openid": PERSON1, "timestamp": 1735700600},
             lambda k, f: [notice(1735700600, "c2c_msg_reject", user_id=k.v(PERSON1))]),
        Case("c2c_msg_receive", "C2C_MSG_RECEIVE", {"openid": PERSON1, "timestamp": 1735700601},
             lambda k, f: [notice(1735700601, "c2c_msg_receive", user_id=k.v(PERSON1))]),
        Case("interaction_group", "INTERACTION_CREATE",
             interaction(1, group_openid=GROUP, group_member_openid=PERSON1),
             lambda k, f: [notice(NOW, "interaction", interaction_id=f"interaction-{tag}-1",
                                  button_data="vote:1", button_id="b1",
                                  group_id=k.v(GROUP), user_id=k.v(PERSON1))],
             interaction_id=f"interaction-{tag}-1"),
        Case("interaction_c2c", "INTERACTION_CREATE", interaction(2, user_openid=C2C2),
             lambda k, f: [notice(NOW, "interaction", interaction_id=f"interaction-{tag}-2",
                                  button_data="vote:2", button_id="b2",
                                  user_id=k.v(C2C2))],
             interaction_id=f"interaction-{tag}-2"),
    ]


# --------------------------------------------------------------------------- the two frameworks


@dataclass
class Frameworks:
    """A reverse-WS framework and an HTTP POST framework on one aiohttp server. The POST
    handler records an event before it answers, and may be held by ``gate``."""

    ws_events: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)
    ws_connected: asyncio.Event = field(default_factory=asyncio.Event)
    posted: list[dict[str, Any]] = field(default_factory=list)
    gate: asyncio.Event | None = None
    server: TestServer | None = None

    async def reverse_ws(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for message in ws:
            if message.type != WSMsgType.TEXT:
                continue
            frame = json.loads(message.data)
            if frame.get("post_type") == "meta_event":
                if frame.get("meta_event_type") == "lifecycle":
                    self.ws_connected.set()
                continue
            await self.ws_events.put(frame)
        return ws

    async def http_post(self, request: web.Request) -> web.Response:
        event = json.loads(await request.read())
        if event.get("post_type") != "meta_event":
            self.posted.append(event)
            if self.gate is not None:
                await asyncio.wait_for(self.gate.wait(), WAIT)
        return web.Response(status=204)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/ws", self.reverse_ws)
        app.router.add_post("/post", self.http_post)
        self.server = TestServer(app, host="127.0.0.1")
        await self.server.start_server()

    def url(self, path: str) -> str:
        assert self.server is not None
        return str(self.server.make_url(path))

    async def next_events(self, count: int) -> list[dict[str, Any]]:
        return [await asyncio.wait_for(self.ws_events.get(), WAIT) for _ in range(count)]


def events_config(data_dir: Path, platform: EmulatedPlatform, fw: Frameworks,
                  webhook_port: int, fmt: str) -> Config:
    return Config.model_validate(daemon_config(
        data_dir, platform=platform, webhook=f"127.0.0.1:{webhook_port}",
        onebot={"reverse_ws": [fw.url("/ws").replace("http://", "ws://")],
                "http_post": [{"url": fw.url("/post")}], "message_format": fmt}))


# --------------------------------------------------------------------------- the run


@dataclass
class Received:
    case: Case
    events: list[dict[str, Any]]
    window: tuple[int, int]  # int(time.time()) before sending and after receiving


async def send_through(transport: str, platform: EmulatedPlatform, sender: WebhookSender,
                       fw: Frameworks, case: Case, first: bool) -> Received:
    count = case.count
    before = int(time.time())
    posted_before = len(fw.posted)
    if transport == "gateway":
        await platform.push(case.t, case.d)
    elif first:
        # The first delivery is held at the HTTP POST framework: the webhook must not
        # answer before that framework has the event (README: ack after processing).
        fw.gate = asyncio.Event()
        delivery = asyncio.create_task(sender.dispatch(case.t, case.d))
        await until(lambda: len(fw.posted) > posted_before, WAIT, "the held HTTP POST")
        await asyncio.sleep(0.3)
        assert not delivery.done(), "the webhook answered before the framework got the event"
        fw.gate.set()
        answer = await asyncio.wait_for(delivery, WAIT)
        assert (answer.status, answer.json()) == (200, {"op": 12})
        fw.gate = None
    else:
        answer = await sender.dispatch(case.t, case.d)
        assert (answer.status, answer.json()) == (200, {"op": 12}), case.name
        # Answered only once every connected framework had it: already recorded here.
        assert len(fw.posted) == posted_before + count, case.name
    events = await fw.next_events(count)
    if case.interaction_id is not None:
        def acked() -> bool:
            return any(ack[0] == case.interaction_id for ack in platform.interaction_acks)

        if transport == "webhook":
            assert acked(), "the webhook answered before the interaction was acknowledged"
        await until(acked, WAIT, f"the acknowledgement of {case.interaction_id}")
    await until(lambda: len(fw.posted) == posted_before + count, WAIT,
                "the HTTP POST framework")
    assert fw.posted[posted_before:] == events  # both frameworks got the same events
    return Received(case, events, (before, int(time.time())))


async def run_all(tmp_path: Path, transport: str, fmt: str) -> tuple[
        list[Received], EmulatedPlatform, WebhookSender]:
    platform = EmulatedPlatform()
    await platform.start()
    fw = Frameworks()
    await fw.start()
    port = free_port()
    stop = asyncio.Event()
    daemon = asyncio.create_task(run_daemon(
        events_config(tmp_path / "data", platform, fw, port, fmt), stop))
    received: list[Received] = []
    sender = WebhookSender(f"http://127.0.0.1:{port}/qqbot", APP, SECRET)
    try:
        await until_listening(port, WAIT, alive=lambda: daemon.done() and daemon.result())
        await until(lambda: bool(platform.identifies) and bool(platform.sent), WAIT, "READY")
        await asyncio.wait_for(fw.ws_connected.wait(), WAIT)
        async with sender:
            for n, case in enumerate(cases(transport[0])):
                received.append(await send_through(transport, platform, sender, fw, case,
                                                   first=n == 0))
                assert not daemon.done()
        await asyncio.sleep(0.1)
        assert fw.ws_events.empty(), "an unexpected extra event reached the framework"
    finally:
        stop.set()
        await asyncio.wait_for(daemon, 10)
        if fw.server is not None:
            await fw.server.close()
        await platform.close()
    return received, platform, sender


def read_stores(data_dir: Path, received: list[Received]) -> Known:
    keys = [OpenId(APP, o).key for o in (GROUP, PERSON1, MEMBER2, C2C2, OPERATOR)]
    keys += [UnionId(PERSON1).key, UnionId(UNION2).key]
    store = LmdbIdentityStore(data_dir / "openid-map.db")
    try:
        with store.read() as view:
            vuins = {key: view.vuin_of(key) for key in keys}
    finally:
        store.close()
    missing = [key for key, vuin in vuins.items() if vuin is None]
    assert not missing, f"never stored: {missing}"
    real_ids = [r.case.d["id"] for r in received
                if r.case.t.endswith("MESSAGE_CREATE") and r.events]
    msg_store = LmdbMsgIdStore(data_dir / "msgid-map.db")
    try:
        with msg_store.read() as view:
            msgids = {real: view.virtual_of(real) for real in real_ids}
    finally:
        msg_store.close()
    assert all(v is not None for v in msgids.values()), msgids
    return Known(vuins={k: v for k, v in vuins.items() if v is not None},
                 msgids={k: v for k, v in msgids.items() if v is not None})


def check_types(event: dict[str, Any]) -> None:
    for name in ("time", "self_id", "user_id", "group_id", "operator_id", "message_id"):
        if name in event:
            assert type(event[name]) is int, (name, event)
            assert event[name] > 0, (name, event)
    if "message_id" in event:
        assert event["message_id"] <= INT32_MAX
    if "sender" in event:
        assert type(event["sender"]["user_id"]) is int


@pytest.mark.parametrize("fmt", ["array", "string"])
@pytest.mark.parametrize("transport", ["gateway", "webhook"])
def test_every_event_type_reaches_the_framework_exactly(
        tmp_path: Path, transport: str, fmt: str) -> None:
    with capture_logs() as logs:
        received, platform, sender = asyncio.run(asyncio.wait_for(
            run_all(tmp_path, transport, fmt), 60))
    known = read_stores(tmp_path / "data", received)

    by_name: dict[str, dict[str, Any]] = {}
    for got in received:
        expected = got.case.expect(known, fmt)
        assert len(got.events) == len(expected), got.case.name
        for event, want in zip(got.events, expected, strict=True):
            check_types(event)
            if want["time"] is NOW:
                low, high = got.window
                assert low <= event["time"] <= high, (got.case.name, event["time"], got.window)
                want = {**want, "time": event["time"]}
            assert event == want, got.case.name
            by_name[got.case.name] = event

    # Message ids: one int32 per platform message, all different.
    message_ids = [e["message_id"] for e in by_name.values() if "message_id" in e]
    assert len(message_ids) == 5 and len(set(message_ids)) == 5

    # One person, one vUIN: the same OpenID as group member, C2C user and friend ...
    person1 = {by_name[n]["user_id"] for n in (
        "group_at", "group_all_plain", "c2c", "group_member_add", "group_member_kick",
        "friend_add", "c2c_msg_reject", "c2c_msg_receive", "interaction_group")}
    # ... and a member OpenID and a C2C OpenID linked by union_openid.
    person2 = {by_name[n]["user_id"] for n in (
        "group_all_mention", "c2c_union", "group_member_leave", "friend_del",
        "interaction_c2c")}
    assert len(person1) == 1 and len(person2) == 1
    distinct = {known.v(GROUP), *person1, *person2, known.v(OPERATOR), SELF_ID}
    assert len(distinct) == 5

    # Unknown event types were logged, and nothing came of them (the exact sequence above).
    not_forwarded = [entry["type"] for entry in logs
                     if entry["event"] == "[message] not forwarded"]
    assert not_forwarded == ["GUILD_CREATE", "SOMETHING_NEW_2030"]

    # Interactions were acknowledged to the platform with code 0, each once.
    acks = [(i, body) for i, body, _ in platform.interaction_acks]
    assert acks == [(f"interaction-{transport[0]}-1", {"code": 0}),
                    (f"interaction-{transport[0]}-2", {"code": 0})]
    if transport == "webhook":
        # Unknown event types were answered like any other: 200 {"op":12}.
        assert [d.status for d in sender.deliveries] == [200] * len(received)
    else:
        assert sender.deliveries == []
