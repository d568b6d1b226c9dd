"""Guild-side events on real stores: channels as groups, DMs as private messages, recalls
and member changes; every id a ``raw:`` key; where each chat lives kept in the legacy
config table the way the old daemon kept it."""

from __future__ import annotations

from typing import Any

import pytest

from gensokyo_idmap.bridge.guilds import directory_of
from gensokyo_idmap.bridge.inbound import InboundBridge
from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.identity import RawId
from gensokyo_idmap.qq.events import parse_dispatch, parse_envelope

from ..conftest import run
from . import test_inbound
from .test_inbound import APP, SELF, frame

bridge = test_inbound.bridge  # the same bridge on real stores (a fixture)

GUILD, CHANNEL, AUTHOR, BOT_USER, OTHER = ("7000000001", "8000000001", "144115218677563300",
                                           "11111111111111111", "144115218677563301")
DM_GUILD, DM_CHANNEL = "7000000099", "8000000099"


def channel_message(t: str = "AT_MESSAGE_CREATE", content: str | None = None,
                    n: int = 1) -> dict[str, Any]:
    return {"op": 0, "s": n, "t": t, "id": f"{t}:{n}", "d": {
        "id": f"08f1guild{n}", "channel_id": CHANNEL, "guild_id": GUILD,
        "content": content if content is not None else f"<@!{BOT_USER}> hi &lt;3 <@!{OTHER}>",
        "timestamp": "2025-01-01T12:00:00+08:00",
        "author": {"id": AUTHOR, "username": "alice", "avatar": "https://a/1", "bot": False},
        "member": {"nick": "Al", "roles": ["1"], "joined_at": "2024-01-01T00:00:00+08:00"},
        "mentions": [{"id": BOT_USER, "username": "bot", "bot": True},
                     {"id": OTHER, "username": "bob", "bot": False}],
        "seq": n, "seq_in_channel": str(n)}}


DIRECT = {"op": 0, "s": 9, "t": "DIRECT_MESSAGE_CREATE", "id": "DIRECT_MESSAGE_CREATE:9", "d": {
    "id": "08f1dm1", "channel_id": DM_CHANNEL, "guild_id": DM_GUILD, "src_guild_id": GUILD,
    "content": "hello bot", "timestamp": "2025-01-01T12:00:00+08:00", "direct_message": True,
    "author": {"id": AUTHOR, "username": "alice", "avatar": "https://a/1"},
    "member": {"joined_at": "2024-01-01T00:00:00+08:00"}}}




def test_a_channel_message_is_a_group_message_with_its_guild(bridge: InboundBridge) -> None:
    [event] = run(bridge.translate(frame(channel_message())))
    graph = bridge.graph
    channel, author, other = (graph.lookup(RawId(v)) for v in (CHANNEL, AUTHOR, OTHER))
    assert None not in (channel, author, other) and len({channel, author, other}) == 3
    assert graph.lookup(RawId(BOT_USER)) is None  # the bot's own guild user is no person
    assert (event["post_type"], event["message_type"], event["sub_type"]) == (
        "message", "group", "normal")
    assert (event["group_id"], event["user_id"]) == (channel, author)
    assert (event["guild_id"], event["channel_id"]) == (GUILD, CHANNEL)
    assert event["message"] == [{"type": "at", "data": {"qq": str(SELF)}},
                                {"type": "text", "data": {"text": " hi <3 "}},
                                {"type": "at", "data": {"qq": str(other)}}]
    # the user's own name, the guild nick as the card; roles ["1"] (everyone): a member
    assert (event["sender"]["nickname"], event["sender"]["card"],
            event["sender"]["role"]) == ("alice", "Al", "member")
    record = bridge.msgids.lookup(event["message_id"])
    assert record is not None and (record.chat_kind, record.target, record.direction) == (
        "channel", CHANNEL, "in")
    # where the channel lives, as the old daemon wrote it
    guilds = directory_of(graph)
    assert guilds.get(CHANNEL, "guild_id") == GUILD
    assert guilds.get(str(channel), "guild_id") == GUILD
    assert guilds.chat_type(channel) == "guild"  # type: ignore[arg-type]
    with bridge.graph.store.read_legacy() as view:  # type: ignore[attr-defined]
        assert view.get_config(f"{channel}:type".encode()) == b"guild"


def test_private_bots_get_every_channel_message_the_same_way(bridge: InboundBridge) -> None:
    [event] = run(bridge.translate(frame(channel_message("MESSAGE_CREATE", "plain"))))
    assert event["message"] == [{"type": "text", "data": {"text": "plain"}}]
    assert event["group_id"] == bridge.graph.lookup(RawId(CHANNEL))


