"""QQ frames and events: the reference's examples (qq-platform.md §2.2, §4), the fallbacks,
every rejection naming its field, and property tests that arbitrary or near-valid input
gives an event or a BadInputError, never another exception."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.identity import MAX_OPENID_LEN, OpenId, RawId, UnionId
from gensokyo_idmap.qq.events import (
    Attachment,
    C2CMessage,
    ChannelMessage,
    DirectMessage,
    Envelope,
    FriendEvent,
    GroupMemberEvent,
    GroupMention,
    GroupMessage,
    GroupRobotEvent,
    GuildMember,
    GuildMemberEvent,
    GuildMessageDelete,
    Interaction,
    QQEvent,
    Ready,
    Resumed,
    UnknownEvent,
    parse_dispatch,
    parse_envelope,
)
from gensokyo_idmap.testing.platform_emulator import (
    c2c_message,
    channel_message,
    direct_message,
    group_message,
    guild_member,
    message_delete,
    quoting,
)

APP = "102000001"
GROUP = "A1B2C3D4E5F60718293A4B5C6D7E8F90"
MEMBER = "0F1E2D3C4B5A69788796A5B4C3D2E1F0"
# The reference abbreviates the C2C user as "9A8B..."; the dots are not OpenID characters,
# so the examples below spell it out as 32 hex digits.
C2C_USER = "9A8B7C6D5E4F30211203F4E5D6C7B8A9"

# §4 GROUP_AT_MESSAGE_CREATE, verbatim.
GROUP_AT_RAW = """
{"op":0,"s":7,"t":"GROUP_AT_MESSAGE_CREATE","id":"GROUP_AT_MESSAGE_CREATE:k3j2h1g0f9e8d7",
 "d":{"id":"ROBOT1.0_grpMsg0001","content":" hello","timestamp":"2025-01-01T12:00:00+08:00",
      "group_openid":"A1B2C3D4E5F60718293A4B5C6D7E8F90","group_id":"A1B2C3D4E5F60718293A4B5C6D7E8F90",
      "author":{"id":"0F1E2D3C4B5A69788796A5B4C3D2E1F0","member_openid":"0F1E2D3C4B5A69788796A5B4C3D2E1F0",
                "union_openid":"0F1E2D3C4B5A69788796A5B4C3D2E1F0"},
      "attachments":[{"content_type":"image/png","filename":"a.png","height":100,"width":200,"size":2048,
                      "url":"https://multimedia.nt.qq.com.cn/download?x=1"}],
      "message_scene":{"source":"default"},"message_type":0}}
"""

GROUP_AT: dict[str, Any] = {
    "op": 0, "s": 7, "t": "GROUP_AT_MESSAGE_CREATE",
    "id": "GROUP_AT_MESSAGE_CREATE:k3j2h1g0f9e8d7",
    "d": {
        "id": "ROBOT1.0_grpMsg0001", "content": " hello",
        "timestamp": "2025-01-01T12:00:00+08:00",
        "group_openid": GROUP, "group_id": GROUP,
        "author": {"id": MEMBER, "member_openid": MEMBER, "union_openid": MEMBER},
        "attachments": [{
            "content_type": "image/png", "filename": "a.png", "height": 100, "width": 200,
            "size": 2048, "url": "https://multimedia.nt.qq.com.cn/download?x=1",
        }],
        "message_scene": {"source": "default"}, "message_type": 0,
    },
}

# §4 GROUP_MESSAGE_CREATE: the same shape, with mentions[] (entry shapes as the reference).
GROUP_ALL: dict[str, Any] = {
    "op": 0, "s": 8, "t": "GROUP_MESSAGE_CREATE", "id": "GROUP_MESSAGE_CREATE:a1",
    "d": {
        "id": "ROBOT1.0_grpMsg0002", "content": "@bot hi",
        "timestamp": "2025-01-01T12:00:01+08:00",
        "group_openid": GROUP, "group_id": GROUP,
        "author": {"id": MEMBER, "member_openid": MEMBER, "union_openid": MEMBER},
        "mentions": [
            {"scope": "single", "id": MEMBER, "member_openid": MEMBER, "username": "u",
             "bot": False, "is_you": False},
            {"scope": "single", "id": "B0", "member_openid": "B0", "username": "bot",
             "bot": True, "is_you": True},
        ],
    },
}

# §4 C2C_MESSAGE_CREATE example d, with the user spelled out.
C2C: dict[str, Any] = {
    "op": 0, "s": 9, "t": "C2C_MESSAGE_CREATE", "id": "C2C_MESSAGE_CREATE:b2",
    "d": {
        "id": "ROBOT1.0_c2cMsg0001", "content": "hi", "timestamp": "2025-01-01T12:00:00+08:00",
        "author": {"id": C2C_USER, "user_openid": C2C_USER, "union_openid": C2C_USER},
    },
}

# §4 group robot event example ("A1B2..." / "0F1E..." spelled out).
GROUP_ADD_ROBOT: dict[str, Any] = {
    "op": 0, "s": 3, "t": "GROUP_ADD_ROBOT", "id": "GROUP_ADD_ROBOT:abc123",
    "d": {"group_openid": GROUP, "op_member_openid": MEMBER, "timestamp": 1735700000},
}

# §4 friend / C2C robot events: d = {"openid", "timestamp"}.
FRIEND_ADD: dict[str, Any] = {
    "op": 0, "s": 4, "t": "FRIEND_ADD", "id": "FRIEND_ADD:def456",
    "d": {"openid": C2C_USER, "timestamp": 1735700001},
}

# §4 INTERACTION_CREATE: the documented fields (the reference gives no full example).
INTERACTION_GROUP: dict[str, Any] = {
    "op": 0, "s": 5, "t": "INTERACTION_CREATE", "id": "INTERACTION_CREATE:ghi789",
    "d": {
        "id": "interaction-0001", "type": 11, "scene": "group", "chat_type": 1,
        "timestamp": "2025-01-01T12:00:02+08:00",
        "group_openid": GROUP, "group_member_openid": MEMBER,
        "data": {"type": 11, "resolved": {"button_data": "vote:1", "button_id": "b1",
                                          "user_id": MEMBER, "message_id": "ROBOT1.0_x"}},
        "version": 1, "application_id": APP,
    },
}
INTERACTION_C2C: dict[str, Any] = {
    "op": 0, "s": 6, "t": "INTERACTION_CREATE", "id": "INTERACTION_CREATE:jkl012",
    "d": {
        "id": "interaction-0002", "type": 12, "scene": "c2c", "chat_type": 2,
        "timestamp": "2025-01-01T12:00:03+08:00", "user_openid": C2C_USER,
        "data": {"type": 12, "resolved": {"button_data": "menu", "button_id": "m1"}},
        "version": 1, "application_id": APP,
    },
}

# §2.3 READY and RESUMED.
READY: dict[str, Any] = {
    "op": 0, "s": 1, "t": "READY",
    "d": {"version": 1, "session_id": "1b3f4c2e-0d6a-4c1e-9a55-2f7a6e0c9d11",
          "user": {"id": "11586990140073229091", "username": "gensokyo", "bot": True},
          "shard": [0, 1]},
}
RESUMED: dict[str, Any] = {"op": 0, "s": 12, "t": "RESUMED", "d": ""}

# A group message quoting another, as the emulator builds it (message_type 103).
GROUP_QUOTE = {"op": 0, "s": 9, "t": "GROUP_AT_MESSAGE_CREATE", "id": "GROUP_AT:q",
               "d": quoting(group_message(2), group_message(1))}
EXAMPLES = [GROUP_AT, GROUP_ALL, C2C, GROUP_ADD_ROBOT, FRIEND_ADD, INTERACTION_GROUP,
            INTERACTION_C2C, READY, RESUMED, GROUP_QUOTE]


def parse(frame: dict[str, Any] | str | bytes) -> QQEvent:
    return parse_dispatch(parse_envelope(frame), APP)


def with_d(frame: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A deep copy of ``frame`` with keys of ``d`` replaced (``...`` deletes the key)."""
    out = copy.deepcopy(frame)
    for key, value in changes.items():
        if value is ...:
            out["d"].pop(key, None)
        else:
            out["d"][key] = value
    return out


