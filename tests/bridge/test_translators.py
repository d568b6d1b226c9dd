"""The translator table: one translator per kind of platform event; and, through the bridge on
real stores, which non-message events keep their id for a reply (rule 5 of the inbound
module), the part of each kind no other test pins."""

from __future__ import annotations

import json
from dataclasses import fields, is_dataclass
from typing import Any, get_args

import pytest

from gensokyo_idmap.bridge.inbound import BridgeSettings, InboundBridge
from gensokyo_idmap.bridge.translators import TRANSLATORS, Translator
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.runtime.msgid import MsgIdMap
from gensokyo_idmap.qq import events
from gensokyo_idmap.qq.events import QQEvent, parse_dispatch, parse_envelope
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore

from ..conftest import FakeClock, run

APP = "102000001"
GROUP = "A1B2C3D4E5F60718293A4B5C6D7E8F90"
USER = "0F1E2D3C4B5A69788796A5B4C3D2E1F0"
ROBOT = {"group_openid": GROUP, "op_member_openid": USER, "timestamp": 1735700000}
FRIEND = {"openid": USER, "timestamp": 1735700000}


def test_every_kind_of_platform_event_has_exactly_one_translator() -> None:
    kinds = get_args(QQEvent)
    assert len(set(kinds)) == len(kinds)
    assert set(TRANSLATORS) == set(kinds)
    assert all(isinstance(translator, Translator) for translator in TRANSLATORS.values())


def test_every_event_class_of_the_qq_side_is_a_kind_with_a_translator() -> None:
    """A new event class that is not (yet) in the QQEvent union is caught too."""
    classes = {value for name in events.__all__
               if isinstance(value := getattr(events, name), type) and is_dataclass(value)
               and "event_type" in {field.name for field in fields(value)}}
    assert classes == set(TRANSLATORS)


@pytest.mark.parametrize(("t", "d", "kept"), [
    ("GROUP_ADD_ROBOT", ROBOT, ("group-event", GROUP)),
    ("GROUP_MSG_RECEIVE", ROBOT, ("group-event", GROUP)),
    ("GROUP_DEL_ROBOT", ROBOT, None),
    ("GROUP_MSG_REJECT", ROBOT, None),
    ("FRIEND_ADD", FRIEND, ("c2c-event", USER)),
    ("C2C_MSG_RECEIVE", FRIEND, ("c2c-event", USER)),
    ("FRIEND_DEL", FRIEND, None),
    ("C2C_MSG_REJECT", FRIEND, None),
    ("GROUP_MEMBER_ADD", {"group_openid": GROUP, "member_openid": USER}, None),
    ("INTERACTION_CREATE", {"id": "i1", "group_openid": GROUP, "group_member_openid": USER},
     ("group-event", GROUP)),
    ("INTERACTION_CREATE", {"id": "i2", "user_openid": USER}, ("c2c-event", USER)),
    ("INTERACTION_CREATE", {"id": "i3", "scene": "guild"}, None),
    ("READY", {"session_id": "s1"}, None),
    ("SOMETHING_NEW", {"x": 1}, None),
])
def test_the_events_a_reply_may_name_keep_their_id_under_their_chat(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, clock: FakeClock,
        t: str, d: dict[str, Any], kept: tuple[str, str] | None) -> None:
    msgids = MsgIdMap(msgid_store, clock=clock)
    bridge = InboundBridge(IdentityGraph(identity_store, clock=clock), msgids,
                           BridgeSettings(app_id=APP, self_id=int(APP)), clock=clock)
    frame = {"op": 0, "s": 1, "t": t, "id": f"{t}:e1", "d": d}
    run(bridge.translate(parse_dispatch(parse_envelope(json.dumps(frame)), APP)))
    virtual_id = msgids.virtual_of(f"{t}:e1")
    if kept is None:
        assert virtual_id is None
        return
    assert virtual_id is not None
    record = msgids.lookup(virtual_id)
    assert record is not None
    assert (record.app_id, record.chat_kind, record.target, record.direction) == (
        APP, *kept, "in")