def test_a_direct_message_is_private_and_remembers_its_session(bridge: InboundBridge) -> None:
    [event] = run(bridge.translate(frame(DIRECT)))
    author = bridge.graph.lookup(RawId(AUTHOR))
    assert (event["message_type"], event["sub_type"], event["user_id"]) == (
        "private", "friend", author)
    assert (event["guild_id"], event["channel_id"], event["src_guild_id"]) == (
        DM_GUILD, DM_CHANNEL, GUILD)
    guilds = directory_of(bridge.graph)
    assert guilds.dm_guild_of_user(AUTHOR) == DM_GUILD
    assert guilds.chat_type(author) == "guild_private"  # type: ignore[arg-type]
    record = bridge.msgids.lookup(event["message_id"])
    assert record is not None and (record.chat_kind, record.target) == ("dms", DM_GUILD)


def test_recalls_name_the_message_they_recall(bridge: InboundBridge) -> None:
    [message] = run(bridge.translate(frame(channel_message())))
    [recall] = run(bridge.translate(frame({"op": 0, "s": 5, "t": "PUBLIC_MESSAGE_DELETE",
                                           "id": "PUBLIC_MESSAGE_DELETE:5", "d": {
        "message": {"id": "08f1guild1", "channel_id": CHANNEL, "guild_id": GUILD,
                    "author": {"id": AUTHOR, "username": "alice"}},
        "op_user": {"id": OTHER}}})))
    graph = bridge.graph
    assert recall["notice_type"] == "group_recall"
    assert (recall["group_id"], recall["user_id"], recall["operator_id"]) == (
        message["group_id"], message["user_id"], graph.lookup(RawId(OTHER)))
    assert recall["message_id"] == message["message_id"]
    [dm] = run(bridge.translate(frame(DIRECT)))
    [gone] = run(bridge.translate(frame({"op": 0, "s": 6, "t": "DIRECT_MESSAGE_DELETE",
                                         "id": "DIRECT_MESSAGE_DELETE:6", "d": {
        "message": {"id": "08f1dm1", "channel_id": DM_CHANNEL, "guild_id": DM_GUILD,
                    "author": {"id": AUTHOR}, "direct_message": True},
        "op_user": {"id": AUTHOR}}})))
    assert (gone["notice_type"], gone["user_id"], gone["message_id"]) == (
        "friend_recall", dm["user_id"], dm["message_id"])


@pytest.mark.parametrize(("t", "op_user", "notice", "sub_type"), [
    ("GUILD_MEMBER_ADD", None, "group_increase", "approve"),
    ("GUILD_MEMBER_REMOVE", AUTHOR, "group_decrease", "leave"),
    ("GUILD_MEMBER_REMOVE", OTHER, "group_decrease", "kick")])
def test_guild_member_changes(bridge: InboundBridge, t: str, op_user: str | None, notice: str,
                              sub_type: str) -> None:
    d: dict[str, Any] = {"guild_id": GUILD, "joined_at": "2025-01-01T12:00:00+08:00",
                         "nick": "", "roles": ["1"],
                         "user": {"id": AUTHOR, "username": "alice", "bot": False}}
    if op_user is not None:
        d["op_user_id"] = op_user
    [event] = run(bridge.translate(frame({"op": 0, "s": 3, "t": t, "id": f"{t}:3", "d": d})))
    graph = bridge.graph
    assert (event["notice_type"], event["sub_type"]) == (notice, sub_type)
    assert (event["group_id"], event["user_id"], event["guild_id"]) == (
        graph.lookup(RawId(GUILD)), graph.lookup(RawId(AUTHOR)), GUILD)


@pytest.mark.parametrize(("t", "d", "field"), [
    ("AT_MESSAGE_CREATE", {"id": "m", "guild_id": GUILD, "author": {"id": AUTHOR}},
     "d.channel_id"),
    ("DIRECT_MESSAGE_CREATE", {"id": "m", "channel_id": "1", "guild_id": GUILD,
                               "author": {"id": "has space"}}, "d.author.id"),
    ("MESSAGE_DELETE", {"op_user": {"id": AUTHOR}}, "d.message"),
    ("GUILD_MEMBER_ADD", {"guild_id": GUILD}, "d.user")])
def test_bad_guild_events_name_the_field(t: str, d: dict[str, Any], field: str) -> None:
    with pytest.raises(BadInputError) as err:
        parse_dispatch(parse_envelope({"op": 0, "t": t, "d": d}), APP)
    assert err.value.field == field
