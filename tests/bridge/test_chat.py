"""A Chat spells its scene one way and reads it back (bridge/chat.py, identity.chat_scene)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap.bridge.chat import CHAT_KINDS, Chat
from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.identity import OpenId, chat_scene
from gensokyo_idmap.runtime.msgid import EVENT_KINDS
from gensokyo_idmap.runtime.replies import REPLY_WINDOW_SECONDS

PLATFORMS = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,31}", fullmatch=True)
APP_IDS = st.from_regex(r"[0-9]{1,20}", fullmatch=True)
OPENIDS = st.from_regex(r"[A-Za-z0-9_\-]{1,64}", fullmatch=True)


@given(PLATFORMS, APP_IDS, st.sampled_from(CHAT_KINDS), OPENIDS)
def test_chat_scene_chat_round_trip(platform: str, app_id: str, kind: str,
                                    openid: str) -> None:
    chat = Chat(app_id, kind, openid, platform)  # type: ignore[arg-type]
    assert Chat.of_scene(chat.scene) == chat
    assert chat.scene.startswith(Chat.kind_prefix(app_id, chat.kind, platform))


def test_scene_is_the_one_inbound_events_use() -> None:
    group = OpenId("102000001", "G1")
    assert Chat("102000001", "group", "G1").scene == chat_scene(
        group.app_id, "group", group.openid) == "QQ:102000001:group:G1"


def test_context_and_window_follow_the_kind() -> None:
    chat = Chat("102000001", "c2c", "U1")
    out = chat.context("out")
    assert (out.app_id, out.chat_kind, out.target, out.direction) == (
        "102000001", "c2c", "U1", "out")
    event = chat.event_context()
    assert (event.chat_kind, event.direction) == (EVENT_KINDS["c2c"], "in")
    assert chat.reply_window == REPLY_WINDOW_SECONDS["c2c"]
    assert chat.holds("c2c") and chat.holds("c2c-event") and not chat.holds("group")


@pytest.mark.parametrize("scene", [
    "", "QQ", "QQ:102000001", "QQ:102000001:group", "QQ:102000001:group:",
    ":102000001:group:G1", "QQ::group:G1", "QQ:102000001::G1",
])
def test_malformed_scene_is_refused_naming_it(scene: str) -> None:
    with pytest.raises(BadInputError) as err:
        Chat.of_scene(scene)
    assert err.value.field == "scene"
    assert "<PLATFORM>:<appid>:<kind>:<openid>" in err.value.message


def test_scene_of_another_kind_of_chat_is_refused_naming_the_kind() -> None:
    with pytest.raises(BadInputError) as err:
        Chat.of_scene("QQ:102000001:guild:C1")
    assert err.value.field == "scene" and "'guild'" in err.value.message


@pytest.mark.parametrize(("kind", "openid", "field"), [
    ("guild", "G1", "chat kind"), ("group", "", "chat openid")])
def test_chat_without_a_kind_or_openid_is_refused(kind: str, openid: str, field: str) -> None:
    with pytest.raises(BadInputError) as err:
        Chat("102000001", kind, openid)  # type: ignore[arg-type]
    assert err.value.field == field
