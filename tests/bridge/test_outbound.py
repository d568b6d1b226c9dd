"""Outbound actions on real stores against the emulated platform's OpenAPI.

Each test feeds real platform frames through the inbound bridge (so vUINs, ``last_seen`` and
the msgid map hold what a running daemon would), then calls actions on the ActionService
and checks the exact OpenAPI requests the emulator recorded and the OneBot responses.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest
from aiohttp import ClientSession
from structlog.testing import capture_logs

from gensokyo_idmap import __version__
from gensokyo_idmap.bots import resolve_bots
from gensokyo_idmap.bridge.actions import ActionService
from gensokyo_idmap.bridge.inbound import BridgeSettings, InboundBridge
from gensokyo_idmap.config import Config
from gensokyo_idmap.health import known_healthy
from gensokyo_idmap.identity import OpenId, RUin
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.link_status import BotWatch
from gensokyo_idmap.runtime.msgid import DEFAULT_MSGID_TTL_SECONDS, MAX_CONTENT_BYTES, MsgIdMap
from gensokyo_idmap.bridge import outbound
from gensokyo_idmap.bridge.outbound import OutboundSender, OutboundSettings
from gensokyo_idmap.runtime.replies import ReplyBudget
from gensokyo_idmap.qq.events import parse_dispatch, parse_envelope
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.base import MsgRecord
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore

from gensokyo_idmap.bridge.chat import Chat
from gensokyo_idmap.testing.platform_emulator import (
    APP,
    RECALL_NOT_FOUND,
    SECRET,
    EmulatedPlatform,
    channel_message,
    group_message,
    mentioning,
)

from ..conftest import FakeClock

SELF = int(APP)
GROUP = "A1B2C3D4E5F60718293A4B5C6D7E8F90"
GROUP2 = "B1B2C3D4E5F60718293A4B5C6D7E8F91"
USER = "0F1E2D3C4B5A69788796A5B4C3D2E1F0"
USER2 = "1F1E2D3C4B5A69788796A5B4C3D2E1F1"


@dataclass
class Harness:
    platform: EmulatedPlatform
    bridge: InboundBridge
    actions: ActionService
    clock: FakeClock
    seq: int = 0

    async def inbound(self, kind: str, d: dict[str, Any]) -> dict[str, Any]:
        self.seq += 1
        raw = {"op": 0, "s": self.seq, "t": kind, "id": f"{kind}:{self.seq}", "d": d}
        event = parse_dispatch(parse_envelope(json.dumps(raw).encode()), APP)
        [onebot] = await self.bridge.translate(event)
        return onebot

    async def group_message(self, real_id: str, group: str = GROUP,
                            user: str = USER) -> dict[str, Any]:
        return await self.inbound("GROUP_AT_MESSAGE_CREATE", {
            "id": real_id, "content": " ping", "timestamp": "2025-01-01T12:00:00+08:00",
            "group_openid": group, "author": {"id": user, "member_openid": user}})

    async def c2c_message(self, real_id: str, user: str = USER) -> dict[str, Any]:
        return await self.inbound("C2C_MESSAGE_CREATE", {
            "id": real_id, "content": "ping", "timestamp": "2025-01-01T12:00:00+08:00",
            "author": {"id": user, "user_openid": user}})

    async def call(self, action: str, **params: Any) -> dict[str, Any]:
        return await self.actions({"action": action, "params": params, "echo": "e1"})

    def sends(self) -> list[tuple[str, Any]]:
        return self.platform.api_requests("POST", "/messages")


def with_daemon(scenario: Callable[[Harness], Awaitable[None]], identity_store: LmdbIdentityStore,
                msgid_store: LmdbMsgIdStore, clock: FakeClock, *,
                op_userid_type: Any = "vuin", unsupported_segments: Any = "refuse",
                keep_content: bool = True, send_error: bool = False,
                reads_off_loop: bool = False) -> None:
    async def main() -> None:
        platform = EmulatedPlatform()
        await platform.start()
        try:
            async with ClientSession() as session:
                api = platform.openapi(session, backoff_seconds=0.01, timeout_seconds=1.0)
                graph = IdentityGraph(identity_store, clock=clock)
                msgids = MsgIdMap(msgid_store, clock=clock, keep_content=keep_content)
                bridge = InboundBridge(graph, msgids, BridgeSettings(
                    app_id=APP, self_id=SELF, op_userid_type=op_userid_type), clock=clock)
                sender = OutboundSender(graph, msgids, api, OutboundSettings(
                    app_id=APP, self_id=SELF, op_userid_type=op_userid_type,
                    unsupported_segments=unsupported_segments,
                    send_error=send_error, reads_off_loop=reads_off_loop))
                # its status as a daemon's: the platform side by /readyz's rule (a webhook
                # bot whose token the emulator issues), its stores by their own account
                [bot] = resolve_bots(Config.model_validate(
                    {"bot": {"app_id": APP, "secret": SECRET}}))
                watch = BotWatch(bot, stores_healthy=partial(
                    known_healthy, (identity_store, msgid_store)))
                watch.tokens, watch.webhook = api.tokens, True
                harness = Harness(platform, bridge, ActionService(
                    sender, clock=clock, status=watch.onebot_status), clock)
                await asyncio.wait_for(scenario(harness), 20)
        finally:
            await platform.close()

    asyncio.run(main())


def test_send_group_msg_replies_to_the_latest_message_of_that_group(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.group_message("ROBOT1.0_g1")
        await h.group_message("ROBOT1.0_other", group=GROUP2)
        response = await h.call("send_group_msg", group_id=event["group_id"], message="pong")
        assert response["status"] == "ok" and response["echo"] == "e1"
        assert h.sends() == [(f"/v2/groups/{GROUP}/messages", {
            "msg_type": 0, "content": "pong", "msg_seq": 1, "msg_id": "ROBOT1.0_g1"})]
        virtual = response["data"]["message_id"]
        record = h.bridge.msgids.lookup(virtual)
        assert record is not None and (record.real_id, record.direction) == ("BOT000001", "out")
        assert (record.chat_kind, record.target) == ("group", GROUP)

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_send_private_msg_and_send_msg_forms(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.c2c_message("ROBOT1.0_c1")
        user = event["user_id"]
        assert (await h.call("send_private_msg", user_id=user, message="a"))["status"] == "ok"
        # NoneBot's form: send_msg with message_type and an array message; ids as text
        await h.call("send_msg", message_type="private", user_id=str(user),
                     message=[{"type": "text", "data": {"text": "b"}}])
        await h.call("send_msg", user_id=user, message="c")  # type inferred: private
        assert h.sends() == [
            (f"/v2/users/{USER}/messages", {"msg_type": 0, "content": text, "msg_seq": seq,
                                            "msg_id": "ROBOT1.0_c1"})
            for seq, text in ((1, "a"), (2, "b"), (3, "c"))]

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_reply_segment_names_the_replied_message_and_cq_strings_work(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        first = await h.group_message("ROBOT1.0_first")
        await h.group_message("ROBOT1.0_second")
        response = await h.call(
            "send_group_msg", group_id=first["group_id"],
            message=f"[CQ:reply,id={first['message_id']}]x &amp; [CQ:at,qq={first['user_id']}]")
        assert response["status"] == "ok", response
        [(_, body)] = h.sends()
        assert body["msg_id"] == "ROBOT1.0_first"
        assert body["content"] == f'x & <qqbot-at-user id="{USER}" />'
        # a reply id that is no int32 is the framework's mistake: refused, naming it
        for bad in ("abc", "0", "2147483648", "-5"):
            refused = await h.call("send_group_msg", group_id=first["group_id"],
                                   message=[{"type": "reply", "data": {"id": bad}},
                                            {"type": "text", "data": {"text": "x"}}])
            assert (refused["status"], refused["retcode"]) == ("failed", 100), refused
            assert "message[0].id" in refused["message"] and repr(bad) in refused["message"]
        assert len(h.sends()) == 1  # none of those went out

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_a_reply_to_what_cannot_be_answered_is_sent_without_the_quote_and_says_why(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    """Issue 33 item 8: NoneBot's ``reply_message=True`` on a message past the message-id
    TTL, or a reply naming one of the bot's own messages (or a message of another chat),
    still sends: without the quote, answering what the usual rule picks (the newest message
    of the chat with replies left), and a warning names the id and why."""
    async def scenario(h: Harness) -> None:
        old = await h.group_message("ROBOT1.0_old")
        clock.advance(DEFAULT_MSGID_TTL_SECONDS + 1)  # ROBOT1.0_old is past its TTL now
        elsewhere = await h.group_message("ROBOT1.0_elsewhere", group=GROUP2)
        newest = await h.group_message("ROBOT1.0_newest")
        group = newest["group_id"]
        mine = (await h.call("send_group_msg", group_id=group, message="mine"))["data"]
        cases = [(old["message_id"], "unknown or expired"),
                 (99999, "unknown or expired"),  # an id the map never held
                 (mine["message_id"], "the bot's own message"),
                 (elsewhere["message_id"], "a message of another chat")]
        for reply_to, why in cases:
            with capture_logs() as logs:
                sent = await h.call("send_group_msg", group_id=group,
                                    message=f"[CQ:reply,id={reply_to}]pong")
            assert sent["status"] == "ok", (why, sent)
            path, body = h.sends()[-1]
            assert path == f"/v2/groups/{GROUP}/messages"
            assert (body["content"], body["msg_id"]) == ("pong", "ROBOT1.0_newest"), why
            [warning] = [log for log in logs if log["log_level"] == "warning"]
            assert warning["event"] == "[message] reply sent without its quote"
            assert (warning["reply_to"], warning["reason"]) == (reply_to, why)
            # what get_msg shows of the answer is what was sent: no quote
            got = (await h.call("get_msg", message_id=sent["data"]["message_id"]))["data"]
            assert got["message"] == [{"type": "text", "data": {"text": "pong"}}], got
        # one reply after another to the same message: msg_seq counts on (the budget's rule)
        assert [body["msg_seq"] for _, body in h.sends()] == [1, 2, 3, 4, 5]

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_reply_window_and_five_replies_per_message(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        older = await h.group_message("ROBOT1.0_older")
        clock.advance(1)
        await h.group_message("ROBOT1.0_newer")
        for _ in range(7):
            response = await h.call("send_group_msg", group_id=older["group_id"], message="r")
            assert response["status"] == "ok", response
        used = [(body["msg_id"], body["msg_seq"]) for _, body in h.sends()]
        assert used == [("ROBOT1.0_newer", n) for n in range(1, 6)] + [
            ("ROBOT1.0_older", 1), ("ROBOT1.0_older", 2)]
        clock.advance(5 * 60)  # both are now outside the group window
        late = await h.call("send_group_msg", group_id=older["group_id"], message="late")
        assert late["status"] == "failed" and late["retcode"] == 103
        assert "40034105" in late["wording"]  # the platform's own refusal, not a fake ok
        assert "msg_id" not in h.sends()[-1][1] and "event_id" not in h.sends()[-1][1]

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_the_budget_handed_in_is_the_one_counted_even_while_empty(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore) -> None:
    """The daemon's budget (its ``msg_seq`` offset, each bot's own count) is the sender's
    from the start: an empty budget has no length, and was once taken for none (a fresh
    one, offset 0, counted instead)."""
    budget = ReplyBudget(seq_base=7000)
    assert not budget  # empty: what ``budget or ReplyBudget()`` mistook for none
    sender = OutboundSender(IdentityGraph(identity_store), MsgIdMap(msgid_store), None,
                            OutboundSettings(app_id=APP, self_id=SELF), budget)
    assert sender.budget is budget


def test_c2c_window_is_an_hour_and_events_give_an_event_id(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.c2c_message("ROBOT1.0_c1")
        clock.advance(59 * 60)
        await h.call("send_private_msg", user_id=event["user_id"], message="still")
        assert h.sends()[-1][1]["msg_id"] == "ROBOT1.0_c1"
        clock.advance(2 * 60)
        await h.inbound("FRIEND_ADD", {"openid": USER, "timestamp": 1700000000})
        response = await h.call("send_private_msg", user_id=event["user_id"], message="hi")
        assert response["status"] == "ok", response
        body = h.sends()[-1][1]
        assert body["event_id"] == f"FRIEND_ADD:{h.seq}" and "msg_id" not in body

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_media_markdown_and_keyboard(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.group_message("ROBOT1.0_m")
        group = event["group_id"]
        response = await h.call("send_group_msg", group_id=group, message=[
            {"type": "text", "data": {"text": "look"}},
            {"type": "image", "data": {"file": "https://example.com/a.png"}},
            {"type": "image", "data": {"file": "base64://aGVsbG8="}}])
        assert response["status"] == "ok", response
        uploads = h.platform.api_requests("POST", "/files")
        assert uploads == [
            (f"/v2/groups/{GROUP}/files",
             {"file_type": 1, "srv_send_msg": False, "url": "https://example.com/a.png"}),
            (f"/v2/groups/{GROUP}/files",
             {"file_type": 1, "srv_send_msg": False, "file_data": "aGVsbG8="})]
        assert [body for _, body in h.sends()] == [
            {"msg_type": 7, "content": "look", "msg_seq": 1, "msg_id": "ROBOT1.0_m",
             "media": {"file_info": "FILEINFO1"}},
            {"msg_type": 7, "content": " ", "msg_seq": 2, "msg_id": "ROBOT1.0_m",
             "media": {"file_info": "FILEINFO2"}}]
        md = await h.call("send_group_msg", group_id=group, message=[
            {"type": "markdown", "data": {"content": "# hi"}},
            {"type": "keyboard", "data": {"id": "kb1"}}])
        assert md["status"] == "ok", md
        assert h.sends()[-1][1] == {"msg_type": 2, "content": "", "msg_seq": 3,
                                    "msg_id": "ROBOT1.0_m", "markdown": {"content": "# hi"},
                                    "keyboard": {"id": "kb1"}}
        local = await h.call("send_group_msg", group_id=group,
                             message="[CQ:image,file=file:///etc/passwd]")
        assert local["retcode"] == 100 and "local files" in local["message"]
        assert len(h.platform.api_requests("POST", "/files")) == 2  # nothing uploaded for it

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_identity_choice_explicit_last_seen_alias_and_errors(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.c2c_message("ROBOT1.0_c1")
        await h.c2c_message("ROBOT1.0_c2", user=USER2)
        user = event["user_id"]
        graph = h.bridge.graph
        # explicit openid param wins over the vUIN's own identity
        await h.call("send_private_msg", user_id=user, openid=USER2, message="x")
        assert h.sends()[-1][0] == f"/v2/users/{USER2}/messages"
        # a bare OpenID as user_id is the explicit identity too
        await h.call("send_private_msg", user_id=USER2, message="y")
        assert h.sends()[-1][0] == f"/v2/users/{USER2}/messages"
        # an rUIN names the person it is bound to
        await graph.bind(RUin("QQ", 0, "2870338968"), user)
        await h.call("send_private_msg", user_id="rUIN-QQ-0-2870338968", message="z")
        assert h.sends()[-1][0] == f"/v2/users/{USER}/messages"
        # after a rebind the old number is an alias of the new one
        fresh = (await graph.resolve([OpenId(APP, "C" * 32)])).vuin
        await graph.rebind(user, fresh)
        assert (await h.call("send_private_msg", user_id=user, message="w"))["status"] == "ok"
        assert h.sends()[-1][0].startswith("/v2/users/")
        unknown = await h.call("send_private_msg", user_id=987654, message="?")
        assert (unknown["status"], unknown["retcode"]) == ("failed", 100)
        assert "987654" in unknown["message"]
        # a vUIN whose only identity belongs to another AppID has nothing usable here
        other = (await graph.resolve([OpenId("999", USER)])).vuin
        useless = await h.call("send_private_msg", user_id=other, message="?")
        assert useless["retcode"] == 100 and f"vUIN {other}" in useless["message"]
        assert "OpenID of QQ AppID" in useless["message"]
        sends_before = len(h.sends())
        bad = await h.call("send_private_msg", user_id=True, message="?")
        assert bad["retcode"] == 100 and "user_id" in bad["message"]
        missing = await h.call("send_group_msg", message="?")
        assert missing["retcode"] == 100 and "group_id" in missing["message"]
        empty = await h.call("send_private_msg", user_id=user, message="")
        assert empty["retcode"] == 100 and "empty" in empty["message"]
        assert len(h.sends()) == sends_before  # refused before reaching the platform

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_a_resolved_target_stands_only_while_the_graph_is_unchanged(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    """Sends to one vUIN resolve it once while nothing is committed to the graph; a bind
    that changes its identities is seen by the very next send."""
    async def scenario(h: Harness) -> None:
        first = await h.c2c_message("ROBOT1.0_c1")
        second = await h.c2c_message("ROBOT1.0_c2", user=USER2)
        for text in ("a", "b"):
            assert (await h.call("send_private_msg", user_id=first["user_id"],
                                 message=text))["status"] == "ok"
            assert h.sends()[-1][0] == f"/v2/users/{USER}/messages"
        # the first person's only OpenID moves to the second: the first vUIN is an alias
        # of the second now, whose identity that spoke last is USER2
        await h.call("bind_identity", key=USER, vuin=second["user_id"])
        assert (await h.call("send_private_msg", user_id=first["user_id"],
                             message="c"))["status"] == "ok"
        assert h.sends()[-1][0] == f"/v2/users/{USER2}/messages"
        # USER2 moves on to someone new: USER is all the second vUIN has left
        fresh = (await h.bridge.graph.resolve([OpenId(APP, "C" * 32)])).vuin
        await h.bridge.graph.bind(OpenId(APP, USER2), fresh)
        assert (await h.call("send_private_msg", user_id=first["user_id"],
                             message="d"))["status"] == "ok"
        assert h.sends()[-1][0] == f"/v2/users/{USER}/messages"

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_platform_errors_retries_and_timeouts(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.group_message("ROBOT1.0_e")
        group = event["group_id"]
        h.platform.fail_next = [(400, {"code": 11255, "message": "invalid request"})]
        refused = await h.call("send_group_msg", group_id=group, message="a")
        assert (refused["status"], refused["retcode"]) == ("failed", 103)
        assert "11255" in refused["wording"] and "invalid request" in refused["wording"]
        assert len(h.sends()) == 1  # a 4xx is not retried
        h.platform.fail_next = [(500, {"code": 1, "message": "busy"}),
                                (503, {"code": 1, "message": "busy"})]
        retried = await h.call("send_group_msg", group_id=group, message="b")
        assert retried["status"] == "ok", retried
        tries = [body for _, body in h.sends()[1:]]
        assert len(tries) == 3 and all(body == tries[0] for body in tries)  # same msg_seq
        h.platform.delay_next = [2.0, 2.0, 2.0]  # every attempt outlives the 1 s timeout
        slow = await h.call("send_group_msg", group_id=group, message="c")
        assert slow["status"] == "failed" and "TimeoutError" in slow["wording"]
        h.platform.reject_next_token = False
        h.platform.tokens_issued += 1  # the platform replaced the token: a 401, then a retry
        after_401 = await h.call("send_group_msg", group_id=group, message="d")
        assert after_401["status"] == "ok", after_401

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_delete_msg_and_get_msg(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.group_message("ROBOT1.0_d")
        sent = await h.call("send_group_msg", group_id=event["group_id"], message="oops")
        virtual = sent["data"]["message_id"]
        got = await h.call("get_msg", message_id=virtual)
        assert got["data"]["message_type"] == "group" and got["data"]["message_id"] == virtual
        assert got["data"]["sender"] == {"user_id": SELF, "nickname": ""}
        assert (await h.call("delete_msg", message_id=virtual))["status"] == "ok"
        assert h.platform.api_requests("DELETE") == [
            (f"/v2/groups/{GROUP}/messages/BOT000001", None)]
        theirs = await h.call("delete_msg", message_id=event["message_id"])
        assert theirs["retcode"] == 100 and "only messages the bot sent" in theirs["message"]
        again = await h.call("delete_msg", message_id=virtual)  # the platform says not found
        assert again["retcode"] == 103 and "306004" in again["wording"]
        assert (await h.call("get_msg", message_id=12345))["retcode"] == 100
        assert (await h.call("get_msg", message_id="x"))["retcode"] == 100

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_a_second_recall_or_one_of_a_message_never_sent_is_a_failure_naming_the_platforms_word(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    """The platform answers 404 to a recall of a message recalled already or never sent by
    the bot (issue 33 item 10): the framework gets retcode 103 with the platform's code and
    message, in groups and in channels."""
    async def scenario(h: Harness) -> None:
        event = await h.group_message("ROBOT1.0_twice")
        channel = await h.inbound("AT_MESSAGE_CREATE", channel_message(1))
        for chat, field in ((event, "group_id"), (channel, "group_id")):
            sent = await h.call("send_group_msg", group_id=chat[field], message="oops")
            virtual = sent["data"]["message_id"]
            assert (await h.call("delete_msg", message_id=virtual))["status"] == "ok"
            again = await h.call("delete_msg", message_id=virtual)
            word = f"delete_msg: platform code {RECALL_NOT_FOUND}: message not found"
            assert again == {"status": "failed", "retcode": 103, "data": None,
                             "message": word, "wording": word, "echo": "e1"}
        assert len(h.platform.recalled) == 2
        # a message the map says the bot sent, which the platform never did
        never = await h.bridge.msgids.store_real(
            "BOT999999", Chat(APP, "group", GROUP).context("out"))
        answer = await h.call("delete_msg", message_id=never)
        assert (answer["status"], answer["retcode"]) == ("failed", 103)
        assert f"platform code {RECALL_NOT_FOUND}: message not found" in answer["wording"]
        assert h.platform.api_requests("DELETE")[-1][0] == \
            f"/v2/groups/{GROUP}/messages/BOT999999"

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_get_msg_answers_a_received_message_as_its_event_showed_it(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.inbound("GROUP_AT_MESSAGE_CREATE", {
            "id": "ROBOT1.0_q", "content": " look [x] & see", "group_openid": GROUP,
            "timestamp": "2025-01-01T12:00:00+08:00",
            "author": {"id": USER, "member_openid": USER},
            "attachments": [{"content_type": "image/png", "url": "https://x/a.png"}]})
        clock.advance(30)
        got = await h.call("get_msg", message_id=event["message_id"])
        assert got["status"] == "ok", got
        data = got["data"]
        assert data["message"] == event["message"] and len(data["message"]) == 3
        assert data["raw_message"] == event["raw_message"]
        assert data["sender"] == {"user_id": event["user_id"], "nickname": ""}
        assert (data["user_id"], data["group_id"]) == (event["user_id"], event["group_id"])
        assert (data["time"], data["message_type"], data["message_id"]) == (
            event["time"], "group", event["message_id"])

        private = await h.c2c_message("ROBOT1.0_c")
        got = (await h.call("get_msg", message_id=private["message_id"]))["data"]
        assert got["message"] == private["message"] and got["message_type"] == "private"
        assert got["sender"]["user_id"] == private["user_id"] and "group_id" not in got

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_get_msg_of_a_long_message_answers_its_start_within_the_bound(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        text = "[é]" * 3000  # 12,000 bytes escaped: the event carries it all
        event = await h.inbound("C2C_MESSAGE_CREATE", {
            "id": "ROBOT1.0_long", "content": text, "timestamp": "2025-01-01T12:00:00+08:00",
            "author": {"id": USER, "user_openid": USER}})
        assert event["message"] == [{"type": "text", "data": {"text": text}}]
        got = (await h.call("get_msg", message_id=event["message_id"]))["data"]
        [kept] = got["message"]
        assert text.startswith(kept["data"]["text"]) and len(kept["data"]["text"]) > 1000
        assert len(got["raw_message"].encode()) <= MAX_CONTENT_BYTES

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_get_msg_answers_what_the_bot_sent_with_the_bot_as_its_sender(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.group_message("ROBOT1.0_s")
        message = [{"type": "reply", "data": {"id": str(event["message_id"])}},
                   {"type": "text", "data": {"text": "pong "}},
                   {"type": "at", "data": {"qq": str(event["user_id"])}}]
        sent = await h.call("send_group_msg", group_id=event["group_id"], message=message)
        got = (await h.call("get_msg", message_id=sent["data"]["message_id"]))["data"]
        assert got["message"] == message
        assert got["raw_message"] == f"[CQ:reply,id={event['message_id']}]pong " \
                                     f"[CQ:at,qq={event['user_id']}]"
        assert got["sender"] == {"user_id": SELF, "nickname": ""}
        assert (got["group_id"], got["direction"]) == (event["group_id"], "out")

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_get_msg_of_a_message_stored_before_content_was_kept_answers_what_is_known(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        group_event = await h.group_message("ROBOT1.0_g")
        private = await h.c2c_message("ROBOT1.0_c")
        now = int(clock() * 1000)
        # what an older daemon wrote: the records alone, no author, no content
        msgid_store.write_sync(lambda view: [view.put_record(MsgRecord(
            vid, real, APP, kind, target, "in", now, now + 60_000)) for vid, real, kind, target
            in ((50, "OLD_g", "group", GROUP), (51, "OLD_c", "c2c", USER))])
        old_group = (await h.call("get_msg", message_id=50))["data"]
        assert (old_group["sender"], old_group["message"], old_group["raw_message"]) == (
            {}, [], "")
        assert old_group["group_id"] == group_event["group_id"]
        old_private = (await h.call("get_msg", message_id=51))["data"]
        assert old_private["sender"] == {"user_id": private["user_id"], "nickname": ""}
        assert old_private["message"] == []

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_get_msg_without_kept_content_still_names_the_author(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.group_message("ROBOT1.0_k")
        got = (await h.call("get_msg", message_id=event["message_id"]))["data"]
        assert (got["message"], got["raw_message"]) == ([], "")
        assert got["sender"] == {"user_id": event["user_id"], "nickname": ""}
        assert got["group_id"] == event["group_id"]

    with_daemon(scenario, identity_store, msgid_store, clock, keep_content=False)


def test_a_face_in_a_group_refuses_the_send_naming_it_and_nothing_goes_out(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.group_message("ROBOT1.0_f")
        answer = await h.call("send_group_msg", group_id=event["group_id"],
                              message="hi [CQ:face,id=14]")
        assert answer["status"] == "failed" and answer["retcode"] == 100
        assert "message[1].type" in answer["message"] and "face" in answer["message"]
        assert h.sends() == []

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_drop_sends_the_rest_and_logs_a_warning_naming_the_segment(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.c2c_message("ROBOT1.0_p")
        with capture_logs() as logs:
            answer = await h.call("send_private_msg", user_id=event["user_id"],
                                  message="hi [CQ:face,id=14][CQ:poke,qq=1]")
        assert answer["status"] == "ok", answer
        assert [body["content"] for _, body in h.sends()] == ["hi "]
        [warning] = [line for line in logs if line["log_level"] == "warning"]
        assert warning["segments"] == ["message[1] face", "message[2] poke"]
        got = (await h.call("get_msg", message_id=answer["data"]["message_id"]))["data"]
        assert got["raw_message"] == "hi "  # what was sent, not what was left out

    with_daemon(scenario, identity_store, msgid_store, clock, unsupported_segments="drop")


def test_information_actions_answer_from_the_graph(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        # no access token obtained yet (nothing asked the platform): not online, not good
        assert (await h.call("get_status"))["data"] == {"online": False, "good": False}
        a = await h.group_message("m1")
        b = await h.group_message("m2", user=USER2)
        await h.group_message("m3", group=GROUP2)
        c = await h.c2c_message("m4")
        login = await h.call("get_login_info")
        assert login["data"]["user_id"] == SELF
        groups = (await h.call("get_group_list"))["data"]
        assert sorted(g["group_id"] for g in groups) == sorted(
            [a["group_id"], h.bridge.graph.lookup(OpenId(APP, GROUP2))])
        members = (await h.call("get_group_member_list", group_id=a["group_id"]))["data"]
        assert sorted(m["user_id"] for m in members) == sorted([a["user_id"], b["user_id"]])
        assert all(m["group_id"] == a["group_id"] for m in members)
        info = await h.call("get_group_member_info", group_id=a["group_id"], user_id=b["user_id"])
        assert info["data"]["user_id"] == b["user_id"]
        assert info["data"]["last_sent_time"] == int(clock.now)
        assert (await h.call("get_group_info", group_id=a["group_id"]))["data"][
            "member_count"] == 2
        friends = (await h.call("get_friend_list"))["data"]
        assert [f["user_id"] for f in friends] == [c["user_id"]]
        stranger = await h.call("get_stranger_info", user_id=c["user_id"])
        assert stranger["data"]["user_id"] == c["user_id"]
        assert (await h.call("get_stranger_info", user_id=55555))["retcode"] == 100
        # the token obtained (get_login_info asked the platform), the stores working
        assert (await h.call("get_status"))["data"] == {"online": True, "good": True}
        version = (await h.call("get_version_info"))["data"]
        assert version["protocol_version"] == "v11" and version["app_name"] == "gensokyo-idmap"
        assert version["app_version"] == __version__  # its one place
        assert (await h.call("can_send_image"))["data"] == {"yes": True}
        assert (await h.call("can_send_record"))["data"] == {"yes": True}

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_async_unknown_quick_operation_and_identity_extensions(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.group_message("ROBOT1.0_q")
        queued = await h.actions({"action": "send_group_msg_async", "echo": {"seq": 5},
                                  "params": {"group_id": event["group_id"], "message": "later"}})
        assert queued == {"status": "async", "retcode": 1, "data": None, "message": "",
                          "wording": "", "echo": {"seq": 5}}
        await h.actions.drain()
        assert h.sends()[-1][1]["content"] == "later"
        unknown = await h.actions({"action": "get_weather", "echo": 7})
        assert (unknown["status"], unknown["retcode"], unknown["echo"]) == ("failed", 1404, 7)
        broken = await h.actions({"params": {}})
        assert broken["retcode"] == 100 and "action" in broken["message"]
        quick = await h.call(".handle_quick_operation", context=event,
                             operation={"reply": "hey", "at_sender": True})
        assert quick["status"] == "ok", quick
        assert h.sends()[-1][1]["content"] == f'<qqbot-at-user id="{USER}" /> hey'
        bound = await h.call("bind_identity", key="rUIN-QQ-0-12345", vuin=event["user_id"])
        assert bound["data"]["vuin"] == event["user_id"]
        shown = await h.call("get_identity", vuin=event["user_id"])
        assert "rUIN-QQ-0-GEZDGNBV" in shown["data"]["identities"]
        looked = await h.call("get_identity", key=USER)
        assert looked["data"] == {"key": f"openid:QQ:{APP}:{USER}", "vuin": event["user_id"]}
        assert (await h.call("bind_identity", key="5", vuin=1))["retcode"] == 100

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_op_userid_type_ruin_both_ways(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        first = await h.group_message("ROBOT1.0_r1")
        vuin = h.bridge.graph.lookup(OpenId(APP, USER))
        assert vuin is not None and first["user_id"] == vuin  # no rUIN bound yet
        await h.bridge.graph.bind(RUin("QQ", 0, "2870338968"), vuin)
        second = await h.group_message("ROBOT1.0_r2")
        assert second["user_id"] == 2870338968 and second["sender"]["user_id"] == 2870338968
        assert second["group_id"] == h.bridge.graph.lookup(OpenId(APP, GROUP))
        sent = await h.call("send_private_msg", user_id=2870338968, message="to the rUIN")
        assert sent["status"] == "failed"  # no C2C message to reply to, but it got there:
        assert h.sends()[-1][0] == f"/v2/users/{USER}/messages"

    with_daemon(scenario, identity_store, msgid_store, clock, op_userid_type="ruin")


def test_op_userid_type_raw_sends_the_platform_ids(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.group_message("ROBOT1.0_raw")
        assert (event["user_id"], event["group_id"]) == (USER, GROUP)
        assert event["sender"]["user_id"] == USER
        sent = await h.call("send_group_msg", group_id=event["group_id"], message="back")
        assert sent["status"] == "ok" and h.sends()[-1][0] == f"/v2/groups/{GROUP}/messages"

    with_daemon(scenario, identity_store, msgid_store, clock, op_userid_type="raw")


def test_after_a_restart_spent_ids_and_repeated_seqs_are_moved_past(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    """A new process forgets its reply counts: the platform's refusals (a repeated msg_seq,
    a msg_id with its 5 replies spent) make the sender move on instead of failing."""
    async def scenario(h: Harness) -> None:
        older = await h.group_message("ROBOT1.0_old")
        clock.advance(1)
        await h.group_message("ROBOT1.0_new")
        for _ in range(5):  # "before the restart": the newest message's replies are spent
            assert (await h.call("send_group_msg", group_id=older["group_id"],
                                 message="x"))["status"] == "ok"
        h.actions.sender.budget = ReplyBudget()  # the restart forgot the counts (same base)
        again = await h.call("send_group_msg", group_id=older["group_id"], message="y")
        assert again["status"] == "ok", again
        tried = [(body["msg_id"], body["msg_seq"]) for _, body in h.sends()[5:]]
        # seq 1 of the spent id was refused as a repeat, seq 2 as over the limit; then the
        # next newest message took the reply
        assert tried == [("ROBOT1.0_new", 1), ("ROBOT1.0_new", 2), ("ROBOT1.0_old", 1)]
        # an explicit reply to a spent message fails with the platform's word, no wandering
        spent = await h.call("send_group_msg", group_id=older["group_id"],
                             message="[CQ:reply,id=2]z")
        assert spent["status"] == "failed" and "22009" in spent["wording"], spent
        # the last message expired on the platform's side: with nothing else to answer,
        # its reason is what the framework gets (not an 'active message' refusal)
        h.platform.fail_next = [(400, {"code": 304027, "message": "reply msg expired"})]
        expired = await h.call("send_group_msg", group_id=older["group_id"], message="w")
        assert expired["status"] == "failed" and "304027" in expired["wording"], expired


def test_each_process_numbers_msg_seq_from_its_own_offset() -> None:
    from gensokyo_idmap.runtime.replies import seq_base_for_process

    first, later = seq_base_for_process(1_700_000_123), seq_base_for_process(1_700_000_124)
    assert first != later and 0 < first < 2**31 - 1000 and 0 < later < 2**31 - 1000
    budget = ReplyBudget(seq_base=first)
    assert [budget.take("m"), budget.take("m"), budget.take(None)] == [
        first + 1, first + 2, first + 1]


def test_send_error_tells_the_chat_why_a_send_failed(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.group_message("ROBOT1.0_se")
        h.platform.fail_next = [(400, {"code": 40034028, "message": "content not allowed"})]
        refused = await h.call("send_group_msg", group_id=event["group_id"], message="bad")
        assert (refused["status"], refused["retcode"]) == ("failed", 103)  # still a failure
        (_, tried), (path, told) = h.sends()
        assert path == f"/v2/groups/{GROUP}/messages" and tried["content"] == "bad"
        assert told["content"] == "send failed: platform code 40034028: content not allowed"
        assert told["msg_id"] == "ROBOT1.0_se"  # a passive reply, like the send it reports
        # the report refused as well: logged, and the send's own failure is what is answered
        h.platform.fail_next = [(400, {"code": 1, "message": "a"}),
                                (400, {"code": 2, "message": "b"})]
        again = await h.call("send_group_msg", group_id=event["group_id"], message="x")
        assert again["status"] == "failed" and "platform code 1: a" in again["message"]
        assert len(h.sends()) == 4
        # refused before the platform: nothing to report
        await h.call("send_group_msg", group_id="not-a-chat", message="x")
        assert len(h.sends()) == 4

    with_daemon(scenario, identity_store, msgid_store, clock, send_error=True)
    # without send_error, nothing is reported: test_platform_errors_retries_and_timeouts



@pytest.mark.parametrize("unsupported", ["refuse", "drop"])
def test_an_at_the_platform_cannot_carry_follows_unsupported_segments(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock,
        unsupported: str) -> None:
    """An at in C2C (even of the chat partner: nothing promised it away) and at all in a
    group are refused naming the segment, or with drop sent without it and a warning; an
    at of the bot itself is left out as documented, whatever the policy."""
    async def scenario(h: Harness) -> None:
        private = await h.c2c_message("ROBOT1.0_c")
        group = await h.group_message("ROBOT1.0_g")
        with capture_logs() as logs:
            to_partner = await h.call("send_private_msg", user_id=private["user_id"],
                                      message=f"[CQ:at,qq={private['user_id']}] hi")
            to_all = await h.call("send_group_msg", group_id=group["group_id"],
                                  message="[CQ:at,qq=all] hi all")
        if unsupported == "refuse":
            for answer, qq, chat in ((to_partner, private["user_id"], "c2c"),
                                     (to_all, "all", "group")):
                assert (answer["status"], answer["retcode"]) == ("failed", 100), answer
                assert "message[0].qq" in answer["message"], answer
                assert f"at segment of {qq} in a {chat} message" in answer["message"]
            assert h.sends() == []
        else:
            assert to_partner["status"] == to_all["status"] == "ok"
            assert [body["content"] for _, body in h.sends()] == [" hi", " hi all"]
            warnings = [line for line in logs if line["log_level"] == "warning"]
            assert [w["segments"] for w in warnings] == [["message[0] at"]] * 2
            got = (await h.call("get_msg", message_id=to_all["data"]["message_id"]))["data"]
            assert got["raw_message"] == " hi all"  # what was sent
        before = len(h.sends())
        with capture_logs() as logs:
            mine = await h.call("send_group_msg", group_id=group["group_id"],
                                message=f"[CQ:at,qq={SELF}] me")
        assert mine["status"] == "ok", mine
        assert [body["content"] for _, body in h.sends()[before:]] == [" me"]
        assert [line for line in logs if line["log_level"] == "warning"] == []

    with_daemon(scenario, identity_store, msgid_store, clock, unsupported_segments=unsupported)


def test_with_reads_off_loop_only_what_needs_a_read_goes_to_a_worker_thread(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Rule 4: a plain message is planned on the loop; a mention of a member not resolved
    yet is planned on a worker thread, and once the answer is kept (the graph unchanged)
    on the loop again; a target that is kept is answered on the loop too."""
    planned: list[bool] = []  # per plan made: on the loop's thread?
    resolved: list[tuple[str, bool]] = []  # per target resolved from the graph
    plan, resolve = outbound.plan_message, OutboundSender._resolve

    def on_loop() -> bool:
        return threading.current_thread() is threading.main_thread()

    def spied_plan(*args: Any, **kwargs: Any) -> Any:
        planned.append(on_loop())
        return plan(*args, **kwargs)

    def spied_resolve(self: OutboundSender, chat_kind: Any, value: object, field: str,
                      *args: Any) -> Any:
        resolved.append((field, on_loop()))
        return resolve(self, chat_kind, value, field, *args)

    monkeypatch.setattr(outbound, "plan_message", spied_plan)
    monkeypatch.setattr(OutboundSender, "_resolve", spied_resolve)

    async def scenario(h: Harness) -> None:
        group = await h.group_message("ROBOT1.0_p1")
        at = f"[CQ:at,qq={group['user_id']}] hi"
        answers = []
        steps = []
        for message in ("plain", at, at):
            planned.clear()
            resolved.clear()
            answers.append(await h.call("send_group_msg", group_id=group["group_id"],
                                        message=message))
            steps.append((list(planned), list(resolved)))
        assert [answer["status"] for answer in answers] == ["ok"] * 3, answers
        assert [body["content"] for _, body in h.sends()] == [
            "plain", f'<qqbot-at-user id="{USER}" /> hi', f'<qqbot-at-user id="{USER}" /> hi']
        assert steps == [
            ([True], [("group_id", False)]),  # the group resolved off the loop, once
            ([True, False], [("at.qq", False)]),  # the member not kept: planned again off it
            ([True], []),  # both kept: nothing leaves the loop
        ]

    with_daemon(scenario, identity_store, msgid_store, clock, reads_off_loop=True)


def test_an_at_a_framework_got_for_a_mention_goes_back_as_that_members_mention(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    """The round trip (issue 33.5): a member who never spoke, mentioned in a group, reaches
    the framework as an at of their new vUIN; the framework's at of that vUIN, sent back to
    the group, mentions the same member (their OpenID, last seen in that group)."""
    async def scenario(h: Harness) -> None:
        event = await h.inbound("GROUP_MESSAGE_CREATE", mentioning(
            {**group_message(1, GROUP, USER), "content": "hey"}, USER2))
        [_, at] = event["message"]
        assert at["type"] == "at" and at["data"]["qq"] not in (str(SELF),
                                                               str(event["user_id"]))
        answer = await h.call("send_group_msg", group_id=event["group_id"],
                              message=[at, {"type": "text", "data": {"text": " welcome"}}])
        assert answer["status"] == "ok", answer
        [(path, body)] = h.sends()
        assert path == f"/v2/groups/{GROUP}/messages"
        assert body["content"] == f'<qqbot-at-user id="{USER2}" /> welcome'

    with_daemon(scenario, identity_store, msgid_store, clock)
