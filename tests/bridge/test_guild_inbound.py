"""Guild-side events on real stores: channels as groups, DMs as private messages, recalls
and member changes; every id a ``raw:`` key; where each chat lives kept in the legacy
config table the way the old daemon kept it."""

from __future__ import annotations

from typing import Any

import pytest

from gensokyo_idmap.bridge.guilds import directory_of
from gensokyo_idmap.bridge.inbound import BridgeSettings, InboundBridge
from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.identity import RawId
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.qq.events import parse_dispatch, parse_envelope
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore
from gensokyo_idmap.runtime.msgid import MsgContext, MsgIdMap
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore

from ..conftest import MSGID_BACKENDS, FakeClock, msgid_map, run
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
    # private is private: no guild or channel a framework would file it under (Koishi does)
    assert not {"guild_id", "channel_id", "src_guild_id"} & set(event), event
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
    assert not {"guild_id", "channel_id"} & set(gone), gone


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


DM_DELETE = {"op": 0, "s": 6, "t": "DIRECT_MESSAGE_DELETE", "id": "DIRECT_MESSAGE_DELETE:6",
             "d": {"message": {"id": "08f1dm1", "channel_id": DM_CHANNEL, "guild_id": DM_GUILD,
                               "author": {"id": AUTHOR}, "direct_message": True},
                   "op_user": {"id": AUTHOR}}}


def test_the_dm_session_is_in_the_extension_fields_only(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore,
        clock: FakeClock) -> None:
    bridge = InboundBridge(IdentityGraph(identity_store, clock=clock),
                           MsgIdMap(msgid_store, clock=clock),
                           BridgeSettings(app_id=APP, self_id=SELF, extensions=True),
                           clock=clock)
    [event] = run(bridge.translate(frame(DIRECT)))
    assert not {"guild_id", "channel_id"} & set(event), event
    assert (event["real_message_type"], event["real_user_id"]) == ("guild_private", AUTHOR)
    assert (event["real_guild_id"], event["real_channel_id"], event["src_guild_id"]) == (
        DM_GUILD, DM_CHANNEL, GUILD)
    [gone] = run(bridge.translate(frame(DM_DELETE)))
    assert gone["notice_type"] == "friend_recall" and gone["message_id"] == event["message_id"]
    assert not {"guild_id", "channel_id"} & set(gone), gone
    assert (gone["real_guild_id"], gone["real_channel_id"]) == (DM_GUILD, DM_CHANNEL)
    # a channel's message keeps its guild at the top level: it is a group's
    [channel] = run(bridge.translate(frame(channel_message())))
    assert (channel["guild_id"], channel["channel_id"]) == (GUILD, CHANNEL)
    assert channel["real_group_id"] == CHANNEL and "real_guild_id" not in channel


# --- get_msg content (issue 33.1) and quotes by message_reference (issue 33.4) --------------


def test_channel_and_dm_messages_keep_their_content_and_author(bridge: InboundBridge) -> None:
    [event] = run(bridge.translate(frame(channel_message())))
    [dm] = run(bridge.translate(frame(DIRECT)))
    for shown in (event, dm):
        kept = bridge.msgids.lookup_content(shown["message_id"])
        assert kept is not None and kept[1] is not None, shown
        assert (kept[1].author, kept[1].message) == (shown["user_id"], shown["raw_message"])
    assert event["raw_message"].startswith(f"[CQ:at,qq={SELF}] hi <3 [CQ:at,qq=")
    assert dm["raw_message"] == "hello bot"


def quoting_frame(raw: dict[str, Any], quoted_id: object, n: int) -> dict[str, Any]:
    """``raw`` (a channel or DM frame) as message ``n`` quoting ``quoted_id``."""
    d = {**raw["d"], "id": f"{raw['d']['id']}q{n}", "content": f"about that {n}",
         "message_reference": {"message_id": quoted_id}}
    return {**raw, "s": n, "id": f"{raw['t']}:q{n}", "d": d}


