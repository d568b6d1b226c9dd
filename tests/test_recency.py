"""The reverse path picks the identity that spoke last (idmap rule 7, recency.py).

A property test against a model: one person (vUIN P: C2C OpenIDs UA, UB of our AppID and
UC of another, member OpenIDs M1, M3 in group G1, M2 in G2, MB in another AppID's group)
and one group vUIN Q (G1, G2 of our AppID, GB of the other) speak in any interleaving, cut
into inbound batches of any size, with time standing still or moving between batches. The
model is the list of (identity, chat, time) events; after every batch the sends of our AppID
go where it says. Then the daemon restarts (both stores reopened: the choice stands), then
the message-id store is flushed: the choice falls back to the durable ``last_seen`` and is
still an OpenID of our AppID.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gensokyo_idmap.bridge.inbound import BridgeSettings, InboundBridge
from gensokyo_idmap.identity import OpenId, UnionId
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.runtime.msgid import MsgIdMap
from gensokyo_idmap.bridge.outbound import OutboundSender, OutboundSettings, Target
from gensokyo_idmap.qq.events import C2CMessage, FriendEvent, GroupMessage, QQEvent
from gensokyo_idmap.recency import chat_recency
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore

from .conftest import FakeClock, run

APP, OTHER_APP = "102000001", "102000002"
SELF = int(APP)
UNION = UnionId("7C1D0000000000000000000000000001")


def _openid(app: str, name: str) -> OpenId:
    return OpenId(app, name.ljust(32, "0"))


UA, UB, UC = _openid(APP, "UA"), _openid(APP, "UB"), _openid(OTHER_APP, "UC")
M1, M2, M3, MB = (_openid(APP, "M1"), _openid(APP, "M2"), _openid(APP, "M3"),
                  _openid(OTHER_APP, "MB"))
G1, G2, GB = _openid(APP, "G1"), _openid(APP, "G2"), _openid(OTHER_APP, "GB")
PERSON = (UA, UB, UC, M1, M2, M3, MB)
GROUPS = (G1, G2, GB)

Kind = Literal["c2c", "friend", "group"]
#: What can happen: (kind, the person's identity, the group it speaks in).
ALPHABET: tuple[tuple[Kind, OpenId, OpenId | None], ...] = (
    ("c2c", UA, None), ("c2c", UB, None), ("c2c", UC, None),
    ("friend", UA, None), ("friend", UB, None),  # FRIEND_ADD: a reply-able event, no message
    ("group", M1, G1), ("group", M3, G1), ("group", M2, G2), ("group", MB, GB),
)


@dataclass(frozen=True)
class Seen:
    """One entry of the model: ``vuin`` ("P" or "Q") spoke as ``identity`` in ``chat``."""

    vuin: str
    identity: OpenId
    chat: OpenId
    kind: Literal["c2c", "group"]
    time: float


def model_events(kind: Kind, person: OpenId, group: OpenId | None, time: float) -> list[Seen]:
    if group is None:
        return [Seen("P", person, person, "c2c", time)]
    return [Seen("Q", group, group, "group", time), Seen("P", person, group, "group", time)]


def last_spoken(model: list[Seen], vuin: str, kind: str, chat: OpenId | None = None
                ) -> OpenId | None:
    """The identity of ``vuin`` that spoke last in ``kind`` of chat of our AppID (in
    ``chat`` when given)."""
    found = [s.identity for s in model if s.vuin == vuin and s.kind == kind
             and s.chat.app_id == APP and (chat is None or s.chat == chat)]
    return found[-1] if found else None


def durable_candidates(model: list[Seen], vuin: str, kind: str) -> set[OpenId]:
    """What ``last_seen`` alone allows: per scene the identity used there and since when it
    is (rewritten only when it changes); the identities of the newest ``since``."""
    scenes: dict[OpenId, tuple[OpenId, float]] = {}
    for s in model:
        if s.vuin == vuin and s.kind == kind and s.chat.app_id == APP:
            held = scenes.get(s.chat)
            if held is None or held[0] != s.identity:
                scenes[s.chat] = (s.identity, s.time)
    if not scenes:
        return set()
    newest = max(since for _, since in scenes.values())
    return {identity for identity, since in scenes.values() if since == newest}


def platform_event(n: int, kind: Kind, person: OpenId, group: OpenId | None) -> QQEvent:
    if kind == "friend":
        return FriendEvent(event_type="FRIEND_ADD", event_id=f"FRIEND_ADD:{n}", user=person)
    if group is None:
        return C2CMessage(event_type="C2C_MESSAGE_CREATE", message_id=f"ROBOT1.0_c{n}",
                          user=person, author_union=UNION)
    return GroupMessage(event_type="GROUP_AT_MESSAGE_CREATE", message_id=f"ROBOT1.0_g{n}",
                        group=group, author=person, author_union=UNION)


@dataclass
class Daemon:
    """What a running daemon holds: both stores, the graph, a bridge per AppID, a sender."""

    identities: LmdbIdentityStore
    messages: LmdbMsgIdStore
    graph: IdentityGraph
    bridges: dict[str, InboundBridge]
    sender: OutboundSender


@contextmanager
def daemon(data: Path, clock: FakeClock) -> Iterator[Daemon]:
    identities = LmdbIdentityStore(data / "openid-map.db")
    messages = LmdbMsgIdStore(data / "msgid-map.db")
    try:
        graph = IdentityGraph(identities, clock=clock)
        msgids = MsgIdMap(messages, clock=clock)
        bridges = {app: InboundBridge(graph, msgids, BridgeSettings(app_id=app, self_id=SELF),
                                      clock=clock) for app in (APP, OTHER_APP)}
        yield Daemon(identities, messages, graph, bridges,
                     OutboundSender(graph, msgids, None, OutboundSettings(APP, SELF)))
    finally:
        identities.close()
        messages.close()


async def one_person_and_one_group(graph: IdentityGraph) -> tuple[int, int]:
    """vUINs P and Q with every identity bound before anyone speaks (as an operator does)."""
    person = (await graph.resolve([UNION])).vuin
    group = (await graph.resolve([G1])).vuin
    for key in PERSON:
        await graph.bind(key, person)
    for key in GROUPS[1:]:
        await graph.bind(key, group)
    return person, group


def check_picks(d: Daemon, model: list[Seen], person: int, group: int, durable: bool) -> None:
    """The sends of our AppID go where the model says: exactly the one that spoke last, or
    (``durable``: the message-id store is gone) one of the newest ``since``; a mention in
    a group always names the identity last seen in that group."""
    for vuin, number, kind in (("P", person, "c2c"), ("Q", group, "group")):
        chosen = d.sender.resolve_target(kind, number, "id")
        assert chosen.vuin == number
        picked = OpenId(APP, chosen.openid)
        if durable:
            allowed = durable_candidates(model, vuin, kind)
            assert picked in allowed or not allowed, (kind, picked, allowed)
        else:
            expected = last_spoken(model, vuin, kind)
            assert expected is None or picked == expected, (kind, picked, expected)
    for chat in (G1, G2):
        member = last_spoken(model, "P", "group", chat)
        if member is not None:
            mention = d.sender.mention(Target("group", chat.openid, group), str(person))
            assert mention == f'<qqbot-at-user id="{member.openid}" />'


@settings(max_examples=40, deadline=None)
# M1 stored, then M3 and M1 in one batch: M1's hit is read before M3's write
@example([(ALPHABET[5], True, 0), (ALPHABET[6], True, 1), (ALPHABET[5], False, 0)])
# UA, UB, UA (C2C), G1, G2, G1 (a group vUIN), the person in G1 then G2 (a mention)
@example([(ALPHABET[i], True, 1) for i in (0, 1, 0, 5, 7, 5)])
@given(st.lists(st.tuples(st.sampled_from(ALPHABET), st.booleans(), st.integers(0, 3)),
                min_size=1, max_size=24))
def test_the_reverse_path_picks_who_spoke_last_through_restart_and_flush(
        plan: list[tuple[tuple[Kind, OpenId, OpenId | None], bool, int]]) -> None:
    """Each step: an event (kind, identity, group), whether a new inbound batch starts with
    it (a batch is also cut where the AppID changes: one bridge per AppID), and how many
    seconds pass before that new batch."""
    clock = FakeClock()
    batches: list[tuple[str, list[tuple[Kind, OpenId, OpenId | None]], int]] = []
    for step, new_batch, gap in plan:
        app = step[1].app_id
        if new_batch or not batches or batches[-1][0] != app:
            batches.append((app, [], gap))
        batches[-1][1].append(step)
    model: list[Seen] = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        with daemon(data, clock) as d:
            person, group = run(one_person_and_one_group(d.graph))
            n = 0
            for app, steps, gap in batches:
                clock.advance(gap)
                events = []
                for kind, identity, chat in steps:
                    n += 1
                    events.append(platform_event(n, kind, identity, chat))
                    model += model_events(kind, identity, chat, clock.now)
                translated = run(d.bridges[app].translate_many(events))
                assert [len(onebot) for onebot in translated] == [1] * len(events)
                check_picks(d, model, person, group, durable=False)
        with daemon(data, clock) as d:  # a restart: the message-id store is kept
            check_picks(d, model, person, group, durable=False)
        for flushed in data.glob("msgid-map.db*"):
            flushed.unlink()
        with daemon(data, clock) as d:  # a restart with the message-id store lost
            check_picks(d, model, person, group, durable=True)


def test_only_a_scene_whose_identity_is_its_chat_has_a_recency(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore,
        clock: FakeClock) -> None:
    """A group's newest message is the group's recency, not its members' (a member shares
    the chat with everyone there); a scene or identity of another shape has none."""
    msgids = MsgIdMap(msgid_store, clock=clock)
    bridge = InboundBridge(IdentityGraph(identity_store, clock=clock), msgids,
                           BridgeSettings(app_id=APP, self_id=SELF), clock=clock)
    run(bridge.translate(platform_event(1, "group", M1, G1)))
    recency = chat_recency(msgids)
    scene = f"QQ:{APP}:group:{G1.openid}"
    newest = msgids.newest_inbound(APP, ("group", "group-event"), G1.openid)
    assert newest is not None and newest[0] == int(clock.now * 1000)
    assert recency(scene, G1.key) == newest
    assert recency(scene, M1.key) is None
    assert recency(f"QQ:{APP}:group:{G2.openid}", G2.key) is None  # never spoke
    assert recency(f"QQ:{OTHER_APP}:group:{G1.openid}", G1.key) is None
    assert recency(f"QQ:{APP}:guild:{G1.openid}", G1.key) is None
    assert recency("no scene at all", G1.key) is None
    assert recency(scene, UNION.key) is None
    assert recency(scene, "not a key") is None
