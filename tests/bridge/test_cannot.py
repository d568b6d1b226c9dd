"""One answer for what the platform cannot do (issue 33 item 7): every OneBot v11 and
go-cqhttp action is either carried out or refused with retcode 103 and its own reason; 1404
is only for a name nobody has heard of.

The table (:mod:`gensokyo_idmap.bridge.cannot`) is held to the two lists
(:mod:`gensokyo_idmap.onebot.action_names`), and each refusal is checked through the
ActionService on real stores against the emulated platform, as test_outbound drives it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gensokyo_idmap.bridge.cannot import CANNOT, refusal
from gensokyo_idmap.onebot.action_names import (
    GO_CQHTTP_ACTIONS,
    KNOWN_ACTIONS,
    ONEBOT_V11_ACTIONS,
)
from gensokyo_idmap.onebot.actions import RETCODE_UNKNOWN_ACTION
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore

from ..conftest import FakeClock
from .test_outbound import Harness, with_daemon

#: What the issue found answering 1404 before: each must now say why it cannot work.
ONCE_UNKNOWN = ("set_group_card", "set_group_leave", "send_like", "get_image", "get_record",
                "get_forward_msg", "send_group_forward_msg", "get_group_msg_history",
                "mark_msg_as_read", "upload_group_file")


def test_the_table_names_only_known_actions_each_with_a_reason() -> None:
    assert set(CANNOT) <= KNOWN_ACTIONS, sorted(set(CANNOT) - KNOWN_ACTIONS)
    for action, reason in CANNOT.items():
        assert reason.strip() == reason and len(reason) > 20, action
        assert refusal(action) == f"{action}: {reason}"
    # the lists are what the standard and go-cqhttp define: spot checks of each
    assert {"set_group_card", "get_cookies", "clean_cache", ".handle_quick_operation"} \
        <= ONEBOT_V11_ACTIONS
    assert {"set_essence_msg", "_send_group_notice", ".get_word_slices", "download_file",
            "get_guild_list"} <= GO_CQHTTP_ACTIONS
    assert set(ONCE_UNKNOWN) <= set(CANNOT)


def test_every_known_action_is_answered_or_refused_and_nothing_refused_is_answered(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore,
        clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        service = h.actions
        # the table and the handlers stay apart: an action carried out is never refused
        assert service.refused == set(CANNOT)
        for listed in (ONEBOT_V11_ACTIONS, GO_CQHTTP_ACTIONS):
            missing = listed - service.handlers.keys()
            assert not missing, f"neither answered nor refused: {sorted(missing)}"
        for action in sorted(KNOWN_ACTIONS):
            answer = await h.call(action)
            assert answer["retcode"] != RETCODE_UNKNOWN_ACTION, (action, answer)
            assert answer["echo"] == "e1"
        unknown = await h.call("get_weather")
        assert (unknown["status"], unknown["retcode"]) == ("failed", RETCODE_UNKNOWN_ACTION)
        assert unknown["message"] == "unsupported action: get_weather"

    with_daemon(scenario, identity_store, msgid_store, clock)


@pytest.mark.parametrize("action", sorted(CANNOT))
def test_each_action_the_platform_cannot_do_answers_103_with_its_own_reason(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock,
        action: str) -> None:
    async def scenario(h: Harness) -> None:
        event = await h.group_message("ROBOT1.0_c")
        answer = await h.call(action, group_id=event["group_id"], user_id=event["user_id"],
                              message_id=event["message_id"], card="x", file="a.jpg")
        assert answer == {"status": "failed", "retcode": 103, "data": None,
                          "message": refusal(action), "wording": refusal(action),
                          "echo": "e1"}
        assert h.platform.api_calls == []  # nothing was tried on the platform

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_get_supported_actions_lists_what_is_carried_out_not_what_is_refused(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore,
        clock: FakeClock) -> None:
    async def scenario(h: Harness) -> None:
        answer = await h.call("get_supported_actions")
        supported = answer["data"]
        assert answer["status"] == "ok" and supported == sorted(supported)
        assert {"send_msg", "get_msg", "delete_msg", "get_supported_actions",
                "bind_identity"} <= set(supported)
        assert not set(supported) & set(CANNOT)
        assert set(supported) | set(CANNOT) == h.actions.handlers.keys()

    with_daemon(scenario, identity_store, msgid_store, clock)


def test_the_users_documentation_lists_exactly_the_actions_of_the_table() -> None:
    """docs/wire-mapping.md "What the platform cannot do" names every refused action, and
    no other, so the page stays true as the table changes."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "wire-mapping.md").read_text("utf-8")
    section = page.split("### What the platform cannot do", 1)[1].split("\n### ", 1)[0]
    table = [line for line in section.splitlines() if line.startswith("| `")]
    named = {name for line in table for name in re.findall(r"`([._a-z]+)`", line.split(" | ")[0])}
    assert named == set(CANNOT), (sorted(named - set(CANNOT)), sorted(set(CANNOT) - named))
