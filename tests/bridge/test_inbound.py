"""Inbound bridge on real stores: platform frames in, OneBot events out, identities durable."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from gensokyo_idmap import jsonio
from gensokyo_idmap.bridge.inbound import BridgeSettings, InboundBridge, InboundPipeline
from gensokyo_idmap.bridge.dedup import delivery_key
from gensokyo_idmap.runtime.claims import DeliveryLog, DurableClaims, stored_key
from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.identity import OpenId, RawId, UnionId
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.runtime.msgid import MsgIdMap
from gensokyo_idmap.qq.events import parse_dispatch, parse_envelope
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore
from gensokyo_idmap.testing.platform_emulator import (
    BOT_MEMBER,
    c2c_message,
    channel_message,
    group_message,
    mentioning,
    quoting,
)

from ..conftest import ANY_JSON, ANY_TEXT, MSGID_BACKENDS, FakeClock, msgid_map, run

APP = "102000001"
SELF = 102000001
GROUP = "A1B2C3D4E5F60718293A4B5C6D7E8F90"
USER = "0F1E2D3C4B5A69788796A5B4C3D2E1F0"
UNION = "7C1D0000000000000000000000000001"
OTHER = "9A8B7C6D5E4F30211203F4E5D6C7B8A9"

GROUP_AT = {
    "op": 0, "s": 7, "t": "GROUP_AT_MESSAGE_CREATE", "id": "GROUP_AT_MESSAGE_CREATE:k3j2h1g0f9e8d7",
    "d": {"id": "ROBOT1.0_grpMsg0001", "content": " hello", "timestamp": "2025-01-01T12:00:00+08:00",
          "group_openid": GROUP, "group_id": GROUP,
          "author": {"id": USER, "member_openid": USER, "union_openid": UNION},
          "attachments": [{"content_type": "image/png", "filename": "a.png", "height": 100,
                           "width": 200, "size": 2048,
                           "url": "multimedia.nt.qq.com.cn/download?x=1"}],
          "message_scene": {"source": "default"}, "message_type": 0},
}
C2C = {"op": 0, "s": 8, "t": "C2C_MESSAGE_CREATE", "id": "C2C_MESSAGE_CREATE:x1",
       "d": {"id": "ROBOT1.0_c2cMsg0001", "content": "hi [1]", "timestamp": "2025-01-01T12:00:00+08:00",
             "author": {"id": USER, "user_openid": USER, "union_openid": UNION}}}


def frame(raw: dict[str, Any]) -> Any:
    return parse_dispatch(parse_envelope(json.dumps(raw).encode()), APP)


@pytest.fixture
def bridge(identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore,
           clock: FakeClock) -> InboundBridge:
    return InboundBridge(IdentityGraph(identity_store, clock=clock),
                         MsgIdMap(msgid_store, clock=clock),
                         BridgeSettings(app_id=APP, self_id=SELF), clock=clock)


def test_group_at_message_becomes_a_onebot_group_message(bridge: InboundBridge,
                                                         clock: FakeClock) -> None:
    [event] = run(bridge.translate(frame(GROUP_AT)))
    graph = bridge.graph
    group_vuin = graph.lookup(OpenId(APP, GROUP))
    user_vuin = graph.lookup(OpenId(APP, USER))
    assert group_vuin is not None and user_vuin is not None and group_vuin != user_vuin
    assert graph.lookup(UnionId(UNION)) == user_vuin  # linked to the same person
    assert event["post_type"] == "message" and event["message_type"] == "group"
    assert (event["group_id"], event["user_id"], event["self_id"]) == (group_vuin, user_vuin, SELF)
    assert event["message_id"] == 1 and event["time"] == int(clock.now)
    assert event["message"] == [
        {"type": "at", "data": {"qq": str(SELF)}},
        {"type": "text", "data": {"text": " hello"}},
        {"type": "image", "data": {"file": "https://multimedia.nt.qq.com.cn/download?x=1",
                                   "url": "https://multimedia.nt.qq.com.cn/download?x=1",
                                   "name": "a.png"}},
    ]
    record = bridge.msgids.lookup(1)
    assert record is not None and record.real_id == "ROBOT1.0_grpMsg0001"
    assert (record.chat_kind, record.target, record.direction) == ("group", GROUP, "in")
    latest = bridge.msgids.latest_inbound(APP, "group", GROUP, 300)
    assert latest is not None and latest.virtual_id == 1


def test_same_people_keep_their_vuins_and_c2c_shares_the_user(bridge: InboundBridge) -> None:
    [first] = run(bridge.translate(frame(GROUP_AT)))
    [again] = run(bridge.translate(frame(GROUP_AT)))
    [private] = run(bridge.translate(frame(C2C)))
    assert (again["group_id"], again["user_id"]) == (first["group_id"], first["user_id"])
    assert again["message_id"] == first["message_id"]  # the same real id: the same virtual id
    assert private["message_type"] == "private" and private["sub_type"] == "friend"
    assert private["user_id"] == first["user_id"]
    assert private["raw_message"] == "hi &#91;1&#93;"


def test_string_format_and_extensions(identity_store: LmdbIdentityStore,
                                      msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    bridge = InboundBridge(IdentityGraph(identity_store, clock=clock),
                           MsgIdMap(msgid_store, clock=clock),
                           BridgeSettings(app_id=APP, self_id=SELF, message_format="string",
                                          extensions=True), clock=clock)
    [event] = run(bridge.translate(frame(C2C)))
    assert event["message"] == "hi &#91;1&#93;"
    assert event["real_user_id"] == USER and event["real_message_type"] == "private"
    assert event["avatar"] == f"https://q.qlogo.cn/qqapp/{APP}/{USER}/640"


def test_robot_member_and_friend_events(bridge: InboundBridge) -> None:
    add = {"op": 0, "s": 3, "t": "GROUP_ADD_ROBOT", "id": "GROUP_ADD_ROBOT:abc123",
           "d": {"group_openid": GROUP, "op_member_openid": USER, "timestamp": 1735700000}}
    [joined] = run(bridge.translate(frame(add)))
    assert joined["notice_type"] == "group_increase" and joined["sub_type"] == "invite"
    assert joined["user_id"] == SELF and joined["time"] == 1735700000
    assert joined["operator_id"] == bridge.graph.lookup(OpenId(APP, USER))
    kicked = run(bridge.translate(frame(add | {"t": "GROUP_DEL_ROBOT"})))[0]
    assert (kicked["notice_type"], kicked["sub_type"]) == ("group_decrease", "kick_me")
    reject = run(bridge.translate(frame(add | {"t": "GROUP_MSG_REJECT"})))[0]
    assert reject["notice_type"] == "group_msg_reject"
    friend = {"op": 0, "t": "FRIEND_ADD", "id": "FRIEND_ADD:1",
              "d": {"openid": OTHER, "timestamp": 1735700001}}
    [added] = run(bridge.translate(frame(friend)))
    assert added == {"time": 1735700001, "self_id": SELF, "post_type": "notice",
                     "notice_type": "friend_add",
                     "user_id": bridge.graph.lookup(OpenId(APP, OTHER))}
    [removed] = run(bridge.translate(frame(friend | {"t": "FRIEND_DEL"})))
    assert removed["notice_type"] == "friend_del"


def test_unknown_and_lifecycle_events_produce_nothing(bridge: InboundBridge) -> None:
    with capture_logs() as logs:
        quiet = InboundBridge(bridge.graph, bridge.msgids, bridge.settings)
        assert run(quiet.translate(frame({"op": 0, "t": "SOMETHING_NEW", "d": {"x": 1}}))) == []
    assert any(e["event"] == "[message] not forwarded" for e in logs)
    with bridge.graph.store.read() as view:
        assert view.counts().identities == 0


def test_identities_are_committed_before_the_event_is_returned(
        bridge: InboundBridge, identity_store: LmdbIdentityStore) -> None:
    [event] = run(bridge.translate(frame(GROUP_AT)))
    # a fresh read transaction sees them: they were committed (with fsync: the graph's
    # group commit returns only then, which tests/crash/test_durability.py proves with kill -9)
    with identity_store.read() as view:
        assert view.vuin_of(OpenId(APP, USER).key) == event["user_id"]
        assert view.vuin_of(OpenId(APP, GROUP).key) == event["group_id"]


def test_mapped_log_lines(identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore,
                          clock: FakeClock) -> None:
    with capture_logs() as logs:
        bridge = InboundBridge(IdentityGraph(identity_store, clock=clock),
                               MsgIdMap(msgid_store, clock=clock),
                               BridgeSettings(app_id=APP, self_id=SELF), clock=clock)
        [event] = run(bridge.translate(frame(GROUP_AT)))
    mapped = [e for e in logs if e["event"] == "[message] group mapped"]
    assert mapped == [{"event": "[message] group mapped", "group": event["group_id"],
                       "user": event["user_id"], "message_id": event["message_id"],
                       "log_level": "info"}]


# --- pipeline: per-chat order ------------------------------------------------------------


class Collect:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def publish(self, event: dict[str, Any]) -> None:
        self.events.append(event)


class SlowFirstBridge(InboundBridge):
    """The real bridge, except that the first message of a run takes a while to translate."""

    slow_ids = {"ROBOT1.0_first"}

    async def translate_many(self, events: Any) -> list[list[dict[str, Any]]]:
        if any(getattr(event, "message_id", None) in self.slow_ids for event in events):
            await asyncio.sleep(0.05)
        return await super().translate_many(events)


def _pipeline(identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore,
              bridge_type: type[InboundBridge] = InboundBridge) -> tuple[InboundPipeline, Collect]:
    """A pipeline over the real stores with one collecting sink."""
    bridge = bridge_type(IdentityGraph(identity_store), MsgIdMap(msgid_store),
                         BridgeSettings(app_id=APP, self_id=SELF))
    sink = Collect()
    return InboundPipeline(bridge, [sink]), sink


def _group_msg(message_id: str, group: str = GROUP) -> Any:
    raw = json.loads(json.dumps(GROUP_AT))
    raw["d"]["id"] = message_id
    raw["d"]["group_openid"] = raw["d"]["group_id"] = group
    raw["d"]["content"] = message_id
    return frame(raw)


def test_events_of_one_chat_keep_their_order(identity_store: LmdbIdentityStore,
                                             msgid_store: LmdbMsgIdStore) -> None:
    bridge = SlowFirstBridge(IdentityGraph(identity_store), MsgIdMap(msgid_store),
                             BridgeSettings(app_id=APP, self_id=SELF))
    sinks = [Collect(), Collect()]
    pipeline = InboundPipeline(bridge, sinks)

    async def main() -> None:
        # first (slow) and second arrive together for the same group; another group too
        await asyncio.gather(pipeline(_group_msg("ROBOT1.0_first")),
                             pipeline(_group_msg("ROBOT1.0_second")),
                             pipeline(_group_msg("ROBOT1.0_elsewhere", OTHER)))

    run(main())
    for sink in sinks:
        texts = [e["message"][1]["data"]["text"] for e in sink.events]
        same_chat = [t for t in texts if t != "ROBOT1.0_elsewhere"]
        assert same_chat == ["ROBOT1.0_first", "ROBOT1.0_second"]
        # the other chat did not wait for the slow one
        assert texts.index("ROBOT1.0_elsewhere") < texts.index("ROBOT1.0_first")
    assert len(pipeline._turns) == 0  # nothing remembered once the chats are idle


def test_a_delivery_seen_before_is_skipped_whatever_the_source(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore) -> None:
    pipeline, sink = _pipeline(identity_store, msgid_store)

    async def main() -> None:
        await pipeline(_group_msg("ROBOT1.0_once"))   # e.g. via the webhook
        await pipeline(_group_msg("ROBOT1.0_once"))   # e.g. replayed by the gateway
        await pipeline(_group_msg("ROBOT1.0_other"))

    run(main())
    assert [e["message"][1]["data"]["text"] for e in sink.events] == [
        "ROBOT1.0_once", "ROBOT1.0_other"]
    assert pipeline.duplicates == 1


def _from(message_id: str, user: str, group: str = GROUP) -> Any:
    raw = json.loads(json.dumps(GROUP_AT))
    raw["d"].update(id=message_id, content=message_id, group_openid=group, group_id=group)
    raw["d"]["author"] = {"id": user, "member_openid": user}
    return frame(raw)


def test_a_batch_resolves_its_new_people_in_one_commit_and_keeps_its_order(
        bridge: InboundBridge, identity_store: LmdbIdentityStore) -> None:
    """Three new people (one of them twice, in two groups) and a known one: one durable
    commit for all, the same person gets the same vUIN everywhere, message ids in order."""
    newcomer = "1" * 32
    run(bridge.translate(_from("ROBOT1.0_before", USER)))  # USER and GROUP known now
    batches_before, _ = identity_store.commit_stats
    batch = [_from("ROBOT1.0_b1", newcomer), _from("ROBOT1.0_b2", "2" * 32),
             _from("ROBOT1.0_b3", USER), _from("ROBOT1.0_b4", newcomer, OTHER)]
    translated = run(bridge.translate_many(batch))
    assert identity_store.commit_stats[0] == batches_before + 1
    events = [onebot for [onebot] in translated]
    assert [e["message"][1]["data"]["text"] for e in events] == [
        "ROBOT1.0_b1", "ROBOT1.0_b2", "ROBOT1.0_b3", "ROBOT1.0_b4"]
    graph = bridge.graph
    for event, source in zip(events, batch, strict=True):
        assert event["user_id"] == graph.lookup(source.author)
        assert event["group_id"] == graph.lookup(source.group)
    assert events[0]["user_id"] == events[3]["user_id"] != events[1]["user_id"]
    assert events[0]["group_id"] != events[3]["group_id"]
    ids = [e["message_id"] for e in events]
    assert ids == sorted(ids) and len(set(ids)) == 4
    for event, source in zip(events, batch, strict=True):
        assert bridge.msgids.real_id_of(event["message_id"]) == source.message_id


def test_last_seen_names_the_identity_a_batch_used_last_in_a_group(
        bridge: InboundBridge) -> None:
    """One person under two member OpenIDs (bound) in one group within one batch: the
    group's last_seen names the one that spoke last, though each identity is resolved once
    (in the order it first appeared) and the known ones are read before any write."""
    first, second = OpenId(APP, USER), OpenId(APP, "3" * 32)
    run(bridge.translate(_from("ROBOT1.0_s0", first.openid)))
    person = bridge.graph.lookup(first)
    assert person is not None
    run(bridge.graph.bind(second, person))
    scene = f"QQ:{APP}:group:{GROUP}"
    for n, batch in enumerate([(second, first), (first, second, first),
                               (second, first, second)]):
        run(bridge.translate_many([_from(f"ROBOT1.0_s{n}{i}", key.openid)
                                   for i, key in enumerate(batch)]))
        assert dict(bridge.graph.show(person).last_seen)[scene].identity == batch[-1].key


def test_a_batch_that_fails_stores_nothing_of_its_messages_and_raises(
        bridge: InboundBridge, identity_store: LmdbIdentityStore) -> None:
    """Bad people in a batch (an identity set the graph refuses) fail the whole batch:
    the source redelivers it; nothing of it reached a framework."""
    good = _from("ROBOT1.0_ok", USER)
    bad = _from("ROBOT1.0_bad", "3" * 32)
    original = bridge.graph.resolve

    async def refusing(keys: Any, scene: Any = None, scene_identity: Any = None,
                       **flags: Any) -> Any:
        if any(getattr(key, "openid", None) == "3" * 32 for key in keys):
            raise RuntimeError("store unavailable")
        return await original(keys, scene=scene, scene_identity=scene_identity, **flags)

    bridge.graph.resolve = refusing  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="store unavailable"):
        run(bridge.translate_many([good, bad]))
    assert bridge.msgids.counts().live_or_unswept == 0


def test_one_delivery_twice_in_a_batch_is_processed_once(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore) -> None:
    pipeline, sink = _pipeline(identity_store, msgid_store)

    async def main() -> None:
        await pipeline.process_batch([_group_msg("ROBOT1.0_twice"), _group_msg("ROBOT1.0_b"),
                                      _group_msg("ROBOT1.0_twice")])

    run(main())
    assert [e["message"][1]["data"]["text"] for e in sink.events] == [
        "ROBOT1.0_twice", "ROBOT1.0_b"]
    assert pipeline.duplicates == 1
    assert len(pipeline._turns) == 0


def test_a_batch_waits_for_the_turns_of_each_of_its_chats(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore) -> None:
    """A batch of two chats goes after a slow event of either, and before later ones."""
    pipeline, sink = _pipeline(identity_store, msgid_store, SlowFirstBridge)

    async def main() -> None:
        first = asyncio.create_task(pipeline(_group_msg("ROBOT1.0_first", OTHER)))
        await asyncio.sleep(0)
        batch = asyncio.create_task(pipeline.process_batch(
            [_group_msg("ROBOT1.0_b1"), _group_msg("ROBOT1.0_b2", OTHER)]))
        await asyncio.sleep(0)
        later = asyncio.create_task(pipeline(_group_msg("ROBOT1.0_later")))
        await asyncio.gather(first, batch, later)

    run(main())
    assert [e["message"][1]["data"]["text"] for e in sink.events] == [
        "ROBOT1.0_first", "ROBOT1.0_b1", "ROBOT1.0_b2", "ROBOT1.0_later"]


GROUPS = (GROUP, OTHER, "5" * 32)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.booleans()), min_size=1,
                max_size=14),
       st.lists(st.tuples(st.integers(1, 4), st.sampled_from([0.0, 0.0, 0.002])), min_size=1,
                max_size=14))
def test_any_batching_delivers_each_event_once_in_each_chats_order(
        plan: list[tuple[int, int, bool]], batches: list[tuple[int, float]]) -> None:
    """Events (a group, a user, maybe a repeat of the event before) cut into batches of
    any size, each batch taking any time, all in flight together: every event reaches the
    framework once, each group's in arrival order, and each user keeps one vUIN."""
    arrivals: list[Any] = []
    for i, (group, user, repeat) in enumerate(plan):
        if repeat and arrivals:
            arrivals.append(arrivals[-1])  # the platform delivered it twice
        else:
            arrivals.append(_from(f"ROBOT1.0_p{i}", f"{user:032X}", GROUPS[group]))
    cuts: list[tuple[list[Any], float]] = []
    rest = list(arrivals)
    for size, delay in batches * len(arrivals):
        if not rest:
            break
        cuts.append((rest[:size], delay))
        rest = rest[size:]
    delays = {id(batch): delay for batch, delay in cuts}

    class Delaying(InboundBridge):
        async def translate_many(self, events: Any) -> list[list[dict[str, Any]]]:
            await asyncio.sleep(delays.get(id(events), 0.0))
            return await super().translate_many(events)

    with tempfile.TemporaryDirectory() as tmp:
        identities = LmdbIdentityStore(Path(tmp) / "openid-map.db")
        messages = LmdbMsgIdStore(Path(tmp) / "msgid-map.db")
        try:
            pipeline, sink = _pipeline(identities, messages, Delaying)

            async def main() -> None:
                # started in arrival order, as the gateway does; each runs on its own
                await asyncio.gather(*(pipeline.process_batch(batch) for batch, _ in cuts))

            run(main())
        finally:
            identities.close()
            messages.close()
    texts = [event["message"][1]["data"]["text"] for event in sink.events]
    first_seen = list(dict.fromkeys(e.message_id for e in arrivals))
    assert sorted(texts) == sorted(first_seen)  # each once
    for group in GROUPS:
        expected = list(dict.fromkeys(e.message_id for e in arrivals if e.group.openid == group))
        got = [e["message"][1]["data"]["text"] for e in sink.events
               if e["message"][1]["data"]["text"] in expected]
        assert got == expected
    vuins: dict[str, int] = {}
    for event in sink.events:
        author = next(e.author.openid for e in arrivals
                      if e.message_id == event["message"][1]["data"]["text"])
        assert vuins.setdefault(author, event["user_id"]) == event["user_id"]
    assert len(set(vuins.values())) == len(vuins)
    assert len(pipeline._turns) == 0


