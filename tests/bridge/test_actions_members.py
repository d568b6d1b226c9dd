"""Members, names and roles on every identity backend (LMDB and PostgreSQL): a channel's
members are the guild users seen in it, as a group's are its OpenIDs seen there; the group
list holds the channels seen (``onebot.list_channels_as_groups``); a member answers with
the name and role their latest message carried; ``get_login_info`` names the bot.

Driven like test_outbound: real platform frames through the inbound bridge, actions on the
ActionService, the emulated platform's OpenAPI answering."""

from __future__ import annotations

from typing import Any

from gensokyo_idmap.identity import OpenId, RawId
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore
from gensokyo_idmap.testing.platform_emulator import (
    CHANNEL,
    GUILD_USER,
    channel_message,
    group_message,
)

from .. import store_backends
from ..conftest import FakeClock
from .test_outbound import GROUP, USER, USER2, Harness, with_daemon

# the identity store of each test: one run on LMDB, one on PostgreSQL (fixtures)
open_store, identity_store = store_backends.open_store, store_backends.identity_store

OTHER_USER = "144115218677563301"
MENTIONED = "144115218677563302"
ELSEWHERE = "144115218677563303"
OTHER_CHANNEL = "8000000002"


def ok(answer: dict[str, Any]) -> Any:
    assert (answer["status"], answer["retcode"]) == ("ok", 0), answer
    return answer["data"]


def test_a_channels_members_are_the_guild_users_seen_in_it(
        identity_store: Any, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        admin = await h.inbound("AT_MESSAGE_CREATE", channel_message(
            1, "hi", nick="Boss", roles=("1", "2"), mentions=(MENTIONED,)))
        member = await h.inbound("AT_MESSAGE_CREATE", channel_message(
            2, user=OTHER_USER, username="bob", nick="", roles=("1",)))
        await h.inbound("AT_MESSAGE_CREATE", channel_message(
            3, channel=OTHER_CHANNEL, user=ELSEWHERE))
        channel = admin["group_id"]
        assert member["group_id"] == channel
        assert admin["sender"]["role"] == "admin" and member["sender"]["role"] == "member"

        # the author of a message in the channel is a member, with what it said of them
        info = ok(await h.call("get_group_member_info", group_id=channel,
                               user_id=admin["user_id"]))
        assert (info["group_id"], info["user_id"], info["nickname"], info["card"],
                info["role"]) == (channel, admin["user_id"], "alice", "Boss", "admin")
        assert info["last_sent_time"] == int(clock.now)
        other = ok(await h.call("get_group_member_info", group_id=channel,
                                user_id=member["user_id"]))
        assert (other["nickname"], other["card"], other["role"]) == ("bob", "", "member")
        # someone seen only in another channel, and the channel itself, are no members
        elsewhere = h.bridge.graph.lookup(RawId(ELSEWHERE))
        for user in (elsewhere, channel):
            refused = await h.call("get_group_member_info", group_id=channel, user_id=user)
            assert refused["retcode"] == 100 and "was not seen" in refused["message"]

        # the list: the two authors and the user one of them mentioned (name unknown)
        mentioned = h.bridge.graph.lookup(RawId(MENTIONED))
        members = ok(await h.call("get_group_member_list", group_id=channel))
        assert sorted(m["user_id"] for m in members) == sorted(
            [admin["user_id"], member["user_id"], mentioned])
        assert all(m["group_id"] == channel for m in members)
        [unnamed] = [m for m in members if m["user_id"] == mentioned]
        assert (unnamed["nickname"], unnamed["role"]) == ("", "member")
        # the count is those seen, the same in get_group_info and get_group_list
        group_info = ok(await h.call("get_group_info", group_id=channel))
        assert group_info == {"group_id": channel, "group_name": "", "member_count": 3,
                              "max_member_count": 0}
        # the platform's own channel id names the same chat
        assert ok(await h.call("get_group_info", group_id=f"raw:{CHANNEL}")) == group_info

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_the_group_list_holds_the_channels_seen_unless_switched_off(
        identity_store: Any, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        for n, user in enumerate((USER, USER2)):
            await h.inbound("GROUP_AT_MESSAGE_CREATE", group_message(n, GROUP, user))
        await h.inbound("AT_MESSAGE_CREATE", channel_message(1))
        await h.inbound("AT_MESSAGE_CREATE", channel_message(2, channel=OTHER_CHANNEL,
                                                             user=OTHER_USER))
        await h.inbound("AT_MESSAGE_CREATE", channel_message(3, channel=OTHER_CHANNEL,
                                                             user=ELSEWHERE))
        graph = h.bridge.graph
        group, channel, other = (graph.lookup(OpenId(h.actions.app_id, GROUP)),
                                 graph.lookup(RawId(CHANNEL)), graph.lookup(RawId(OTHER_CHANNEL)))
        listed = ok(await h.call("get_group_list"))
        assert [(g["group_id"], g["member_count"]) for g in listed] == [
            (group, 2), *sorted([(channel, 1), (other, 2)])]
        for entry in listed:
            assert ok(await h.call("get_group_info", group_id=entry["group_id"])) == entry
            members = ok(await h.call("get_group_member_list", group_id=entry["group_id"]))
            assert len(members) == entry["member_count"]
        # guild users are no groups, whatever they were seen in
        assert graph.lookup(RawId(GUILD_USER)) not in [g["group_id"] for g in listed]

        h.actions.list_channels_as_groups = False  # onebot.list_channels_as_groups: false
        assert [g["group_id"] for g in ok(await h.call("get_group_list"))] == [group]
        # the channel itself still answers as a group
        assert ok(await h.call("get_group_info", group_id=channel))["member_count"] == 1

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_a_group_member_has_the_role_and_name_of_their_latest_message(
        identity_store: Any, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.inbound("GROUP_AT_MESSAGE_CREATE", group_message(
            1, GROUP, USER, username="Reimu", role="owner"))
        assert (event["sender"]["nickname"], event["sender"]["card"],
                event["sender"]["role"]) == ("Reimu", "", "owner")
        plain = await h.inbound("GROUP_AT_MESSAGE_CREATE", group_message(2, GROUP, USER2))
        assert (plain["sender"]["nickname"], plain["sender"]["role"]) == ("", "member")
        info = ok(await h.call("get_group_member_info", group_id=event["group_id"],
                               user_id=event["user_id"]))
        assert (info["nickname"], info["role"]) == ("Reimu", "owner")
        # demoted since: the latest message says so
        await h.inbound("GROUP_AT_MESSAGE_CREATE", group_message(
            3, GROUP, USER, username="Reimu H.", role="member"))
        info = ok(await h.call("get_group_member_info", group_id=event["group_id"],
                               user_id=event["user_id"]))
        assert (info["nickname"], info["role"]) == ("Reimu H.", "member")
        # a private message names its author too
        private = await h.inbound("C2C_MESSAGE_CREATE", {
            "id": "ROBOT1.0_c9", "content": "hi", "author": {
                "id": USER, "user_openid": USER, "username": "Reimu"}})
        assert private["sender"]["nickname"] == "Reimu"

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_get_login_info_names_the_bot_as_the_platform_does(
        identity_store: Any, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        h.platform.bot_user["username"] = "Gensokyo Bot"
        login = ok(await h.call("get_login_info"))
        assert login == {"user_id": h.actions.self_id, "nickname": "Gensokyo Bot"}
        ok(await h.call("get_login_info"))
        assert len(h.platform.api_requests("GET", "/users/@me")) == 1

    with_daemon(scenario, identity_store, msgid_store, clock)
