"""OneBot segments → the platform messages that carry them (bridge/plan.py)."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.onebot.message import Segment, normalize_message
from gensokyo_idmap.bridge.plan import EMOJI_TEXT_CHATS, FILE_TYPES, MessagePlan, plan_message
from gensokyo_idmap.qq.outgoing import Media, OutgoingPart

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()


def no_mention(qq: str) -> str:
    raise AssertionError(f"mention called unexpectedly with {qq!r}")


def plan(message: object, mention=no_mention, chat_kind: str = "group") -> MessagePlan:
    return plan_message(normalize_message(message), chat_kind, mention)


def refused(message: object, mention=no_mention) -> BadInputError:
    with pytest.raises(BadInputError) as err:
        plan(message, mention)
    return err.value


def seg(kind: str, **data: str) -> dict[str, object]:
    return {"type": kind, "data": data}


# --- text, media, markdown splits ---------------------------------------------------------


def test_text_only_is_one_text_message() -> None:
    result = plan([seg("text", text="hello "), seg("text", text="world")])
    assert result == MessagePlan((OutgoingPart(0, content="hello world"),), None)


def test_cq_string_text_is_one_text_message() -> None:
    assert plan("hi there").parts == (OutgoingPart(0, content="hi there"),)


def test_text_and_two_images_are_two_media_messages_text_on_first() -> None:
    result = plan([
        seg("text", text="look"),
        seg("image", file="https://example.com/a.png"),
        seg("image", url="http://example.com/b.png"),
    ])
    assert result.parts == (
        OutgoingPart(7, content="look", media=Media(1, url="https://example.com/a.png")),
        OutgoingPart(7, content=" ", media=Media(1, url="http://example.com/b.png")),
    )
    assert result.reply_to is None


def test_image_without_text_has_blank_caption() -> None:
    [part] = plan([seg("text", text="   "), seg("image", file="https://x/a.png")]).parts
    assert part.msg_type == 7 and part.content == " "


@pytest.mark.parametrize(("kind", "file_type"), [("image", 1), ("video", 2), ("record", 3)])
def test_media_file_type_follows_segment_type(kind: str, file_type: int) -> None:
    [part] = plan([seg(kind, file="https://x/y")]).parts
    assert part.media == Media(file_type, url="https://x/y")
    assert FILE_TYPES[kind] == file_type


def test_url_is_preferred_over_file() -> None:
    [part] = plan([seg("image", file="local.png", url="https://x/a.png")]).parts
    assert part.media == Media(1, url="https://x/a.png")


def test_markdown_and_keyboard_go_together_as_msg_type_2() -> None:
    result = plan([seg("markdown", content="# Title"), seg("keyboard", id="kb_tpl_1")])
    assert result.parts == (
        OutgoingPart(2, markdown={"content": "# Title"}, keyboard={"id": "kb_tpl_1"}),
    )


def test_markdown_alone_has_no_keyboard() -> None:
    [part] = plan([seg("markdown", content="**b**")]).parts
    assert part == OutgoingPart(2, markdown={"content": "**b**"}, keyboard=None)


def test_markdown_and_keyboard_need_their_short_form_or_data() -> None:
    for kind, short_form in (("markdown", "content"), ("keyboard", "id")):
        err = refused([seg(kind)])
        assert (err.field, err.value) == ("message[0]", kind)
        assert err.reason == f"a {kind} segment needs {short_form} or data"


def test_text_with_markdown_goes_first_as_its_own_message() -> None:
    result = plan([seg("text", text="intro"), seg("markdown", content="md")])
    assert result.parts == (
        OutgoingPart(0, content="intro"),
        OutgoingPart(2, markdown={"content": "md"}),
    )


def test_markdown_with_media_puts_text_on_the_media() -> None:
    result = plan([seg("text", text="cap"), seg("markdown", content="md"),
                   seg("image", file="https://x/a.png")])
    assert result.parts == (
        OutgoingPart(2, markdown={"content": "md"}),
        OutgoingPart(7, content="cap", media=Media(1, url="https://x/a.png")),
    )


def test_keyboard_without_markdown_is_refused() -> None:
    err = refused([seg("text", text="hi"), seg("keyboard", id="kb")])
    assert err.field == "message"
    assert "markdown" in err.reason


@pytest.mark.parametrize("message", [[], "", [seg("text", text="")],
                                     [seg("text", text="  \n\t ")], "   "])
def test_empty_or_blank_message_is_refused(message: object) -> None:
    err = refused(message)
    assert err.field == "message"
    assert "empty" in err.reason


def test_message_of_only_dropped_segments_is_refused_as_empty_naming_them() -> None:
    with pytest.raises(BadInputError) as err:
        plan_message(normalize_message([seg("face", id="178")]), "group", no_mention, "drop")
    assert err.value.field == "message"
    assert "message[0] face" in err.value.reason


# --- reply and at -------------------------------------------------------------------------


def test_reply_segment_names_the_virtual_id() -> None:
    result = plan([seg("reply", id="12345"), seg("text", text="yes")])
    assert result.reply_to == 12345
    assert result.parts == (OutgoingPart(0, content="yes"),)


def test_reply_id_given_as_number_is_read() -> None:
    assert plan([{"type": "reply", "data": {"id": 77}}, seg("text", text="x")]).reply_to == 77


def test_first_reply_segment_wins() -> None:
    result = plan([seg("reply", id="5"), seg("text", text="x"), seg("reply", id="9")])
    assert result.reply_to == 5


@pytest.mark.parametrize("bad", ["abc", "0", "-1", "1.5", "4294967296"])
def test_bad_reply_id_is_refused_naming_its_index(bad: str) -> None:
    err = refused([seg("text", text="x"), seg("reply", id=bad)])
    assert err.field == "message[1].id"


def test_reply_without_id_is_refused() -> None:
    assert refused([seg("reply"), seg("text", text="x")]).field == "message[0].id"


def test_at_segment_is_rendered_through_mention() -> None:
    seen: list[str] = []

    def mention(qq: str) -> str:
        seen.append(qq)
        return f"<@{qq}-openid>"

    result = plan([seg("at", qq="10001"), seg("text", text=" hi")], mention)
    assert seen == ["10001"]
    assert result.parts == (OutgoingPart(0, content="<@10001-openid> hi"),)


def test_at_with_numeric_qq_reaches_mention_as_text() -> None:
    seen: list[str] = []
    plan([{"type": "at", "data": {"qq": 42}}, seg("text", text="x")],
         lambda qq: seen.append(qq) or "")
    assert seen == ["42"]


def test_an_at_mention_leaves_out_leaves_nothing_to_send() -> None:
    """``""``: an at of the bot itself, left out as documented."""
    assert refused([seg("at", qq="10001")], lambda qq: "").field == "message"


@pytest.mark.parametrize("chat_kind", ["group", "c2c", "dms"])
def test_an_at_the_platform_cannot_carry_refuses_the_send_naming_it(chat_kind: str) -> None:
    with pytest.raises(BadInputError) as err:
        plan([seg("text", text="x"), seg("at", qq="all")], lambda qq: None, chat_kind)
    assert (err.value.field, err.value.value) == ("message[1].qq", "all")
    assert f"cannot carry an at segment of all in a {chat_kind} message" in err.value.reason
    assert "unsupported_segments" in err.value.reason


def test_drop_leaves_an_at_the_platform_cannot_carry_out_and_names_it() -> None:
    result = plan_message(normalize_message([seg("at", qq="42"), seg("text", text=" hi"),
                                             seg("at", qq="all")]),
                          "c2c", lambda qq: None, "drop")
    assert result.parts == (OutgoingPart(0, content=" hi"),)
    assert result.dropped == ((0, "at"), (2, "at"))


def test_at_without_qq_is_refused() -> None:
    assert refused([seg("text", text="x"), seg("at")]).field == "message[1].qq"


# --- segment types ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["mystery", "redbag", "gift"])
def test_unknown_segment_type_is_refused_naming_its_index(kind: str) -> None:
    err = refused([seg("text", text="x"), seg(kind, a="b")])
    assert err.field == "message[1].type"
    assert err.value == kind


UNCARRIED = ["face", "poke", "shake", "share", "music", "json", "xml", "dice", "anonymous",
             "mystery"]


@pytest.mark.parametrize("kind", UNCARRIED)
@pytest.mark.parametrize("chat_kind", ["group", "c2c"])
def test_a_segment_the_platform_cannot_carry_refuses_the_send_naming_it(
        kind: str, chat_kind: str) -> None:
    with pytest.raises(BadInputError) as err:
        plan([seg("text", text="x"), seg(kind, id="1")], chat_kind=chat_kind)
    assert err.value.field == "message[1].type"
    assert err.value.value == kind
    assert f"cannot carry a {kind} segment in a {chat_kind} message" in err.value.reason
    assert "unsupported_segments" in err.value.reason


@pytest.mark.parametrize("kind", UNCARRIED)
def test_drop_leaves_the_segment_out_and_names_it(kind: str) -> None:
    result = plan_message(normalize_message([seg(kind, id="1"), seg("text", text="after")]),
                          "group", no_mention, "drop")
    assert result.parts == (OutgoingPart(0, content="after"),)
    assert result.dropped == ((0, kind),)


def test_refuse_is_the_default() -> None:
    with pytest.raises(BadInputError):
        plan_message(normalize_message("[CQ:face,id=14]hi"), "c2c", no_mention)


@pytest.mark.parametrize("chat_kind", sorted(EMOJI_TEXT_CHATS))
def test_a_face_where_the_text_shows_emoji_is_sent_in_the_embedded_form(
        chat_kind: str) -> None:
    result = plan("hi[CQ:face,id=14] there[CQ:face,id=076]", chat_kind=chat_kind)
    assert result.parts == (OutgoingPart(0, content="hi<emoji:14> there<emoji:76>"),)
    assert result.dropped == ()


@pytest.mark.parametrize("face_id", ["", "abc", "1.5", "١٢"])
def test_a_face_id_that_is_not_a_number_is_refused(face_id: str) -> None:
    chat_kind = sorted(EMOJI_TEXT_CHATS)[0]
    with pytest.raises(BadInputError) as err:
        plan([seg("face", id=face_id)], chat_kind=chat_kind)
    assert err.value.field == "message[0].id"


def test_file_segment_is_refused() -> None:
    err = refused([seg("text", text="x"), seg("file", file="https://x/a.zip")])
    assert err.field == "message[1]"
    assert err.value == "file"


# --- media sources ------------------------------------------------------------------------


def test_valid_base64_becomes_file_data() -> None:
    [part] = plan([seg("image", file="base64://" + PNG)]).parts
    assert part.media == Media(1, file_data=PNG)
    assert part.media.url is None


@pytest.mark.parametrize("data", ["not base64!!", "abc", "====", "a b c d"])
def test_invalid_base64_is_refused(data: str) -> None:
    err = refused([seg("image", file="base64://" + data)])
    assert err.field == "message[0].file"
    assert "base64" in err.reason


def test_empty_base64_is_refused() -> None:
    err = refused([seg("image", file="base64://")])
    assert err.field == "message[0].file"
    assert "empty" in err.reason


@pytest.mark.parametrize("source", [
    "file:///tmp/a.png", "/tmp/a.png", "a.png", "C:\\pics\\a.png", "ftp://x/a.png",
])
def test_local_files_and_other_schemes_are_refused(source: str) -> None:
    err = refused([seg("text", text="x"), seg("image", file=source)])
    assert err.field == "message[1].file"
    assert "local files are not read" in err.reason


def test_media_without_source_is_refused() -> None:
    assert refused([seg("image")]).field == "message[0].file"


# --- markdown / keyboard data passthrough ------------------------------------------------

MD_OBJECT = {"custom_template_id": "t1", "params": [{"key": "k", "values": ["v"]}]}
KB_OBJECT = {"content": {"rows": [{"buttons": [{"id": "1"}]}]}}


def test_markdown_data_plain_json_is_passed_through() -> None:
    [part] = plan([seg("markdown", data=json.dumps(MD_OBJECT))]).parts
    assert part.msg_type == 2 and part.markdown == MD_OBJECT


def test_markdown_data_base64_json_is_passed_through() -> None:
    encoded = base64.b64encode(json.dumps(MD_OBJECT).encode()).decode()
    [part] = plan([seg("markdown", data="base64://" + encoded)]).parts
    assert part.markdown == MD_OBJECT


def test_keyboard_data_is_passed_through() -> None:
    [part] = plan([seg("markdown", content="m"),
                   seg("keyboard", data=json.dumps(KB_OBJECT))]).parts
    assert part.keyboard == KB_OBJECT


def test_markdown_content_is_preferred_over_data() -> None:
    [part] = plan([seg("markdown", content="c", data=json.dumps(MD_OBJECT))]).parts
    assert part.markdown == {"content": "c"}


@pytest.mark.parametrize("raw", ["[1, 2]", '"text"', "3", "null", "true"])
def test_markdown_data_must_be_a_json_object(raw: str) -> None:
    err = refused([seg("markdown", data=raw)])
    assert err.field == "message[0].data"
    assert "JSON object" in err.reason


@pytest.mark.parametrize("raw", ["{not json", "base64://" + base64.b64encode(b"[1]").decode()])
def test_markdown_data_not_json_or_not_object_is_refused(raw: str) -> None:
    assert refused([seg("markdown", data=raw)]).field == "message[0].data"


@pytest.mark.parametrize("raw", [
    "base64://@@@", "base64://" + base64.b64encode(b"\xff{}").decode(),  # not UTF-8
])
def test_markdown_data_bad_base64_or_utf8_is_refused(raw: str) -> None:
    err = refused([seg("markdown", data=raw)])
    assert err.field == "message[0].data"
    assert "base64" in err.reason


def test_keyboard_data_non_object_is_refused_naming_its_index() -> None:
    err = refused([seg("markdown", content="m"), seg("keyboard", data="[]")])
    assert err.field == "message[1].data"


def test_markdown_and_keyboard_without_anything_are_refused() -> None:
    assert refused([seg("markdown")]).field == "message[0]"
    assert refused([seg("markdown", content="m"), seg("keyboard")]).field == "message[1]"


# --- property -----------------------------------------------------------------------------


@given(st.lists(st.text(max_size=20), min_size=1, max_size=6))
def test_text_segments_become_one_part_of_their_concatenation(texts: list[str]) -> None:
    joined = "".join(texts)
    assume(joined.strip())
    result = plan_message([Segment.text(t) for t in texts], "c2c", no_mention)
    assert result.parts == (OutgoingPart(0, content=joined),)
    assert result.reply_to is None


def test_absurdly_nested_markdown_data_is_bad_input_not_a_crash() -> None:
    with pytest.raises(BadInputError) as err:
        plan_message([Segment("markdown", (("data", "[" * 100_000),))], "group", str)
    assert err.value.field == "message[0].data"