# --------------------------------------------------------------------------- poison text

PEOPLE = st.sampled_from([GROUP, USER, OTHER])


@st.composite
def poisoned_frames(draw: st.DrawFn) -> dict[str, Any]:
    """A dispatch of a type the bridge forwards (or an unknown one), its text fields and
    extra fields drawn from any text, lone surrogates included."""
    t = draw(st.sampled_from(["GROUP_AT_MESSAGE_CREATE", "GROUP_MESSAGE_CREATE",
                              "C2C_MESSAGE_CREATE", "INTERACTION_CREATE", "GROUP_ADD_ROBOT",
                              "FRIEND_ADD", "SOMETHING_NEW"]))
    author = {"id": draw(PEOPLE), "member_openid": draw(PEOPLE), "user_openid": draw(PEOPLE)}
    d: dict[str, Any] = {
        "id": "m" + draw(ANY_TEXT), "content": draw(ANY_TEXT), "author": author,
        "timestamp": draw(st.sampled_from(["2025-01-01T12:00:00+08:00", None]) | ANY_TEXT),
        "group_openid": draw(PEOPLE), "openid": draw(PEOPLE),
        "op_member_openid": draw(PEOPLE), "user_openid": draw(PEOPLE),
        "attachments": [{"content_type": draw(st.sampled_from(["image/png", "voice", ""]))
                         + draw(ANY_TEXT), "url": draw(ANY_TEXT) or "x",
                         "filename": draw(ANY_TEXT)}],
        "data": {"resolved": {"button_data": draw(ANY_TEXT), "button_id": draw(ANY_TEXT)}},
        draw(ANY_TEXT): draw(ANY_JSON),
    }
    return {"op": 0, "s": draw(st.integers(1, 10**6)), "t": t, "id": draw(ANY_TEXT) or None,
            "d": d}


