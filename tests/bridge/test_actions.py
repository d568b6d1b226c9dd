"""Answers that agree with each other and with what the platform can do (issue 20 item 5):
group member counts, sends to a chat nobody can name, quick operations the platform lacks
(each action the platform lacks: test_cannot).

Driven like test_outbound: real platform frames through the inbound bridge, actions on the
ActionService, the emulated platform's OpenAPI recording every request."""

from __future__ import annotations

import pytest

from gensokyo_idmap.errors import UnsupportedError
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore

from ..conftest import FakeClock
from .test_outbound import GROUP, GROUP2, USER, USER2, Harness, with_daemon

USER3 = "2F1E2D3C4B5A69788796A5B4C3D2E1F2"


def test_group_list_and_group_info_count_the_same_members(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        for n, (group, user) in enumerate([(GROUP, USER), (GROUP, USER2), (GROUP, USER3),
                                           (GROUP, USER), (GROUP2, USER2)]):
            await h.group_message(f"ROBOT1.0_m{n}", group=group, user=user)
        await h.c2c_message("ROBOT1.0_c", user=USER3)  # a C2C chat is no group
        listed = (await h.call("get_group_list"))["data"]
        assert sorted(group["member_count"] for group in listed) == [1, 3]
        for group in listed:
            info = await h.call("get_group_info", group_id=group["group_id"])
            members = await h.call("get_group_member_list", group_id=group["group_id"])
            assert info["data"] == group
            assert len(members["data"]) == group["member_count"]

    with_daemon(scenario, identity_store, msgid_store, clock)


@pytest.mark.parametrize(("action", "field"), [("send_group_msg", "group_id"),
                                               ("send_private_msg", "user_id"),
                                               ("send_msg", "group_id")])
def test_a_chat_that_is_neither_a_vuin_nor_an_openid_is_refused_not_sent(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock,
        action: str, field: str) -> None:
    async def scenario(h: Harness) -> None:
        await h.group_message("ROBOT1.0_a")
        await h.c2c_message("ROBOT1.0_b")
        for bad in ("general-chat", "A1B2C3", 987654, "987654"):
            refused = await h.call(action, **{field: bad}, message="hi")
            assert (refused["status"], refused["retcode"]) == ("failed", 100), refused
            assert field in refused["message"] and str(bad) in refused["message"]
            assert "not sent" in refused["message"]
        assert h.sends() == []  # nothing reached the platform
        # a well-formed OpenID nobody was seen with yet is the platform's to judge
        fresh = "3F1E2D3C4B5A69788796A5B4C3D2E1F3"
        await h.call(action, **{field: fresh}, message="hi")
        assert len(h.sends()) == 1 and fresh in h.sends()[0][0]

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_a_quick_operation_does_the_reply_and_refuses_the_rest(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.group_message("ROBOT1.0_q")
        both = await h.call(".handle_quick_operation", context=event,
                            operation={"reply": "bye", "at_sender": False, "kick": True,
                                       "ban": "true", "ban_duration": 60})
        assert (both["status"], both["retcode"]) == ("failed", 103), both
        assert "kick a member or mute a member; the reply was sent" in both["message"]
        assert [body["content"] for _, body in h.sends()] == ["bye"]
        alone = await h.call(".handle_quick_operation", context=event,
                             operation={"delete": True})
        assert alone["status"] == "failed" and "recall" in alone["message"]
        assert "reply" not in alone["message"]
        request = {"post_type": "request", "request_type": "friend", "user_id": 2, "flag": "f"}
        approve = await h.call(".handle_quick_operation", context=request,
                               operation={"approve": False})
        assert approve["status"] == "failed" and "answer a request" in approve["message"]
        # what the platform can do is still just ok; false switches ask for nothing
        fine = await h.call(".handle_quick_operation", context=event,
                            operation={"reply": "ok", "at_sender": False, "ban": False})
        assert fine["status"] == "ok" and len(h.sends()) == 2
        # the HTTP POST path runs the same code: its failure is raised to be logged
        with pytest.raises(UnsupportedError, match="mute a member"):
            await h.actions.quick_operation(event, {"ban": True})
        assert len(h.sends()) == 2

    with_daemon(scenario, identity_store, msgid_store, clock)
