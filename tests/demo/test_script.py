"""The demo's script: seeded, so the same seed plays the same conversation; people talk
only where they are members; and the events it makes are what the daemon's parser reads
as the platform's."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap.demo.script import (
    CAST,
    MIN_MEMBERS,
    GroupSay,
    Join,
    Leave,
    PrivateSay,
    conversation,
    event_of,
    openid_of,
    send_line,
    step_line,
)
from gensokyo_idmap.qq.events import (
    C2CMessage,
    GroupMemberEvent,
    GroupMessage,
    parse_dispatch,
    parse_envelope,
)

APP = "102000001"


def steps(seed: int, n: int, pace: float = 2.0) -> list:
    return list(itertools.islice(conversation(seed, pace), n))


def test_the_same_seed_plays_the_same_script_and_another_seed_another() -> None:
    assert steps(5, 200) == steps(5, 200)
    assert steps(5, 200) != steps(6, 200)


@given(st.integers(0, 2**32), st.floats(0, 10))
def test_steps_come_a_pace_apart_and_people_speak_only_where_they_are(seed: int,
                                                                      pace: float) -> None:
    members = {group: set(people) for group, people in CAST.members.items()}
    for step in steps(seed, 150, pace):
        assert pace * 0.5 - 1e-3 <= step.delay <= pace * 1.5 + 1e-3
        action = step.action
        if isinstance(action, GroupSay):
            assert action.person in members[action.group]
        elif isinstance(action, Join):
            assert action.person not in members[action.group]
            members[action.group].add(action.person)
        elif isinstance(action, Leave):
            assert action.person in members[action.group]
            members[action.group].discard(action.person)
            assert len(members[action.group]) >= MIN_MEMBERS


def test_a_long_script_has_every_kind_of_step() -> None:
    kinds = {type(step.action) for step in steps(1, 300)}
    assert kinds == {GroupSay, PrivateSay, Join, Leave}


def test_a_negative_pace_is_refused() -> None:
    with pytest.raises(ValueError, match="pace"):
        next(conversation(1, -1.0))


def test_openids_are_stable_and_distinct() -> None:
    ids = [p.openid for p in CAST.people] + [g.openid for g in CAST.groups]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 and i == i.upper() for i in ids)
    assert openid_of("user:Reimu") == CAST.people[0].openid


def parsed(action, message_id: str = "ROBOT1.0_demo1"):
    t, d = event_of(action, message_id, 1_700_000_000.0)
    return parse_dispatch(parse_envelope({"op": 0, "s": 1, "t": t, "id": "e1", "d": d}), APP)


def test_the_events_are_what_the_daemon_reads_as_the_platform_s() -> None:
    reimu, shrine = CAST.people[0], CAST.groups[0]
    group = parsed(GroupSay(reimu, shrine, "ping", at_bot=True))
    assert isinstance(group, GroupMessage) and group.mentioned_bot
    assert (group.group.openid, group.author.openid, group.content) == (
        shrine.openid, reimu.openid, "ping")
    assert group.message_id == "ROBOT1.0_demo1"
    assert not parsed(GroupSay(reimu, shrine, "hi", at_bot=False)).mentioned_bot
    private = parsed(PrivateSay(reimu, "早上好"))
    assert isinstance(private, C2CMessage) and private.user.openid == reimu.openid
    assert private.content == "早上好"
    for action, t in ((Join(reimu, shrine), "GROUP_MEMBER_ADD"),
                      (Leave(reimu, shrine), "GROUP_MEMBER_REMOVE")):
        event = parsed(action)
        assert isinstance(event, GroupMemberEvent) and event.event_type == t
        assert (event.group.openid, event.member.openid) == (shrine.openid, reimu.openid)


def test_lines_name_people_and_groups() -> None:
    reimu, shrine = CAST.people[0], CAST.groups[0]
    assert step_line(GroupSay(reimu, shrine, "ping", at_bot=True), 0).endswith(
        "  [Hakurei Shrine] Reimu: @bot ping")
    assert step_line(PrivateSay(reimu, "hi"), 0).endswith("  [private] Reimu: hi")
    assert step_line(Leave(reimu, shrine), 0).endswith("  [Hakurei Shrine] * Reimu leaves")
    names = CAST.names()
    sent = send_line("POST", f"/v2/groups/{shrine.openid}/messages",
                     {"msg_type": 0, "content": "pong"}, 200, {"id": "B1"}, names, 0)
    assert sent is not None and sent.endswith("  [Hakurei Shrine] bot: pong")
    refused = send_line("POST", f"/v2/users/{reimu.openid}/messages",
                        {"msg_type": 0, "content": "x"}, 400,
                        {"code": 22009, "message": "msg limit exceed"}, names, 0)
    assert refused is not None and refused.endswith(
        "  [private → Reimu] bot: x  (refused 400: 22009 msg limit exceed)")
    recall = send_line("DELETE", f"/v2/groups/{shrine.openid}/messages/BOT000001", None,
                       200, None, names, 0)
    assert recall is not None and recall.endswith("bot: recalls BOT000001")
    media = send_line("POST", f"/v2/groups/{shrine.openid}/messages",
                      {"msg_type": 7, "media": {"file_info": "F"}}, 200, {}, names, 0)
    assert media is not None and media.endswith("bot: <media>")
    assert send_line("POST", "/app/getAppAccessToken", {}, 200, {}, names, 0) is None