def test_any_text_through_parse_bridge_and_every_transports_encoder() -> None:
    """Webhook body (escaped, raw surrogate bytes, bytes that are not UTF-8) and gateway
    frame → parse → the bridge's OneBot events → the WebSocket text, the HTTP POST body,
    the outbox entry and the de-duplication key: none raises, whatever text the platform
    sent."""
    with tempfile.TemporaryDirectory() as tmp:
        identities = LmdbIdentityStore(Path(tmp) / "openid-map.db")
        messages = LmdbMsgIdStore(Path(tmp) / "msgid-map.db")
        try:
            @settings(max_examples=150, deadline=None)
            @given(poisoned_frames(), st.sampled_from(["webhook", "webhook raw",
                                                       "webhook not utf-8", "gateway"]),
                   st.sampled_from(["array", "string"]), st.booleans())
            def check(raw: dict[str, Any], transport: str, fmt: Any, extensions: bool) -> None:
                body: bytes | str = {
                    "webhook": lambda: json.dumps(raw).encode(),
                    "webhook raw": lambda: json.dumps(raw, ensure_ascii=False).encode(
                        "utf-8", "surrogatepass"),
                    "webhook not utf-8": lambda: json.dumps(raw).encode().replace(
                        b'"content": "', b'"content": "\xff\xc3('),
                    "gateway": lambda: json.dumps(raw).encode(),  # read as bytes
                }[transport]()
                bridge = InboundBridge(IdentityGraph(identities), MsgIdMap(messages),
                                       BridgeSettings(app_id=APP, self_id=SELF,
                                                      message_format=fmt,
                                                      extensions=extensions))
                try:
                    event = parse_dispatch(parse_envelope(body), APP)
                except BadInputError:
                    return  # refused with a clear error: fine (the openids are valid)
                key = delivery_key(event)
                if key is not None:
                    key.encode("utf-8")
                for onebot in run(bridge.translate(event)):
                    jsonio.dumps(onebot).encode("utf-8")  # the WebSocket's text frame
                    jsonio.dumps_bytes(onebot)  # the HTTP POST body
                    jsonio.dumps_bytes({"key": key, "event": onebot})  # the outbox entry

            check()
        finally:
            identities.close()
            messages.close()


