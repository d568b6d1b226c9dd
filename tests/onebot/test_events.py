"""OneBot v11 event objects: the reference examples field for field, and the type rules."""

from __future__ import annotations

import json

import pytest

from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.onebot.events import (
    friend_add,
    group_decrease,
    group_increase,
    group_message,
    heartbeat,
    lifecycle,
    private_message,
)
from gensokyo_idmap.onebot.message import Segment, parse_cq
from gensokyo_idmap.onebot.status import UNKNOWN, BotStatus


def test_group_message_matches_the_reference_example_in_string_form() -> None:
    event = group_message(self_id=10001, time=1700000000, message_id=1001, group_id=20002,
                          user_id=30003, segments=parse_cq("[CQ:at,qq=10001] ping"),
                          fmt="string", nickname="alice")
    assert event == json.loads(
        '{"time":1700000000,"self_id":10001,"post_type":"message","message_type":"group",'
        '"sub_type":"normal","message_id":1001,"group_id":20002,"user_id":30003,'
        '"anonymous":null,"message":"[CQ:at,qq=10001] ping",'
        '"raw_message":"[CQ:at,qq=10001] ping","font":0,"sender":{"user_id":30003,'
        '"nickname":"alice","card":"","sex":"unknown","age":0,"area":"","level":"",'
        '"role":"member","title":""}}')


def test_private_message_matches_the_reference_example_in_array_form() -> None:
    event = private_message(self_id=10001, time=1700000000, message_id=1002, user_id=30003,
                            segments=[Segment.text("hello")], nickname="alice")
    assert event == json.loads(
        '{"time":1700000000,"self_id":10001,"post_type":"message","message_type":"private",'
        '"sub_type":"friend","message_id":1002,"user_id":30003,'
        '"message":[{"type":"text","data":{"text":"hello"}}],"raw_message":"hello","font":0,'
        '"sender":{"user_id":30003,"nickname":"alice","sex":"unknown","age":0}}')


def test_raw_message_is_escaped_cq_in_both_forms() -> None:
    segments = [Segment.text("a[b]&c"), Segment("image", (("file", "x,y"),))]
    event = group_message(self_id=1, time=1, message_id=1, group_id=2, user_id=3,
                          segments=segments)
    assert event["raw_message"] == "a&#91;b&#93;&amp;c[CQ:image,file=x&#44;y]"
    assert event["message"][1] == {"type": "image", "data": {"file": "x,y"}}


def test_extension_fields_are_added() -> None:
    event = group_message(self_id=1, time=1, message_id=1, group_id=2, user_id=3,
                          segments=[], extra={"real_user_id": "0F1E"})
    assert event["real_user_id"] == "0F1E" and event["message"] == []


def test_notices_and_meta_events() -> None:
    assert group_increase(self_id=1, time=5, group_id=2, user_id=3, operator_id=4) == {
        "time": 5, "self_id": 1, "post_type": "notice", "notice_type": "group_increase",
        "sub_type": "approve", "group_id": 2, "user_id": 3, "operator_id": 4}
    assert group_decrease(self_id=1, time=5, group_id=2, user_id=1, operator_id=4,
                          sub_type="kick_me")["sub_type"] == "kick_me"
    assert friend_add(self_id=1, time=5, user_id=3) == {
        "time": 5, "self_id": 1, "post_type": "notice", "notice_type": "friend_add",
        "user_id": 3}
    assert lifecycle(self_id=1, time=5, sub_type="connect")["meta_event_type"] == "lifecycle"
    assert heartbeat(self_id=1, time=5, interval_ms=5000,
                     status=BotStatus(online=True, good=True)) == {
        "time": 5, "self_id": 1, "post_type": "meta_event", "meta_event_type": "heartbeat",
        "status": {"online": True, "good": True}, "interval": 5000}
    # good implies online (OneBot v11); a bot whose state is not known is not said online
    for status, said in ((BotStatus(online=False, good=True), {"online": False, "good": False}),
                         (BotStatus(online=True, good=False), {"online": True, "good": False}),
                         (UNKNOWN, {"online": None, "good": False})):
        assert heartbeat(self_id=1, time=5, interval_ms=5000, status=status)["status"] == said


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"message_id": 2**31}, "message_id"), ({"message_id": 0}, "message_id"),
     ({"group_id": 0}, "group_id"), ({"user_id": True}, "user_id"),
     ({"self_id": 2**63}, "self_id")],
)
def test_ids_outside_their_types_are_refused(kwargs: dict[str, int], field: str) -> None:
    base = {"self_id": 1, "time": 1, "message_id": 1, "group_id": 2, "user_id": 3}
    with pytest.raises(BadInputError) as err:
        group_message(**(base | kwargs), segments=[])  # type: ignore[arg-type]
    assert err.value.field == field
