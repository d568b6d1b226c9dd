"""Guild sends and the go-cqhttp guild actions on real stores and the emulated platform:
what is refused (and that nothing is sent then), the lists when the platform cannot be
asked, quick replies and ``op_userid_type: raw`` in channels."""

from __future__ import annotations

import asyncio
from typing import Any

from structlog.testing import capture_logs

from gensokyo_idmap.bridge.actions import ActionService
from gensokyo_idmap.bridge.outbound import OutboundSender, OutboundSettings
from gensokyo_idmap.identity import RawId
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.runtime.msgid import MsgIdMap
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore
from gensokyo_idmap.testing.platform_emulator import (
    APP,
    CHANNEL,
    GUILD,
    GUILD_USER,
    channel_message,
    direct_message,
    quoting,
)

from ..conftest import FakeClock, run
from .test_outbound import Harness, with_daemon


async def sent_to_channel(h: Harness, action: str, **params: Any) -> Any:
    """The body of the one message ``action`` sent, which went to the channel."""
    answer = await h.call(action, **params)
    assert answer["retcode"] == 0, answer
    [(path, body)] = h.sends()
    assert path == f"/channels/{CHANNEL}/messages"
    return body


def test_refusals_send_nothing(identity_store: LmdbIdentityStore,
                               msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.inbound("AT_MESSAGE_CREATE", channel_message(1))
        # a guild user who never opened a DM with the bot has no DM to send to
        answer = await h.call("send_private_msg", user_id=event["user_id"], message="hi")
        assert answer["retcode"] == 100 and "no direct message session" in answer["message"]
        wrong_guild = await h.call("send_guild_channel_msg", guild_id="7000000002",
                                   channel_id=CHANNEL, message="hi")
        assert wrong_guild["retcode"] == 100 and f"in guild {GUILD}" in wrong_guild["message"]
        no_channel = await h.call("send_guild_channel_msg", guild_id=GUILD, message="hi")
        assert no_channel["retcode"] == 100 and "channel_id" in no_channel["message"]
        base64_image = await h.call("send_group_msg", group_id=event["group_id"],
                                    message="a[CQ:image,file=base64://aGk=]")
        assert base64_image["retcode"] == 100 and "URL" in base64_image["message"]
        assert h.sends() == []

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_quick_reply_in_a_channel_mentions_the_author(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore,
        clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.inbound("AT_MESSAGE_CREATE", channel_message(1))
        body = await sent_to_channel(h, ".handle_quick_operation", context=event,
                                     operation={"reply": "pong"})
        assert (body["content"], body["msg_id"]) == (f"<@{GUILD_USER}> pong",
                                                     channel_message(1)["id"])

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_raw_ids_are_the_platforms_own_and_sends_take_them(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore,
        clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.inbound("AT_MESSAGE_CREATE", channel_message(1))
        assert (event["group_id"], event["user_id"]) == (CHANNEL, GUILD_USER)
        await sent_to_channel(h, "send_group_msg", group_id=f"raw:{CHANNEL}", message="pong")

    with_daemon(scenario, identity_store, msgid_store, clock, op_userid_type="raw")


def test_guild_lists_fall_back_to_what_was_seen(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore,
        clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.inbound("AT_MESSAGE_CREATE", channel_message(1))
        # the platform refuses every attempt: the lists answer what the daemon has seen
        h.platform.fail_next = [(500, {"code": 1, "message": "busy"})] * 6
        guilds = await h.call("get_guild_list")
        assert guilds["data"] == [{"guild_id": GUILD, "guild_name": "",
                                   "guild_display_id": GUILD}]
        channels = await h.call("get_guild_channel_list", guild_id=GUILD)
        [channel] = channels["data"]
        assert (channel["channel_id"], channel["group_id"]) == (CHANNEL, event["group_id"])

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_without_platform_access(identity_store: LmdbIdentityStore,
                                 msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def main() -> None:
        graph = IdentityGraph(identity_store, clock=clock)
        sender = OutboundSender(graph, MsgIdMap(msgid_store, clock=clock), None,
                                OutboundSettings(app_id=APP, self_id=int(APP)))
        actions = ActionService(sender, clock=clock)

        async def call(action: str, **params: Any) -> dict[str, Any]:
            return await actions({"action": action, "params": params})

        assert (await call("get_guild_list"))["data"] == []
        assert (await call("get_guild_channel_list", guild_id=GUILD))["data"] == []
        profile = await call("get_guild_service_profile")
        assert profile["retcode"] == 103 and "platform access" in profile["message"]

    run(asyncio.wait_for(main(), 10))


def test_a_raw_id_that_is_no_channel_is_no_group(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore,
        clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        # a legacy raw id the old daemon stored (a message id, say): no guild places it
        resolved = await h.bridge.graph.resolve([RawId("ROBOT1.0_legacy")])
        answer = await h.call("send_group_msg", group_id=resolved.vuin, message="hi")
        assert answer["retcode"] == 100 and "OpenID" in answer["message"], answer
        assert h.sends() == []

    with_daemon(scenario, identity_store, msgid_store, clock)


#: ids a framework might pass where a platform path segment goes (issue: one reached the
#: C2C endpoint with the bot's token): each is refused, naming its field, and nothing is sent
HOSTILE_IDS = ["../../v2/users/0F1E2D3C4B5A69788796A5B4C3D2E1F0", "../../users/@me",
               "8000001?x=1#", "-1", "8000000001/../..", "..", "%2e%2e", "80 01", "8000000001\n",
               "８０００"]


def test_ids_that_are_no_platform_id_never_shape_a_platform_url(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore,
        clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        await h.inbound("AT_MESSAGE_CREATE", channel_message(1))
        for hostile in HOSTILE_IDS:
            for field, params in (
                    ("channel_id", {"guild_id": GUILD, "channel_id": hostile}),
                    ("channel_id", {"channel_id": hostile}),
                    ("guild_id", {"guild_id": hostile, "channel_id": CHANNEL})):
                answer = await h.call("send_guild_channel_msg", message="hi", **params)
                assert answer["retcode"] == 100, (hostile, answer)
                assert field in answer["message"], (hostile, answer)
            listed = await h.call("get_guild_channel_list", guild_id=hostile)
            assert listed["retcode"] == 100 and "guild_id" in listed["message"], listed
            if hostile.strip() != CHANNEL:  # client input is trimmed: that one is the channel
                answer = await h.call("send_group_msg", group_id=f"raw:{hostile}", message="hi")
                assert answer["retcode"] == 100, (hostile, answer)
        assert h.platform.api_calls == [], h.platform.api_calls

    with_daemon(scenario, identity_store, msgid_store, clock, op_userid_type="raw")


# --- get_msg of channel and DM messages (issue 33.1), quotes sent there (issue 33.4) --------


def test_get_msg_answers_channel_and_dm_messages_as_their_events_showed_them(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore,
        clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.inbound("AT_MESSAGE_CREATE", channel_message(1, "the words"))
        quote = await h.inbound("AT_MESSAGE_CREATE",
                                quoting(channel_message(2, "about that"), channel_message(1)))
        dm = await h.inbound("DIRECT_MESSAGE_CREATE", direct_message(3, "psst"))
        for shown in (event, quote, dm):
            got = await h.call("get_msg", message_id=shown["message_id"])
            assert got["retcode"] == 0, got
            data = got["data"]
            assert (data["message"], data["raw_message"]) == (
                shown["message"], shown["raw_message"]), data
            assert data["sender"] == {"user_id": shown["user_id"], "nickname": ""}
            assert (data["user_id"], data["message_type"]) == (
                shown["user_id"], shown["message_type"])
            assert data.get("group_id") == shown.get("group_id")
        assert "the words" in event["raw_message"]
        assert quote["message"][0] == {"type": "reply",
                                       "data": {"id": str(event["message_id"])}}
        assert dm["message_type"] == "private" and dm["raw_message"] == "psst"

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_get_msg_of_a_channel_message_without_kept_content_names_its_author(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore,
        clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.inbound("AT_MESSAGE_CREATE", channel_message(1, "the words"))
        data = (await h.call("get_msg", message_id=event["message_id"]))["data"]
        assert (data["message"], data["raw_message"]) == ([], "")
        assert data["sender"]["user_id"] == event["user_id"]
        assert data["group_id"] == event["group_id"]

    with_daemon(scenario, identity_store, msgid_store, clock, keep_content=False)


def test_a_reply_in_a_channel_or_dm_quotes_the_message_with_message_reference(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore,
        clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        first = await h.inbound("AT_MESSAGE_CREATE", channel_message(1, "ping"))
        await h.inbound("AT_MESSAGE_CREATE", channel_message(2, "later"))
        body = await sent_to_channel(h, "send_group_msg", group_id=first["group_id"],
                                     message=f"[CQ:reply,id={first['message_id']}]pong")
        assert (body["content"], body["msg_id"]) == ("pong", channel_message(1)["id"])
        assert body["message_reference"] == {"message_id": channel_message(1)["id"],
                                             "ignore_get_message_error": True}
        answer = await h.call("send_group_msg", group_id=first["group_id"], message="x")
        assert "message_reference" not in h.sends()[-1][1]  # no reply segment, no quote
        # a quote of the bot's own message: quoted by its id (the platform shows it: no
        # warning, and get_msg shows the reply), the reply goes to the newest message
        mine = answer["data"]["message_id"]
        with capture_logs() as logs:
            quoting_mine = await h.call("send_group_msg", group_id=first["group_id"],
                                        message=f"[CQ:reply,id={mine}]again")
        _, again = h.sends()[-1]
        assert again["message_reference"]["message_id"] == h.bridge.msgids.real_id_of(mine)
        assert again["msg_id"] == channel_message(2)["id"]
        assert [line for line in logs if line["log_level"] == "warning"] == []
        shown = await h.call("get_msg", message_id=quoting_mine["data"]["message_id"])
        assert shown["data"]["message"][0] == {"type": "reply", "data": {"id": str(mine)}}
        # in a guild DM: the same
        dm = await h.inbound("DIRECT_MESSAGE_CREATE", direct_message(3, "psst"))
        sent = await h.call("send_private_msg", user_id=dm["user_id"],
                            message=f"[CQ:reply,id={dm['message_id']}]hush")
        assert sent["retcode"] == 0, sent
        path, body = h.sends()[-1]
        assert path == "/dms/7000000099/messages"
        assert (body["msg_id"], body["message_reference"]["message_id"]) == (
            direct_message(3)["id"], direct_message(3)["id"])

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_only_a_message_of_that_chat_is_quoted_and_only_on_the_first_part(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore,
        clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.inbound("AT_MESSAGE_CREATE", channel_message(1, "ping"))
        dm = await h.inbound("DIRECT_MESSAGE_CREATE", direct_message(2, "psst"))
        # a reply segment naming the DM, sent to the channel: answered, but no quote
        await h.call("send_group_msg", group_id=event["group_id"],
                     message=f"[CQ:reply,id={dm['message_id']}]pong")
        _, body = h.sends()[-1]
        assert "message_reference" not in body, body
        # two images: two platform messages, the quote shown once, above the first
        images = "".join(f"[CQ:image,file=https://example.com/{n}.png]" for n in (1, 2))
        answer = await h.call("send_group_msg", group_id=event["group_id"],
                              message=f"[CQ:reply,id={event['message_id']}]look{images}")
        assert answer["retcode"] == 0, answer
        first, second = (body for _, body in h.sends()[-2:])
        assert first["message_reference"]["message_id"] == channel_message(1)["id"]
        assert "message_reference" not in second and second["msg_id"] == first["msg_id"]

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_a_reply_to_an_unknown_id_in_a_channel_is_sent_without_the_quote(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore,
        clock: FakeClock) -> None:
    """Issue 33 item 8 in a channel: the send goes, answering the channel's newest message."""
    async def scenario(h: Harness) -> None:
        event = await h.inbound("AT_MESSAGE_CREATE", channel_message(1))
        body = await sent_to_channel(h, "send_group_msg", group_id=event["group_id"],
                                     message="[CQ:reply,id=99999]pong")
        assert (body["content"], body["msg_id"]) == ("pong", channel_message(1)["id"])

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_an_at_of_a_user_a_channel_message_mentioned_goes_back_as_their_mention(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore,
        clock: FakeClock) -> None:
    """The round trip in a channel (issue 33.5), for a user ``mentions[]`` did not list."""
    async def scenario(h: Harness) -> None:
        event = await h.inbound("AT_MESSAGE_CREATE", channel_message(
            1, "ask <@!144115218677563309>"))
        at = event["message"][-1]
        assert at["type"] == "at" and at["data"]["qq"] != str(event["user_id"])
        body = await sent_to_channel(h, "send_group_msg", group_id=event["group_id"],
                                     message=[at, {"type": "text", "data": {"text": " hi"}}])
        assert body["content"] == "<@144115218677563309> hi"

    with_daemon(scenario, identity_store, msgid_store, clock)