# --- pipeline: durable claims (claims rules 2 to 4) -------------------------------------------


class ClaimWatcher:
    """A sink that notes, for each event it gets, whether its delivery was already claimed
    in the store, and that fails while ``failures`` last (a framework's socket breaking)."""

    def __init__(self, store: LmdbMsgIdStore, failures: int = 0) -> None:
        self.store = store
        self.failures = failures
        self.seen: list[tuple[str, bool]] = []

    def publish(self, event: dict[str, Any]) -> None:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("framework socket broke")
        text = event["message"][1]["data"]["text"]
        with self.store.read() as view:  # publish is synchronous: the store, read directly
            claimed = view.claim_expiry(stored_key(f"msg:{text}")) is not None
        self.seen.append((text, claimed))


def _durable_pipeline(identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore,
                      failures: int = 0) -> tuple[InboundPipeline, ClaimWatcher, DurableClaims]:
    """A pipeline as the daemon builds one (a fresh one is a restarted process)."""
    claims = DurableClaims(msgid_store, 660.0)
    bridge = InboundBridge(IdentityGraph(identity_store), MsgIdMap(msgid_store),
                           BridgeSettings(app_id=APP, self_id=SELF))
    sink = ClaimWatcher(msgid_store, failures)
    return InboundPipeline(bridge, [sink], DeliveryLog(660.0, claims=claims)), sink, claims