def with_author(frame: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(frame)
    for key, value in changes.items():
        if value is ...:
            out["d"]["author"].pop(key, None)
        else:
            out["d"]["author"][key] = value
    return out


def rejected(frame: dict[str, Any] | str | bytes) -> BadInputError:
    with pytest.raises(BadInputError) as info:
        parse(frame)
    return info.value


def oid(openid: str) -> OpenId:
    return OpenId(APP, openid)


# --------------------------------------------------------------------------- envelope


@pytest.mark.parametrize("form", ["str", "bytes", "dict"])
def test_envelope_of_the_reference_example(form: str) -> None:
    raw: Any = {"str": GROUP_AT_RAW, "bytes": GROUP_AT_RAW.encode(),
                "dict": json.loads(GROUP_AT_RAW)}[form]
    env = parse_envelope(raw)
    assert (env.op, env.s, env.t, env.id) == (
        0, 7, "GROUP_AT_MESSAGE_CREATE", "GROUP_AT_MESSAGE_CREATE:k3j2h1g0f9e8d7")
    assert env.d == GROUP_AT["d"]
    assert json.loads(GROUP_AT_RAW) == GROUP_AT  # the dict fixture is the reference JSON


def test_envelopes_without_dispatch_fields() -> None:
    assert parse_envelope('{"op":10,"d":{"heartbeat_interval":45000}}') == Envelope(
        op=10, d={"heartbeat_interval": 45000})
    assert parse_envelope(b'{"op":11}') == Envelope(op=11)
    assert parse_envelope('{"op":11,"d":42,"s":null,"t":null}') == Envelope(op=11, d=42)
    env = parse_envelope('{"op":13,"d":{"plain_token":"Arq0D5A61EgUu4OxUvOp",'
                         '"event_ts":"1725442341"}}')
    assert env.op == 13 and env.d["event_ts"] == "1725442341"


@pytest.mark.parametrize(("raw", "field"), [
    ("", "frame"),
    ("{", "frame"),
    (b"\xff\xfe{}", "frame"),
    ('{"op": NaN}', "frame"),
    ("[" * 100_000 + "]" * 100_000, "frame"),
    ('{"op": 1' + "0" * 5000 + "}", "frame"),
    ("[]", "frame"),
    ("42", "frame"),
    ('"op"', "frame"),
    ("null", "frame"),
    ("{}", "op"),
    ('{"d": {}}', "op"),
    ('{"op": "0"}', "op"),
    ('{"op": true}', "op"),
    ('{"op": 0.0}', "op"),
    ('{"op": null}', "op"),
    ('{"op": 0, "s": "7"}', "s"),
    ('{"op": 0, "s": false}', "s"),
    ('{"op": 0, "t": 5}', "t"),
    ('{"op": 0, "id": ["x"]}', "id"),
])
def test_bad_envelopes_name_the_field(raw: str | bytes, field: str) -> None:
    with pytest.raises(BadInputError) as info:
        parse_envelope(raw)
    assert info.value.field == field


def test_a_non_object_given_as_a_decoded_value() -> None:
    with pytest.raises(BadInputError) as info:
        parse_envelope([1, 2])  # type: ignore[arg-type]
    assert info.value.field == "frame"


def test_dispatch_needs_op_0_a_type_and_a_good_app_id() -> None:
    with pytest.raises(BadInputError) as info:
        parse_dispatch(Envelope(op=11), APP)
    assert info.value.field == "op"
    for t in (None, ""):
        with pytest.raises(BadInputError) as info:
            parse_dispatch(Envelope(op=0, d={}, t=t), APP)
        assert info.value.field == "t"
    with pytest.raises(BadInputError) as info:
        parse_dispatch(parse_envelope(GROUP_AT), "not-an-app")
    assert info.value.field == "app_id"


@pytest.mark.parametrize("form", ["escaped", "raw bytes"])
def test_a_lone_surrogate_anywhere_is_repaired_and_logged_once_per_event(form: str) -> None:
    frame = with_d(GROUP_AT, content="hi \ud83d", extra={"deep": ["\udc00", {"\ud800": 1}]})
    frame["d"]["attachments"][0]["filename"] = "a\udfff.png"
    raw = (json.dumps(frame).encode() if form == "escaped"
           else json.dumps(frame, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    with capture_logs() as logs:
        envelope = parse_envelope(raw)
        event = parse_dispatch(envelope, APP)
    assert envelope.repaired == 4 and envelope.d["extra"] == {"deep": ["\ufffd", {"\ufffd": 1}]}
    assert isinstance(event, GroupMessage)
    assert event.content == "hi \ufffd" and event.attachments[0].filename == "a\ufffd.png"
    assert [(line["event"], line["strings"], line["id"]) for line in logs] == [
        ("[qq] event text repaired", 4, GROUP_AT["id"])]
    with capture_logs() as logs:
        assert parse(GROUP_AT_RAW).content == " hello"  # well-formed text: nothing logged
    assert logs == []


def test_bytes_that_are_not_utf8_are_repaired_and_logged() -> None:
    raw = json.dumps(with_d(GROUP_AT, content="hi XX")).encode().replace(b"XX", b"\xff\xc3(")
    with capture_logs() as logs:
        event = parse(raw)
    assert isinstance(event, GroupMessage) and event.content == "hi \ufffd\ufffd("
    assert [line["event"] for line in logs] == ["[qq] event text repaired"]


# --------------------------------------------------------------------------- group messages


def test_group_at_message_of_the_reference() -> None:
    event = parse(GROUP_AT_RAW)
    assert event == GroupMessage(
        event_type="GROUP_AT_MESSAGE_CREATE",
        event_id="GROUP_AT_MESSAGE_CREATE:k3j2h1g0f9e8d7",
        seq=7,
        message_id="ROBOT1.0_grpMsg0001",
        group=oid(GROUP),
        author=oid(MEMBER),
        author_union=UnionId(MEMBER),
        content=" hello",
        timestamp="2025-01-01T12:00:00+08:00",
        attachments=(Attachment(
            content_type="image/png", url="https://multimedia.nt.qq.com.cn/download?x=1",
            filename="a.png", size=2048, width=200, height=100),),
        mentioned_bot=True,
    )
    assert event.identities() == (oid(GROUP), oid(MEMBER), UnionId(MEMBER))
    assert event.scene == f"QQ:{APP}:group:{GROUP}"
    assert [key.key for key in event.identities()] == [
        f"openid:QQ:{APP}:{GROUP}", f"openid:QQ:{APP}:{MEMBER}", f"union:QQ:{MEMBER}"]


def test_group_message_create_and_mentions() -> None:
    event = parse(GROUP_ALL)
    assert isinstance(event, GroupMessage)
    assert event.event_type == "GROUP_MESSAGE_CREATE"
    assert event.mentioned_bot is True
    assert event.attachments == ()
    not_me = with_d(GROUP_ALL, mentions=GROUP_ALL["d"]["mentions"][:1])
    assert parse(not_me).mentioned_bot is False  # type: ignore[union-attr]
    assert parse(with_d(GROUP_ALL, mentions=...)).mentioned_bot is False  # type: ignore[union-attr]
    # an @everyone names the bot too (is_you), but it is an at of all, not of the bot
    everyone = with_d(GROUP_ALL, mentions=[{"scope": "all", "is_you": True, "username": "all"}])
    assert parse(everyone).mentioned_bot is False  # type: ignore[union-attr]
    assert parse(everyone).mentions_everyone is True  # type: ignore[union-attr]
    # mentions[] is UNCONFIRMED: odd shapes are not mentions, and not errors either.
    for odd in ("x", 5, {"is_you": True}, [None, "x", {"is_you": "true"}, {"is_you": 1}]):
        assert parse(with_d(GROUP_ALL, mentions=odd)).mentioned_bot is False  # type: ignore


OTHER = "73A48B12B0D76B961B4349B5599FA43C"
THIRD = "42F7D2FB71441DEABA5CF78016F85C57"


def test_the_members_a_group_message_mentions() -> None:
    """Issue 33.5: ``mentions[]`` names each member (``member_openid``, an OpenID of the
    serving AppID), the bot (``is_you``) and everyone (``scope: all``); a member only the
    content's markup names is mentioned too. Each is an identity of the message, the bot
    and the author aside."""
    d = {**GROUP_ALL["d"], "content": f"<@{OTHER}> and <@!{THIRD}> look <@{MEMBER}>",
         "mentions": [
             {"scope": "single", "id": OTHER, "member_openid": OTHER, "username": "o",
              "bot": False, "is_you": False},
             {"scope": "single", "id": "B0", "member_openid": "B0", "username": "bot",
              "bot": True, "is_you": True},
             {"scope": "all", "is_you": True, "username": "全体成员"}]}
    event = parse({**GROUP_ALL, "d": d})
    assert isinstance(event, GroupMessage)
    assert event.mentions == (
        GroupMention(oid(OTHER), OTHER, username="o"),
        GroupMention(oid("B0"), "B0", is_you=True, bot=True, username="bot"),
        GroupMention(oid(THIRD), THIRD), GroupMention(oid(MEMBER), MEMBER))
    assert event.mentioned_bot is True and event.mentions_everyone is True
    assert event.mentioned_members() == (oid(OTHER), oid(THIRD))
    assert event.identities() == (oid(GROUP), oid(MEMBER), UnionId(MEMBER), oid(OTHER),
                                  oid(THIRD))


def test_mentions_that_name_no_openid_are_no_mentions() -> None:
    """``mentions[]`` is UNCONFIRMED: an entry whose id is no OpenID, or markup naming
    none, is left out (its markup stays text), never an error."""
    d = {**GROUP_ALL["d"], "content": "<@a.b> <@" + "A" * (MAX_OPENID_LEN + 1) + ">",
         "mentions": [{"scope": "single", "member_openid": "a b"}, {"id": ""},
                      {"scope": "single", "id": OTHER}]}
    event = parse({**GROUP_ALL, "d": d})
    assert isinstance(event, GroupMessage)
    assert event.mentions == (GroupMention(oid(OTHER), OTHER),)
    assert event.mentioned_bot is False and event.mentions_everyone is False


def test_group_at_message_is_a_mention_without_mentions() -> None:
    event = parse(with_d(GROUP_AT, mentions=[]))
    assert isinstance(event, GroupMessage) and event.mentioned_bot is True


def test_group_falls_back_to_group_id() -> None:
    for missing in (..., None, ""):
        event = parse(with_d(GROUP_AT, group_openid=missing))
        assert isinstance(event, GroupMessage) and event.group == oid(GROUP)


def test_group_openid_wins_over_group_id() -> None:
    event = parse(with_d(GROUP_AT, group_id="FFFF"))
    assert isinstance(event, GroupMessage) and event.group == oid(GROUP)


def test_author_falls_back_to_author_id() -> None:
    event = parse(with_author(GROUP_AT, member_openid=..., union_openid=...))
    assert isinstance(event, GroupMessage)
    assert event.author == oid(MEMBER)
    assert event.author_union is None
    assert event.identities() == (oid(GROUP), oid(MEMBER))


def test_only_the_documented_fields() -> None:
    d = {"id": "ROBOT1.0_m", "content": "x", "timestamp": "2025-01-01T12:00:00+08:00",
         "group_openid": GROUP, "author": {"member_openid": MEMBER}}
    event = parse({"op": 0, "t": "GROUP_AT_MESSAGE_CREATE", "d": d})
    assert isinstance(event, GroupMessage)
    assert (event.event_id, event.seq, event.author, event.attachments) == (
        None, None, oid(MEMBER), ())


def test_content_and_timestamp_may_be_absent() -> None:
    event = parse(with_d(GROUP_AT, content=..., timestamp=None))
    assert isinstance(event, GroupMessage)
    assert (event.content, event.timestamp) == ("", "")
    numeric = parse(with_d(GROUP_AT, timestamp=1735700000))
    assert numeric.timestamp == "1735700000"  # type: ignore[union-attr]


@pytest.mark.parametrize(("frame", "field"), [
    (with_d(GROUP_AT, group_openid=..., group_id=...), "d.group_openid"),
    (with_d(GROUP_AT, group_openid=None, group_id=""), "d.group_openid"),
    (with_d(GROUP_AT, group_openid="A1B2 C3"), "d.group_openid"),
    (with_d(GROUP_AT, group_openid="9A8B..."), "d.group_openid"),
    (with_d(GROUP_AT, group_openid=12345), "d.group_openid"),
    (with_d(GROUP_AT, group_openid=..., group_id="a:b"), "d.group_id"),
    (with_d(GROUP_AT, group_openid="X" * (MAX_OPENID_LEN + 1)), "d.group_openid"),
    (with_d(GROUP_AT, author=...), "d.author"),
    (with_d(GROUP_AT, author="someone"), "d.author"),
    (with_d(GROUP_AT, author={}), "d.author.member_openid"),
    (with_author(GROUP_AT, member_openid=..., id=...), "d.author.member_openid"),
    (with_author(GROUP_AT, member_openid=..., id="bad id"), "d.author.id"),
    (with_author(GROUP_AT, member_openid=["x"]), "d.author.member_openid"),
    (with_author(GROUP_AT, union_openid="no/slash"), "d.author.union_openid"),
    (with_author(GROUP_AT, union_openid=7), "d.author.union_openid"),
    (with_d(GROUP_AT, id=...), "d.id"),
    (with_d(GROUP_AT, id=""), "d.id"),
    (with_d(GROUP_AT, id=42), "d.id"),
    (with_d(GROUP_AT, content=["hi"]), "d.content"),
    (with_d(GROUP_AT, timestamp={"s": 1}), "d.timestamp"),
    ({**GROUP_AT, "d": None}, "d"),
    ({**GROUP_AT, "d": [GROUP_AT["d"]]}, "d"),
])
def test_bad_group_messages_name_the_path(frame: dict[str, Any], field: str) -> None:
    assert rejected(frame).field == field


def test_openid_case_is_kept() -> None:
    event = parse(with_d(GROUP_AT, group_openid=GROUP.lower()))
    assert isinstance(event, GroupMessage)
    assert event.group.openid == GROUP.lower() and event.group != oid(GROUP)


# --------------------------------------------------------------------------- attachments


def attachment_of(**fields: Any) -> Attachment:
    event = parse(with_d(GROUP_AT, attachments=[fields]))
    assert isinstance(event, GroupMessage)
    (only,) = event.attachments
    return only


@pytest.mark.parametrize(("url", "expected"), [
    ("multimedia.nt.qq.com.cn/download?x=1", "https://multimedia.nt.qq.com.cn/download?x=1"),
    ("gchat.qpic.cn:443/x", "https://gchat.qpic.cn:443/x"),
    ("//gchat.qpic.cn/x", "https://gchat.qpic.cn/x"),
    ("https://a.example/x", "https://a.example/x"),
    ("http://a.example/x", "http://a.example/x"),
    ("HTTPS://a.example/x", "HTTPS://a.example/x"),
])
def test_attachment_url_gets_a_scheme(url: str, expected: str) -> None:
    assert attachment_of(content_type="image/jpeg", url=url).url == expected


def test_attachment_optional_fields() -> None:
    assert attachment_of(content_type="voice", url="a/b") == Attachment(
        content_type="voice", url="https://a/b")
    assert attachment_of(url="a/b").content_type == ""
    numeric_text = attachment_of(content_type="file", url="a/b", size="2048", width=None,
                                 height="", filename="x.zip")
    assert (numeric_text.size, numeric_text.width, numeric_text.height) == (2048, None, None)
    assert numeric_text.filename == "x.zip"
    assert attachment_of(content_type="video/mp4", url="a/b", size=10.0).size == 10


def test_several_attachments_keep_their_order() -> None:
    items = [{"content_type": "image/gif", "url": f"h/{n}"} for n in range(3)]
    event = parse(with_d(C2C, attachments=items))
    assert isinstance(event, C2CMessage)
    assert [a.url for a in event.attachments] == ["https://h/0", "https://h/1", "https://h/2"]


@pytest.mark.parametrize(("attachments", "field"), [
    ({"url": "x"}, "d.attachments"),
    ("x", "d.attachments"),
    ([{"content_type": "image/png", "url": "x"}, "x"], "d.attachments[1]"),
    ([{"content_type": "image/png"}], "d.attachments[0].url"),
    ([{"content_type": "image/png", "url": ""}], "d.attachments[0].url"),
    ([{"content_type": "image/png", "url": 5}], "d.attachments[0].url"),
    ([{"content_type": 5, "url": "x"}], "d.attachments[0].content_type"),
    ([{"url": "x", "filename": 5}], "d.attachments[0].filename"),
    ([{"url": "x", "size": "big"}], "d.attachments[0].size"),
    ([{"url": "x", "size": -1}], "d.attachments[0].size"),
    ([{"url": "x", "width": True}], "d.attachments[0].width"),
    ([{"url": "x", "height": 1.5}], "d.attachments[0].height"),
])
def test_bad_attachments_name_the_path(attachments: Any, field: str) -> None:
    assert rejected(with_d(GROUP_AT, attachments=attachments)).field == field


# --------------------------------------------------------------------------- C2C


def test_c2c_message_of_the_reference() -> None:
    event = parse(C2C)
    assert event == C2CMessage(
        event_type="C2C_MESSAGE_CREATE", event_id="C2C_MESSAGE_CREATE:b2", seq=9,
        message_id="ROBOT1.0_c2cMsg0001", user=oid(C2C_USER), author_union=UnionId(C2C_USER),
        content="hi", timestamp="2025-01-01T12:00:00+08:00", attachments=(),
    )
    assert event.identities() == (oid(C2C_USER), UnionId(C2C_USER))
    assert event.scene == f"QQ:{APP}:c2c:{C2C_USER}"


def test_c2c_user_falls_back_to_author_id() -> None:
    event = parse(with_author(C2C, user_openid=..., union_openid=None))
    assert isinstance(event, C2CMessage)
    assert (event.user, event.author_union) == (oid(C2C_USER), None)
    assert event.identities() == (oid(C2C_USER),)


def test_the_same_openid_is_the_same_key_in_every_role() -> None:
    """DESIGN §1: group, C2C, friend and member events of one person share one key."""
    group_msg = parse(with_author(GROUP_AT, member_openid=C2C_USER, id=C2C_USER))
    c2c_msg = parse(C2C)
    friend = parse(FRIEND_ADD)
    assert isinstance(group_msg, GroupMessage)
    assert group_msg.author == c2c_msg.identities()[0] == friend.identities()[0]


@pytest.mark.parametrize(("frame", "field"), [
    (with_author(C2C, user_openid=..., id=...), "d.author.user_openid"),
    (with_author(C2C, user_openid="", id=None), "d.author.user_openid"),
    (with_author(C2C, user_openid="9A8B..."), "d.author.user_openid"),
    (with_d(C2C, author=None), "d.author"),
    (with_d(C2C, id=...), "d.id"),
    (with_d(C2C, attachments=[{}]), "d.attachments[0].url"),
])
def test_bad_c2c_messages_name_the_path(frame: dict[str, Any], field: str) -> None:
    assert rejected(frame).field == field


# --------------------------------------------------------------------------- robot events


@pytest.mark.parametrize("t", [
    "GROUP_ADD_ROBOT", "GROUP_DEL_ROBOT", "GROUP_MSG_REJECT", "GROUP_MSG_RECEIVE"])
def test_group_robot_events(t: str) -> None:
    event = parse({**GROUP_ADD_ROBOT, "t": t, "id": f"{t}:abc123"})
    assert event == GroupRobotEvent(
        event_type=t, event_id=f"{t}:abc123", seq=3,
        group=oid(GROUP), operator=oid(MEMBER), timestamp=1735700000)
    assert event.identities() == (oid(GROUP), oid(MEMBER))
    assert event.scene == f"QQ:{APP}:group:{GROUP}"


@pytest.mark.parametrize(("given", "expected"), [
    (1735700000, 1735700000), ("1735700000", 1735700000), (1735700000.0, 1735700000),
    (..., None), (None, None), ("", None),
])
def test_robot_event_timestamp_as_number_or_text(given: Any, expected: int | None) -> None:
    event = parse(with_d(GROUP_ADD_ROBOT, timestamp=given))
    assert isinstance(event, GroupRobotEvent) and event.timestamp == expected


@pytest.mark.parametrize(("frame", "field"), [
    (with_d(GROUP_ADD_ROBOT, group_openid=...), "d.group_openid"),
    (with_d(GROUP_ADD_ROBOT, op_member_openid=...), "d.op_member_openid"),
    (with_d(GROUP_ADD_ROBOT, op_member_openid="x!"), "d.op_member_openid"),
    (with_d(GROUP_ADD_ROBOT, timestamp="soon"), "d.timestamp"),
    (with_d(GROUP_ADD_ROBOT, timestamp="-5"), "d.timestamp"),
    (with_d(GROUP_ADD_ROBOT, timestamp=-5), "d.timestamp"),
    (with_d(GROUP_ADD_ROBOT, timestamp=1.5), "d.timestamp"),
    (with_d(GROUP_ADD_ROBOT, timestamp=True), "d.timestamp"),
    (with_d(GROUP_ADD_ROBOT, timestamp="1" * 30), "d.timestamp"),
    ({**GROUP_ADD_ROBOT, "d": "x"}, "d"),
])
def test_bad_robot_events_name_the_path(frame: dict[str, Any], field: str) -> None:
    assert rejected(frame).field == field


@pytest.mark.parametrize("t", ["GROUP_MEMBER_ADD", "GROUP_MEMBER_REMOVE"])
def test_group_member_events_when_sent(t: str) -> None:
    by_member = {"op": 0, "s": 20, "t": t, "id": f"{t}:1",
                 "d": {"group_openid": GROUP, "member_openid": MEMBER,
                       "op_member_openid": C2C_USER, "timestamp": "1735700002"}}
    event = parse(by_member)
    assert event == GroupMemberEvent(
        event_type=t, event_id=f"{t}:1", seq=20, group=oid(GROUP), member=oid(MEMBER),
        operator=oid(C2C_USER), timestamp=1735700002)
    assert event.identities() == (oid(GROUP), oid(MEMBER), oid(C2C_USER))
    assert event.scene == f"QQ:{APP}:group:{GROUP}"
    lean = parse({"op": 0, "t": t, "d": {"group_id": GROUP, "user_openid": MEMBER}})
    assert lean == GroupMemberEvent(event_type=t, group=oid(GROUP), member=oid(MEMBER))
    assert lean.identities() == (oid(GROUP), oid(MEMBER))
    assert rejected({"op": 0, "t": t, "d": {"group_openid": GROUP}}).field == "d.member_openid"
    assert rejected({"op": 0, "t": t, "d": {"member_openid": MEMBER}}).field == "d.group_openid"


@pytest.mark.parametrize("t", ["FRIEND_ADD", "FRIEND_DEL", "C2C_MSG_REJECT", "C2C_MSG_RECEIVE"])
def test_friend_events(t: str) -> None:
    event = parse({**FRIEND_ADD, "t": t, "id": f"{t}:def456"})
    assert event == FriendEvent(event_type=t, event_id=f"{t}:def456", seq=4,
                                user=oid(C2C_USER), timestamp=1735700001)
    assert event.identities() == (oid(C2C_USER),)
    assert event.scene == f"QQ:{APP}:c2c:{C2C_USER}"
    text_time = parse(with_d({**FRIEND_ADD, "t": t}, timestamp="1735700001"))
    assert text_time.timestamp == 1735700001  # type: ignore[union-attr]
    assert rejected(with_d({**FRIEND_ADD, "t": t}, openid=...)).field == "d.openid"
    assert rejected(with_d({**FRIEND_ADD, "t": t}, openid="a b")).field == "d.openid"


# --------------------------------------------------------------------------- interactions


def test_group_interaction() -> None:
    event = parse(INTERACTION_GROUP)
    assert event == Interaction(
        event_type="INTERACTION_CREATE", event_id="INTERACTION_CREATE:ghi789", seq=5,
        interaction_id="interaction-0001", interaction_type=11, scene_type="group",
        chat_type=1, group=oid(GROUP), group_member=oid(MEMBER), user=None,
        button_data="vote:1", button_id="b1", timestamp="2025-01-01T12:00:02+08:00")
    assert event.identities() == (oid(GROUP), oid(MEMBER))
    assert event.scene == f"QQ:{APP}:group:{GROUP}"


def test_c2c_interaction() -> None:
    event = parse(INTERACTION_C2C)
    assert isinstance(event, Interaction)
    assert (event.interaction_id, event.scene_type, event.chat_type) == (
        "interaction-0002", "c2c", 2)
    assert (event.group, event.group_member, event.user) == (None, None, oid(C2C_USER))
    assert (event.button_data, event.button_id) == ("menu", "m1")
    assert event.identities() == (oid(C2C_USER),)
    assert event.scene == f"QQ:{APP}:c2c:{C2C_USER}"


def test_interaction_without_chat_or_data() -> None:
    # A guild interaction, or the (UNCONFIRMED) type 18 authorisation switch.
    event = parse({"op": 0, "t": "INTERACTION_CREATE", "id": "INTERACTION_CREATE:z",
                   "d": {"id": "i3", "type": 18, "scene": "guild", "chat_type": 0,
                         "guild_id": "123", "channel_id": "456",
                         "data": {"resolved": {}, "authorize_data": {"switch": 1}}}})
    assert isinstance(event, Interaction)
    assert (event.interaction_type, event.button_data, event.timestamp) == (18, None, "")
    assert event.identities() == () and event.scene is None


@pytest.mark.parametrize(("changes", "field"), [
    ({"id": ...}, "d.id"),
    ({"group_openid": "not an id"}, "d.group_openid"),
    ({"group_member_openid": 5}, "d.group_member_openid"),
    ({"user_openid": "x.y"}, "d.user_openid"),
    ({"type": "button"}, "d.type"),
    ({"chat_type": [1]}, "d.chat_type"),
    ({"scene": 1}, "d.scene"),
    ({"data": "x"}, "d.data"),
    ({"data": {"resolved": []}}, "d.data.resolved"),
    ({"data": {"resolved": {"button_data": 5}}}, "d.data.resolved.button_data"),
])
def test_bad_interactions_name_the_path(changes: dict[str, Any], field: str) -> None:
    assert rejected(with_d(INTERACTION_GROUP, **changes)).field == field


# --------------------------------------------------------------------------- session events


def test_ready_and_resumed() -> None:
    ready = parse(READY)
    assert ready == Ready(
        event_type="READY", seq=1, session_id="1b3f4c2e-0d6a-4c1e-9a55-2f7a6e0c9d11",
        user_id="11586990140073229091", username="gensokyo", shard=(0, 1), version=1)
    assert ready.identities() == () and ready.scene is None
    doc_shard = parse(with_d(READY, shard=[0, 0]))
    assert doc_shard.shard == (0, 0)  # type: ignore[union-attr]
    lean = parse({"op": 0, "t": "READY", "d": {"session_id": "s"}})
    assert lean == Ready(event_type="READY", session_id="s")
    resumed = parse(RESUMED)
    assert resumed == Resumed(event_type="RESUMED", seq=12)
    assert resumed.identities() == () and resumed.scene is None
    assert parse({"op": 0, "t": "RESUMED"}) == Resumed(event_type="RESUMED")


@pytest.mark.parametrize(("changes", "field"), [
    ({"session_id": ...}, "d.session_id"),
    ({"session_id": 5}, "d.session_id"),
    ({"user": "bot"}, "d.user"),
    ({"user": {"id": 5}}, "d.user.id"),
    ({"shard": "0,1"}, "d.shard"),
    ({"shard": [0, "1"]}, "d.shard"),
    ({"version": "v1"}, "d.version"),
])
def test_bad_ready_names_the_path(changes: dict[str, Any], field: str) -> None:
    assert rejected(with_d(READY, **changes)).field == field


# --------------------------------------------------------------------------- unknown types


@pytest.mark.parametrize("d", [
    {"id": "x", "content": "guild"}, None, "", 5, [1, 2], {"author": "not an object"}])
def test_unknown_event_types_are_kept_not_raised(d: Any) -> None:
    event = parse({"op": 0, "s": 30, "t": "GUILD_CREATE", "id": "GC:1", "d": d})
    assert event == UnknownEvent(event_type="GUILD_CREATE", event_id="GC:1", seq=30, d=d)
    assert event.identities() == () and event.scene is None


def test_events_are_frozen() -> None:
    event = parse(GROUP_AT)
    assert isinstance(event, GroupMessage)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.content = "changed"  # type: ignore[misc]
    assert hash(event) == hash(parse(GROUP_AT_RAW))


# --------------------------------------------------------------------------- properties

KNOWN_TYPES = [
    "GROUP_AT_MESSAGE_CREATE", "GROUP_MESSAGE_CREATE", "C2C_MESSAGE_CREATE",
    "GROUP_ADD_ROBOT", "GROUP_DEL_ROBOT", "GROUP_MSG_REJECT", "GROUP_MSG_RECEIVE",
    "GROUP_MEMBER_ADD", "GROUP_MEMBER_REMOVE", "FRIEND_ADD", "FRIEND_DEL", "C2C_MSG_REJECT",
    "C2C_MSG_RECEIVE", "INTERACTION_CREATE", "READY", "RESUMED",
]
FIELD_NAMES = sorted({
    "op", "d", "s", "t", "id", "content", "timestamp", "group_openid", "group_id", "author",
    "member_openid", "user_openid", "union_openid", "attachments", "url", "content_type",
    "filename", "size", "width", "height", "mentions", "is_you", "op_member_openid", "openid",
    "type", "scene", "chat_type", "group_member_openid", "data", "resolved", "button_data",
    "button_id", "session_id", "user", "shard", "version",
})

scalars = (st.none() | st.booleans() | st.integers() | st.floats()
           | st.text(max_size=12) | st.sampled_from([GROUP, MEMBER, "", " ", "a:b", "9A8B..."]))
keys = st.sampled_from(FIELD_NAMES) | st.text(max_size=6)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=5),
    max_leaves=20,
)


def check_event_or_bad_input(frame: Any) -> None:
    """The property: an event (whose accessors work) or BadInputError, nothing else."""
    try:
        event = parse_dispatch(parse_envelope(frame), APP)
    except BadInputError as err:
        assert err.field and err.reason
        return
    repr(event)
    keys_ = event.identities()
    assert all(isinstance(key, OpenId | UnionId) for key in keys_)
    scene = event.scene
    assert scene is None or (scene.startswith(f"QQ:{APP}:") and len(scene.encode()) <= 400)
    if isinstance(event, GroupMessage | C2CMessage):
        assert all(a.url for a in event.attachments)


PROPERTY = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(json_values)
def test_any_json_value_as_a_frame(value: Any) -> None:
    check_event_or_bad_input(value)
    check_event_or_bad_input(json.dumps(value))


@PROPERTY
@given(st.binary(max_size=64) | st.text(max_size=64))
def test_any_bytes_or_text_as_a_frame(raw: bytes | str) -> None:
    check_event_or_bad_input(raw)


@PROPERTY
@given(t=st.sampled_from(KNOWN_TYPES) | st.text(max_size=8), d=json_values,
       s=st.none() | st.integers(), event_id=st.none() | st.text(max_size=8))
def test_any_body_under_a_known_type(t: str, d: Any, s: int | None, event_id: str | None) -> None:
    check_event_or_bad_input({"op": 0, "s": s, "t": t, "id": event_id, "d": d})


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a dict entry or list item inside ``value``."""
    found: list[tuple[Any, ...]] = []
    items: list[tuple[Any, Any]] = (
        list(value.items()) if isinstance(value, dict)
        else list(enumerate(value)) if isinstance(value, list) else [])
    for key, child in items:
        found.append((*prefix, key))
        found.extend(paths(child, (*prefix, key)))
    return found


near_values = st.sampled_from(
    [None, "", " ", 0, -1, True, 1.5, [], {}, "x y", "a:b", "9A8B...", "X" * 200, GROUP,
     "1735700000", ["x"], {"id": MEMBER}]) | json_values


@PROPERTY
@given(st.sampled_from(EXAMPLES), st.data())
def test_near_valid_mutations_of_the_examples(example: dict[str, Any], data: Any) -> None:
    frame = copy.deepcopy(example)
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        # Inside d: the envelope fields are covered by the tests above.
        where = [path for path in paths(frame) if path[0] == "d" and len(path) > 1] or paths(frame)
        if not where:
            break
        path = data.draw(st.sampled_from(where), label="path")
        parent = frame
        for step in path[:-1]:
            parent = parent[step]
        if data.draw(st.booleans(), label="delete") and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            # A copy: sampled_from hands out the same [] / {} objects every time.
            parent[path[-1]] = copy.deepcopy(data.draw(near_values, label="value"))
    check_event_or_bad_input(frame)
    check_event_or_bad_input(json.dumps(frame))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e["t"])
def test_every_example_parses_the_same_from_text_and_dict(example: dict[str, Any]) -> None:
    event = parse(example)
    assert event == parse(json.dumps(example)) == parse(json.dumps(example).encode())
    assert not isinstance(event, UnknownEvent)


# --------------------------------------------------------------------------- guilds


def test_a_channel_message_names_raw_ids_and_its_scene() -> None:
    d = channel_message(1, "hi", mentions=("144115218677563301",))
    d["guild_id"] = 7000000001  # a number where text is usual: the same id
    event = parse({"op": 0, "s": 1, "t": "AT_MESSAGE_CREATE", "id": "AT:1", "d": d})
    assert isinstance(event, ChannelMessage)
    assert (event.channel, event.guild) == (RawId("8000000001"), RawId("7000000001"))
    assert event.author == GuildMember(RawId("144115218677563300"), "alice", "Alice",
                                       d["author"]["avatar"], False, ("1",))
    # the bot's own mention is no identity; the other user's is
    assert event.identities() == (RawId("8000000001"), RawId("144115218677563300"),
                                  RawId("144115218677563301"))
    assert event.scene == f"QQ:{APP}:channel:8000000001"


def test_mentions_that_are_not_users_are_skipped() -> None:
    d = channel_message(1, at_bot=False) | {"mentions": ["x", {"username": "no id"}, None]}
    event = parse({"op": 0, "t": "MESSAGE_CREATE", "d": d})
    assert isinstance(event, ChannelMessage) and event.mentions == ()


def test_a_user_the_content_mentions_without_an_entry_is_a_mention_too() -> None:
    """``<@!id>`` in the content that ``mentions[]`` does not list (issue 33.5): the user
    is named all the same, by the id alone; the author mentioning themselves is no
    second identity, and @everyone is ``mention_everyone``."""
    d = channel_message(1, "hi <@!144115218677563302> <@!144115218677563300> @everyone",
                        mentions=("144115218677563301",)) | {"mention_everyone": True}
    event = parse({"op": 0, "t": "AT_MESSAGE_CREATE", "d": d})
    assert isinstance(event, ChannelMessage)
    assert [m.user for m in event.mentions] == [
        RawId("1"), RawId("144115218677563301"), RawId("144115218677563302"),
        RawId("144115218677563300")]
    assert event.mentions[2] == GuildMember(RawId("144115218677563302"))
    assert event.identities() == (RawId("8000000001"), RawId("144115218677563300"),
                                  RawId("144115218677563301"), RawId("144115218677563302"))
    assert event.mentions_everyone is True
    assert parse({"op": 0, "t": "AT_MESSAGE_CREATE",
                  "d": channel_message(1)}).mentions_everyone is False  # type: ignore[union-attr]


def test_a_dm_and_its_recall_are_scened_by_the_session_guild() -> None:
    dm = parse({"op": 0, "t": "DIRECT_MESSAGE_CREATE", "id": "DM:1", "d": direct_message(1)})
    assert isinstance(dm, DirectMessage)
    assert (dm.dm_guild, dm.channel, dm.source_guild) == (
        RawId("7000000099"), RawId("8000000099"), "7000000001")
    assert dm.identities() == (RawId("144115218677563300"),)
    gone = parse({"op": 0, "t": "DIRECT_MESSAGE_DELETE", "id": "DD:1",
                  "d": message_delete(direct_message(1))})
    assert isinstance(gone, GuildMessageDelete) and gone.direct
    assert gone.scene == dm.scene == f"QQ:{APP}:dms:7000000099"
    # the recalled message's id is not this event's message id (de-duplication keys on it)
    assert gone.deleted_id == dm.message_id and not hasattr(gone, "message_id")


def test_a_member_who_left_is_their_own_operator() -> None:
    event = parse({"op": 0, "t": "GUILD_MEMBER_REMOVE", "d": guild_member()})
    assert isinstance(event, GuildMemberEvent)
    assert event.operator == event.member.user
    assert event.identities() == (RawId("7000000001"), RawId("144115218677563300"))


# --------------------------------------------------------------------------- quotes


def test_a_message_names_its_msg_idx_and_the_one_it_quotes() -> None:
    event = parse(GROUP_QUOTE)
    assert isinstance(event, GroupMessage)
    assert (event.msg_idx, event.quoted_idx) == ("REFIDX_gw2", "REFIDX_gw1")
    assert event.content == "m2"  # the quoted text is not this message's
    c2c = parse({"op": 0, "s": 1, "t": "C2C_MESSAGE_CREATE", "id": "C2C:q",
                 "d": quoting(c2c_message(2, MEMBER), c2c_message(1, MEMBER))})
    assert isinstance(c2c, C2CMessage)
    assert (c2c.msg_idx, c2c.quoted_idx) == ("REFIDX_c2c2", "REFIDX_c2c1")
    plain = parse(with_d(GROUP_AT))
    assert isinstance(plain, GroupMessage)
    assert (plain.msg_idx, plain.quoted_idx) == (None, None)


def test_the_scene_ext_names_them_when_the_fields_do_not() -> None:
    d = GROUP_QUOTE["d"]
    event = parse(with_d(GROUP_QUOTE, msg_idx=..., msg_elements=...))
    assert isinstance(event, GroupMessage)
    assert (event.msg_idx, event.quoted_idx) == ("REFIDX_gw2", "REFIDX_gw1")
    assert d["message_scene"]["ext"] == ["msg_idx=REFIDX_gw2", "ref_msg_idx=REFIDX_gw1"]


@pytest.mark.parametrize("changes", [
    {"message_type": 0},  # msg_elements without 103: not a quote
    {"message_type": "103"},
    {"message_type": 103, "msg_elements": [], "message_scene": ...},
    {"message_type": 103, "msg_elements": [{"content": "no idx"}], "message_scene": None},
    {"message_type": 103, "msg_elements": "x", "message_scene": {"ext": "ref_msg_idx=1"}},
    {"message_type": 103, "msg_elements": [7], "message_scene": {"ext": ["ref_msg_idx="]}},
])
def test_a_quote_not_in_the_platforms_shape_is_no_quote_and_the_message_stays(
        changes: dict[str, Any]) -> None:
    event = parse(with_d(GROUP_QUOTE, **changes))
    assert isinstance(event, GroupMessage)
    assert event.quoted_idx is None
    assert event.content == "m2"


idx_text = st.text(st.characters(codec="utf-8", exclude_characters="\0"), min_size=1,
                   max_size=40)


@PROPERTY
@given(own=idx_text, quoted=idx_text)
def test_any_msg_idx_the_builders_send_parses_back(own: str, quoted: str) -> None:
    d = quoting({**group_message(2), "msg_idx": own,
                 "message_scene": {"source": "default", "ext": [f"msg_idx={own}"]}},
                {**group_message(1), "msg_idx": quoted})
    event = parse({"op": 0, "s": 1, "t": "GROUP_AT_MESSAGE_CREATE", "id": "G:q", "d": d})
    assert isinstance(event, GroupMessage)
    assert (event.msg_idx, event.quoted_idx) == (own, quoted)
    without_fields = {key: value for key, value in d.items()
                      if key not in ("msg_idx", "msg_elements")}
    event = parse({"op": 0, "s": 1, "t": "GROUP_AT_MESSAGE_CREATE", "id": "G:q",
                   "d": without_fields})
    assert isinstance(event, GroupMessage)
    assert (event.msg_idx, event.quoted_idx) == (own, quoted)  # from message_scene.ext


@PROPERTY
@given(msg_idx=json_values, message_type=json_values, elements=json_values, scene=json_values)
def test_any_quote_fields_leave_the_message_as_it_is(msg_idx: Any, message_type: Any,
                                                     elements: Any, scene: Any) -> None:
    event = parse(with_d(GROUP_AT, msg_idx=msg_idx, message_type=message_type,
                         msg_elements=elements, message_scene=scene))
    assert isinstance(event, GroupMessage)
    assert dataclasses.replace(event, msg_idx=None, quoted_idx=None) == parse(GROUP_AT)
    for value in (event.msg_idx, event.quoted_idx):
        assert value is None or (isinstance(value, str) and value)
    if message_type != 103:
        assert event.quoted_idx is None


# --------------------------------------------------------------------------- guild quotes


def test_a_guild_message_names_the_message_it_quotes_by_its_id() -> None:
    quoted = channel_message(1, "the words")
    event = parse({"op": 0, "s": 2, "t": "AT_MESSAGE_CREATE", "id": "A:2",
                   "d": quoting(channel_message(2, "about that"), quoted)})
    assert isinstance(event, ChannelMessage)
    assert event.quoted_id == quoted["id"] and event.content.endswith("about that")
    dm = parse({"op": 0, "s": 3, "t": "DIRECT_MESSAGE_CREATE", "id": "D:3",
                "d": quoting(direct_message(3), direct_message(1))})
    assert isinstance(dm, DirectMessage) and dm.quoted_id == direct_message(1)["id"]
    plain = parse({"op": 0, "s": 4, "t": "AT_MESSAGE_CREATE", "id": "A:4",
                   "d": channel_message(4)})
    assert isinstance(plain, ChannelMessage) and plain.quoted_id is None


@PROPERTY
@given(reference=json_values | st.fixed_dictionaries({"message_id": json_values}),
       t=st.sampled_from(["AT_MESSAGE_CREATE", "MESSAGE_CREATE", "DIRECT_MESSAGE_CREATE"]))
def test_any_message_reference_is_a_quote_or_none_and_the_message_stays(
        reference: Any, t: str) -> None:
    """The platform's shape (an object whose ``message_id`` is non-empty text) is a quote;
    anything else is no quote, never a refusal of the message."""
    d = (direct_message(5, "hi") if t == "DIRECT_MESSAGE_CREATE" else channel_message(5, "hi"))
    event = parse({"op": 0, "s": 5, "t": t, "id": f"{t}:5",
                   "d": {**d, "message_reference": reference}})
    assert isinstance(event, ChannelMessage | DirectMessage)
    wanted = reference.get("message_id") if isinstance(reference, dict) else None
    assert event.quoted_id == (wanted if isinstance(wanted, str) and wanted else None)
    assert event.content.endswith("hi")


# --------------------------------------------------------------------------- names and roles


def test_group_and_c2c_authors_carry_their_name_and_role() -> None:
    event = parse({"op": 0, "s": 1, "t": "GROUP_AT_MESSAGE_CREATE", "id": "G:n",
                   "d": group_message(1, username="Reimu", role="admin")})
    assert isinstance(event, GroupMessage)
    assert (event.author_name, event.author_role) == ("Reimu", "admin")
    plain = parse({"op": 0, "s": 1, "t": "GROUP_AT_MESSAGE_CREATE", "id": "G:p",
                   "d": group_message(1)})
    assert isinstance(plain, GroupMessage)  # an older payload: no name, no role
    assert (plain.author_name, plain.author_role) == ("", None)
    private = parse({"op": 0, "s": 1, "t": "C2C_MESSAGE_CREATE", "id": "C:n",
                     "d": c2c_message(1, username="Marisa")})
    assert isinstance(private, C2CMessage) and private.author_name == "Marisa"


def test_a_channel_author_carries_their_guild_roles() -> None:
    event = parse({"op": 0, "s": 1, "t": "AT_MESSAGE_CREATE", "id": "A:r",
                   "d": channel_message(1, roles=("1", "2", "5"), nick="Boss")})
    assert isinstance(event, ChannelMessage)
    assert (event.author.username, event.author.nick, event.author.roles) == (
        "alice", "Boss", ("1", "2", "5"))
    numbers = channel_message(1)
    numbers["member"]["roles"] = [4, "", None, {"id": "2"}, "11"]  # numbers count, junk not
    event = parse({"op": 0, "s": 1, "t": "AT_MESSAGE_CREATE", "id": "A:n", "d": numbers})
    assert isinstance(event, ChannelMessage) and event.author.roles == ("4", "11")


@PROPERTY
@given(username=json_values, member_role=json_values)
def test_any_author_name_or_role_leaves_the_group_message_as_it_is(
        username: Any, member_role: Any) -> None:
    event = parse(with_author(GROUP_AT, username=username, member_role=member_role))
    assert isinstance(event, GroupMessage)
    assert dataclasses.replace(event, author_name="", author_role=None) == parse(GROUP_AT)
    assert event.author_name == (username if isinstance(username, str) else "")
    assert event.author_role in (None, "member", "admin", "owner")
    assert event.author_role is None or event.author_role == member_role


@PROPERTY
@given(roles=json_values)
def test_any_member_roles_leave_the_channel_message_as_it_is(roles: Any) -> None:
    d = channel_message(1)
    d["member"]["roles"] = roles
    event = parse({"op": 0, "s": 1, "t": "AT_MESSAGE_CREATE", "id": "A:p", "d": d})
    assert isinstance(event, ChannelMessage)
    assert all(isinstance(role, str) and role for role in event.author.roles)
    if not isinstance(roles, list):
        assert event.author.roles == ()