def test_a_message_reference_is_a_reply_segment_first(bridge: InboundBridge) -> None:
    [quoted] = run(bridge.translate(frame(channel_message(content="the quoted words"))))
    [quote] = run(bridge.translate(frame(quoting_frame(channel_message(n=2), "08f1guild1",
                                                       3))))
    assert quote["message"] == [{"type": "reply", "data": {"id": str(quoted["message_id"])}},
                                {"type": "text", "data": {"text": "about that 3"}}]
    assert "quoted words" not in quote["raw_message"]  # the quoted text is never made up
    kept = bridge.msgids.lookup_content(quote["message_id"])  # get_msg shows the reply too
    assert kept is not None and kept[1] is not None
    assert kept[1].message == quote["raw_message"]
    [dm] = run(bridge.translate(frame(DIRECT)))
    [answer] = run(bridge.translate(frame(quoting_frame(DIRECT, "08f1dm1", 4))))
    assert answer["message"][0] == {"type": "reply", "data": {"id": str(dm["message_id"])}}


def test_a_reference_to_a_message_the_bot_sent_there_is_found_by_its_id(
        bridge: InboundBridge) -> None:
    """Unlike a group quote (``msg_idx``, which the platform gives no bot message), a
    ``message_reference`` names the bot's own channel messages too."""
    run(bridge.translate(frame(channel_message())))
    sent = run(bridge.msgids.store_real("08BOTGUILD000001", MsgContext(
        APP, "channel", CHANNEL, "out").about(SELF, "pong")))
    [quote] = run(bridge.translate(frame(quoting_frame(channel_message(n=2),
                                                       "08BOTGUILD000001", 3))))
    assert quote["message"][0] == {"type": "reply", "data": {"id": str(sent)}}


@pytest.mark.parametrize("quoted_id", ["08f1guild9", "08f1dm1", "x" * 500, 42, None])
def test_a_reference_the_map_does_not_hold_in_that_chat_adds_nothing(
        bridge: InboundBridge, quoted_id: object) -> None:
    """Unknown, a message of another chat (the DM), no id the map could hold, not text."""
    run(bridge.translate(frame(DIRECT)))
    [quote] = run(bridge.translate(frame(quoting_frame(channel_message(n=2), quoted_id, 3))))
    assert quote["message"] == [{"type": "text", "data": {"text": "about that 3"}}]


def test_a_reference_to_an_expired_message_adds_nothing(bridge: InboundBridge,
                                                        clock: FakeClock) -> None:
    run(bridge.translate(frame(channel_message())))
    clock.advance(3601)
    [quote] = run(bridge.translate(frame(quoting_frame(channel_message(n=2), "08f1guild1",
                                                       3))))
    assert [segment["type"] for segment in quote["message"]] == ["text"]


@pytest.mark.parametrize("backend", MSGID_BACKENDS)
def test_references_are_found_on_either_backend(
        identity_store: LmdbIdentityStore, clock: FakeClock, request: pytest.FixtureRequest,
        backend: str) -> None:
    msgids = msgid_map(backend, request, clock, 3600)
    bridge = InboundBridge(IdentityGraph(identity_store, clock=clock), msgids,
                           BridgeSettings(app_id=APP, self_id=SELF,
                                          reads_off_loop=backend == "redis"), clock=clock)
    [[quoted], [dm]] = run(bridge.translate_many([frame(channel_message()), frame(DIRECT)]))
    batch = run(bridge.translate_many([
        frame(quoting_frame(channel_message(n=2), "08f1guild1", 3)),
        frame(quoting_frame(DIRECT, "08f1dm1", 4)),
        frame(quoting_frame(channel_message(n=2), "08f1dm1", 5))]))
    assert [event["message"][0] for [event] in batch] == [
        {"type": "reply", "data": {"id": str(quoted["message_id"])}},
        {"type": "reply", "data": {"id": str(dm["message_id"])}},
        {"type": "text", "data": {"text": "about that 5"}}]
    found = msgids.lookup_content(quoted["message_id"])
    assert found is not None and found[1] is not None
    assert found[1].message == quoted["raw_message"]