def test_a_delivery_is_claimed_durably_after_it_went_out_and_a_restart_skips_it(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore) -> None:
    pipeline, sink, claims = _durable_pipeline(identity_store, msgid_store)
    run(pipeline.process_batch([_group_msg("ROBOT1.0_a"), _group_msg("ROBOT1.0_b")]))
    # claimed only once the framework had it (sooner, a crash in between loses the event)
    assert sink.seen == [("ROBOT1.0_a", False), ("ROBOT1.0_b", False)]
    assert run(claims.known(["msg:ROBOT1.0_a", "msg:ROBOT1.0_b"])) == {
        "msg:ROBOT1.0_a", "msg:ROBOT1.0_b"}  # committed before process_batch returned

    restarted, sink, _ = _durable_pipeline(identity_store, msgid_store)
    run(restarted.process_batch([_group_msg("ROBOT1.0_b"), _group_msg("ROBOT1.0_c")]))
    assert sink.seen == [("ROBOT1.0_c", False)]
    assert restarted.duplicates == 1


def test_a_delivery_that_failed_after_its_message_id_was_stored_is_not_claimed(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore) -> None:
    """The message id's commit comes before the sinks; the claim must not ride in it."""
    pipeline, sink, claims = _durable_pipeline(identity_store, msgid_store, failures=1)
    with pytest.raises(RuntimeError, match="socket broke"):
        run(pipeline.process_batch([_group_msg("ROBOT1.0_a")]))
    assert MsgIdMap(msgid_store).virtual_of("ROBOT1.0_a") is not None
    assert run(claims.known(["msg:ROBOT1.0_a"])) == set()
    restarted, sink, _ = _durable_pipeline(identity_store, msgid_store)
    run(restarted.process_batch([_group_msg("ROBOT1.0_a")]))  # the platform's redelivery
    assert sink.seen == [("ROBOT1.0_a", False)] and restarted.duplicates == 0


class FanOutCollect(Collect):
    """A sink fanning out to however many connections it has (as the forward-WS server)."""

    def __init__(self, connections: int) -> None:
        super().__init__()
        self.connections = connections


def test_events_out_counts_what_each_sink_handed_to_a_connection(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore) -> None:
    from gensokyo_idmap import counters

    bridge = InboundBridge(IdentityGraph(identity_store), MsgIdMap(msgid_store),
                           BridgeSettings(app_id=APP, self_id=SELF))
    plain, fan_out = Collect(), FanOutCollect(connections=0)
    pipeline = InboundPipeline(bridge, [plain, fan_out])
    plain_count = counters.EVENTS_OUT.labels(counters.transport_of(plain), APP)
    fan_count = counters.EVENTS_OUT.labels(counters.transport_of(fan_out), APP)
    plain_before, fan_before = plain_count.value, fan_count.value

    run(pipeline(_group_msg("ROBOT1.0_nobody_on_the_fan_out")))
    assert plain_count.value - plain_before == 1  # a framework of its own: handed over
    assert fan_count.value - fan_before == 0  # nobody connected: nothing handed over

    fan_out.connections = 3
    run(pipeline(_group_msg("ROBOT1.0_three_on_the_fan_out")))
    assert plain_count.value - plain_before == 2
    assert fan_count.value - fan_before == 3  # one per connection


@pytest.mark.parametrize("fmt", ["array", "string"])
def test_prefixes_and_remove_at_decide_what_frameworks_get(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock,
        fmt: Any) -> None:
    bridge = InboundBridge(IdentityGraph(identity_store, clock=clock),
                           MsgIdMap(msgid_store, clock=clock),
                           BridgeSettings(app_id=APP, self_id=SELF, message_format=fmt,
                                          white_prefixes=("help",), black_prefixes=("help x",),
                                          remove_at=True), clock=clock)

    def group_at(n: int, content: str) -> Any:
        raw = json.loads(json.dumps(GROUP_AT))
        raw["id"], raw["d"]["id"], raw["d"]["content"] = f"E{n}", f"ROBOT1.0_f{n}", content
        del raw["d"]["attachments"]
        return frame(raw)

    [kept] = run(bridge.translate(group_at(1, " /help me")))
    assert kept["raw_message"] == "/help me"  # the @bot and its space are gone
    assert kept["message"] == ([{"type": "text", "data": {"text": "/help me"}}]
                               if fmt == "array" else "/help me")
    assert run(bridge.translate(group_at(2, " hello"))) == []  # no white prefix
    assert run(bridge.translate(group_at(3, " help x"))) == []  # a black one
    # held back, yet its id is kept: the bot's sends may still answer it
    assert bridge.msgids.virtual_of("ROBOT1.0_f2") is not None
    assert run(bridge.translate(frame(C2C))) == []  # "hi [1]": no white prefix either
    notices = run(bridge.translate(frame({
        "op": 0, "s": 9, "t": "GROUP_ADD_ROBOT", "id": "GROUP_ADD_ROBOT:1",
        "d": {"group_openid": GROUP, "op_member_openid": USER, "timestamp": 1735700000}})))
    assert [n["notice_type"] for n in notices] == ["group_increase"]  # not a message


# --- quotes (rule 8) -----------------------------------------------------------------------


def _at(d: dict[str, Any], t: str = "GROUP_AT_MESSAGE_CREATE") -> Any:
    return frame({"op": 0, "s": 1, "t": t, "id": f"{t}:{d['id']}", "d": d})


def test_a_quote_of_a_message_the_map_holds_is_a_reply_segment_first(
        bridge: InboundBridge) -> None:
    [quoted] = run(bridge.translate(_at(group_message(1))))
    [quote] = run(bridge.translate(_at(quoting(group_message(2), group_message(1)))))
    assert quote["message"] == [
        {"type": "reply", "data": {"id": str(quoted["message_id"])}},
        {"type": "at", "data": {"qq": str(SELF)}},
        {"type": "text", "data": {"text": "m2"}},
    ]
    assert quote["raw_message"] == f"[CQ:reply,id={quoted['message_id']}][CQ:at,qq={SELF}]m2"
    # get_msg of the quote shows the reply too; of the quoted one, its own content
    kept = bridge.msgids.lookup_content(quote["message_id"])
    assert kept is not None and kept[1] is not None
    assert kept[1].message == quote["raw_message"]
    [private] = run(bridge.translate(_at(c2c_message(1, USER), "C2C_MESSAGE_CREATE")))
    [answer] = run(bridge.translate(_at(quoting(c2c_message(2, USER), c2c_message(1, USER)),
                                        "C2C_MESSAGE_CREATE")))
    assert answer["message"][0] == {"type": "reply",
                                    "data": {"id": str(private["message_id"])}}


def test_a_quote_of_a_message_the_map_does_not_hold_adds_nothing(
        bridge: InboundBridge, clock: FakeClock) -> None:
    [plain] = run(bridge.translate(_at(group_message(3))))
    quoted = {**group_message(1), "content": "the quoted words"}
    [unknown] = run(bridge.translate(_at(quoting(group_message(3), quoted))))
    assert unknown["message"] == plain["message"]  # no reply, no quoted text made up
    assert "quoted words" not in unknown["raw_message"]
    # a message of another group with the same msg_idx is not the quoted one
    run(bridge.translate(_at(group_message(1, group=OTHER))))
    [other] = run(bridge.translate(_at(quoting(group_message(4), group_message(1)))))
    assert [segment["type"] for segment in other["message"]] == ["at", "text"]
    # an expired one neither
    run(bridge.translate(_at(group_message(5))))
    clock.advance(3601)
    [late] = run(bridge.translate(_at(quoting(group_message(6), group_message(5)))))
    assert [segment["type"] for segment in late["message"]] == ["at", "text"]


def test_remove_at_keeps_the_reply_first(identity_store: LmdbIdentityStore,
                                         msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    bridge = InboundBridge(IdentityGraph(identity_store, clock=clock),
                           MsgIdMap(msgid_store, clock=clock),
                           BridgeSettings(app_id=APP, self_id=SELF, remove_at=True,
                                          white_prefixes=("m",)), clock=clock)
    [quoted] = run(bridge.translate(_at(group_message(1))))
    d = quoting({**group_message(2), "content": " m2"}, group_message(1))
    [quote] = run(bridge.translate(_at(d)))
    assert quote["message"] == [
        {"type": "reply", "data": {"id": str(quoted["message_id"])}},
        {"type": "text", "data": {"text": "m2"}},
    ]


@pytest.mark.parametrize("backend", MSGID_BACKENDS)
def test_a_batch_finds_its_quotes_on_either_backend_off_the_loop_on_redis(
        identity_store: LmdbIdentityStore, clock: FakeClock, request: pytest.FixtureRequest,
        backend: str) -> None:
    msgids = msgid_map(backend, request, clock, 3600)
    bridge = InboundBridge(IdentityGraph(identity_store, clock=clock), msgids,
                           BridgeSettings(app_id=APP, self_id=SELF,
                                          reads_off_loop=backend == "redis"), clock=clock)
    [[quoted], [private]] = run(bridge.translate_many(
        [_at(group_message(1)), _at(c2c_message(1, USER), "C2C_MESSAGE_CREATE")]))
    batch = run(bridge.translate_many([
        _at(quoting(group_message(2), group_message(1))),
        _at(group_message(3)),
        _at(quoting(c2c_message(2, USER), c2c_message(1, USER)), "C2C_MESSAGE_CREATE"),
        _at(quoting(group_message(4), group_message(9)))]))
    assert [event["message"][0] for [event] in batch] == [
        {"type": "reply", "data": {"id": str(quoted["message_id"])}},
        {"type": "at", "data": {"qq": str(SELF)}},
        {"type": "reply", "data": {"id": str(private["message_id"])}},
        {"type": "at", "data": {"qq": str(SELF)}}]


# --- mentions (issue 33.5) ---------------------------------------------------------------------

THIRD = "73A48B12B0D76B961B4349B5599FA43C"


def _at_of(qq: int | str) -> dict[str, Any]:
    return {"type": "at", "data": {"qq": str(qq)}}


def test_a_member_a_group_message_mentions_is_an_at_of_their_new_vuin(
        bridge: InboundBridge) -> None:
    """The mentioned member is resolved (created) with the message, in its group's scene,
    like its author: the at names their vUIN, and a later at of it finds them there."""
    d = mentioning({**group_message(1, GROUP, USER), "content": "look"}, OTHER)
    [event] = run(bridge.translate(_at(d, "GROUP_MESSAGE_CREATE")))
    other = bridge.graph.lookup(OpenId(APP, OTHER))
    assert other is not None and other not in (event["user_id"], event["group_id"])
    assert event["message"] == [{"type": "text", "data": {"text": "look "}}, _at_of(other)]
    assert event["raw_message"] == f"look [CQ:at,qq={other}]"
    scene = f"QQ:{APP}:group:{GROUP}"
    assert dict(bridge.graph.show(other).last_seen)[scene].identity == OpenId(APP, OTHER).key
    # the message's record names its author, not the member it mentions
    record = bridge.msgids.lookup(event["message_id"])
    kept = bridge.msgids.lookup_content(event["message_id"])
    assert record is not None and kept is not None and kept[1] is not None
    assert kept[1].author == event["user_id"]


def test_the_forms_of_a_group_mention_and_everyone(bridge: InboundBridge) -> None:
    d = {**group_message(2, GROUP, USER),
         "content": f'<qqbot-at-user id="{OTHER}" /> and <@!{THIRD}>, <@{BOT_MEMBER}> hi'}
    d = mentioning(d, everyone=True, at_bot=True)
    d["mentions"].insert(0, {"scope": "single", "id": OTHER, "member_openid": OTHER,
                             "username": "o", "bot": False, "is_you": False})
    [event] = run(bridge.translate(_at(d, "GROUP_MESSAGE_CREATE")))
    other, third = (bridge.graph.lookup(OpenId(APP, who)) for who in (OTHER, THIRD))
    assert other is not None and third is not None  # THIRD: named by the content alone
    assert bridge.graph.lookup(OpenId(APP, BOT_MEMBER)) is None  # the bot is no identity
    assert event["message"] == [
        _at_of(other), {"type": "text", "data": {"text": " and "}}, _at_of(third),
        {"type": "text", "data": {"text": ", "}}, _at_of(SELF),
        {"type": "text", "data": {"text": " hi "}}, _at_of("all")]


def test_mentions_the_content_does_not_show_follow_its_text(bridge: InboundBridge) -> None:
    """``mentions[]`` names them but the text holds no markup of them (as the platform
    strips the @bot): the bot's at leads, the others' follow the text."""
    d = {**mentioning(group_message(3, GROUP, USER), OTHER, everyone=True, at_bot=True),
         "content": " hello"}
    [event] = run(bridge.translate(_at(d, "GROUP_MESSAGE_CREATE")))
    other = bridge.graph.lookup(OpenId(APP, OTHER))
    assert event["message"] == [_at_of(SELF), {"type": "text", "data": {"text": " hello"}},
                                _at_of(other), _at_of("all")]


def test_an_author_mentioning_themselves_is_an_at_of_their_own_vuin(
        bridge: InboundBridge) -> None:
    d = mentioning({**group_message(4, GROUP, USER), "content": "me"}, USER)
    [event] = run(bridge.translate(_at(d)))
    assert event["message"] == [_at_of(SELF), {"type": "text", "data": {"text": "me "}},
                                _at_of(event["user_id"])]


def test_a_channel_mention_the_mentions_list_lacks_is_an_at_too(bridge: InboundBridge) -> None:
    """``<@!id>`` of a guild user ``mentions[]`` does not list was left as text; and
    ``@everyone`` of a ``mention_everyone`` message is an at of all."""
    d = channel_message(1, "hi <@!144115218677563309>", mentions=("144115218677563301",),
                        everyone=True)
    [event] = run(bridge.translate(_at(d, "AT_MESSAGE_CREATE")))
    listed, unlisted = (bridge.graph.lookup(RawId(user))
                        for user in ("144115218677563301", "144115218677563309"))
    assert listed is not None and unlisted is not None
    assert event["message"] == [
        _at_of(SELF), {"type": "text", "data": {"text": " hi "}}, _at_of(unlisted),
        {"type": "text", "data": {"text": " "}}, _at_of(listed),
        {"type": "text", "data": {"text": " "}}, _at_of("all")]


def test_several_bots_events_of_one_turn_are_one_batch(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore) -> None:
    """Issue 34.6: the webhook's callbacks of one turn of the loop, of any bot, are one
    batch (:class:`SharedBatches`): one message-id write for all of them, each event
    translated by its bot (its AppID in its keys, its self_id) and published to its bot's
    sinks only; one platform message id given to two bots is two events, not a repeat."""
    from gensokyo_idmap.bridge.chat_turns import ChatTurns
    from gensokyo_idmap.bridge.inbound import SharedBatches

    class CountedLog(DeliveryLog):
        looks = 0

        async def claim_all(self, keys: Any) -> Any:
            self.looks += 1
            return await super().claim_all(keys)

    graph, msgids = IdentityGraph(identity_store), MsgIdMap(msgid_store)
    deliveries, turns = CountedLog(), ChatTurns()
    other, other_self = "102000002", 20002
    sinks = {APP: Collect(), other: Collect()}
    pipelines = {app: InboundPipeline(
        InboundBridge(graph, msgids, BridgeSettings(app_id=app, self_id=self_id)),
        [sinks[app]], deliveries, key_scope=f"{app}:", turns=turns)
        for app, self_id in ((APP, SELF), (other, other_self))}
    shared = SharedBatches()

    def event_of(app: str, message_id: str) -> Any:
        raw = json.loads(json.dumps(GROUP_AT))
        raw["d"]["id"] = raw["d"]["content"] = message_id
        return parse_dispatch(parse_envelope(json.dumps(raw).encode()), app)

    async def main() -> None:
        before, _ = msgid_store.commit_stats
        handed = ((APP, "ROBOT1.0_m1"), (other, "ROBOT1.0_m1"), (other, "ROBOT1.0_m2"),
                  (APP, "ROBOT1.0_m3"))
        await asyncio.gather(*(shared.of(pipelines[app])(event_of(app, message_id))
                               for app, message_id in handed))
        after, _ = msgid_store.commit_stats
        assert after - before == 1  # one message-id write for the four events
        assert deliveries.looks == 1  # one batch: one look at the claims, not one per bot
        await shared.drain()

    run(main())
    def texts(app: str) -> list[str]:
        return [next(segment["data"]["text"] for segment in event["message"]
                     if segment["type"] == "text") for event in sinks[app].events]

    assert texts(APP) == ["ROBOT1.0_m1", "ROBOT1.0_m3"]
    assert texts(other) == ["ROBOT1.0_m1", "ROBOT1.0_m2"]
    assert {event["self_id"] for event in sinks[other].events} == {other_self}
    ids = [event["message_id"] for sink in sinks.values() for event in sink.events]
    assert len(set(ids)) == 4  # each bot's message ids are its own (msgid rule 10)
    assert graph.lookup(OpenId(other, GROUP)) == sinks[other].events[0]["group_id"]
    assert pipelines[APP].duplicates == pipelines[other].duplicates == 0


def test_a_flood_of_new_groups_costs_the_caches_next_to_nothing(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore) -> None:
    """Issue 36.3: each group of a flood is seen once, so the caches of the hot path keep
    (almost) none of them (second use first); what the rules need is kept: each author's
    name (member profiles) and each delivery's key (the de-duplication window)."""
    pipeline, sink = _pipeline(identity_store, msgid_store)
    groups = 2000

    def named(n: int) -> Any:
        raw = json.loads(json.dumps(GROUP_AT))
        group, user = f"{n:032X}", f"E{n:031X}"
        raw["d"].update(id=f"ROBOT1.0_flood{n}", group_openid=group, group_id=group,
                        author={"id": user, "member_openid": user, "username": f"u{n}"})
        return frame(raw)

    async def main() -> None:
        for first in range(0, groups, 50):
            await pipeline.process_batch([named(n) for n in range(first, first + 50)])

    run(main())
    assert len(sink.events) == groups
    held = {name: len(table) for name, table in pipeline.bridge.memory_tables()}
    assert held["member_profiles"] >= groups
    assert held["inbound_contexts"] < groups // 10
    assert len(pipeline._deliveries) == groups
