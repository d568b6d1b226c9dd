"""OneBot message format: CQ strings, arrays, escaping (reference §3)."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.onebot.message import (
    Segment,
    escape_param,
    escape_text,
    normalize_message,
    parse_cq,
    segments_to_cq,
    segments_to_cq_within,
    segments_to_json,
    unescape,
)


def test_reference_escaping_example() -> None:
    assert escape_text("- [x] a&b, c") == "- &#91;x&#93; a&amp;b, c"
    assert escape_param("a,b") == "a&#44;b"
    assert unescape("&amp;#91;") == "&#91;"  # &amp; is undone last


def test_reference_cq_example() -> None:
    assert parse_cq("[CQ:face,id=178]look[CQ:image,file=1.jpg]") == [
        Segment("face", (("id", "178"),)),
        Segment.text("look"),
        Segment("image", (("file", "1.jpg"),)),
    ]


def test_value_may_hold_equals_and_escaped_commas() -> None:
    [segment] = parse_cq("[CQ:json,data={&#44;\"a\"=1&#44;}]")
    assert segment.get("data") == '{,"a"=1,}'


def test_text_is_unescaped_and_merged_around_codes() -> None:
    assert parse_cq("a&amp;b[CQ:at,qq=10001] ping") == [
        Segment.text("a&b"), Segment("at", (("qq", "10001"),)), Segment.text(" ping")]


@pytest.mark.parametrize(
    ("text", "reason"),
    [("[CQ:at,qq=1", "no closing"), ("[CQ:,x=1]", "segment type"),
     ("[CQ:at,qq]", "key=value"), ("[CQ:at,=1]", "key=value"), ("[CQ:a[CQ:b]", "not closed")],
)
def test_bad_cq_names_the_problem(text: str, reason: str) -> None:
    with pytest.raises(BadInputError) as err:
        parse_cq(text)
    assert err.value.field == "message" and reason in err.value.reason


def test_message_parameter_forms() -> None:
    as_string = normalize_message("[CQ:at,qq=1] hi")
    as_array = normalize_message([{"type": "at", "data": {"qq": 1}},
                                  {"type": "text", "data": {"text": " hi"}}])
    as_object = normalize_message({"type": "at", "data": {"qq": "1"}})
    assert as_string == as_array
    assert as_object == [Segment("at", (("qq", "1"),))]
    assert normalize_message("[CQ:at,qq=1]", auto_escape=True) == [Segment.text("[CQ:at,qq=1]")]
    assert normalize_message({"type": "image", "data": None}) == [Segment("image")]


@pytest.mark.parametrize(
    ("message", "field"),
    [(42, "message"), ([{"data": {}}], "message[0].type"), ([{"type": "at", "data": 3}],
     "message[0].data"), ([{"type": "text", "data": {}}], "message[0].data.text"),
     ([{"type": "at", "data": {"qq": [1]}}], "message[0].data.qq"), (["x"], "message[0]")],
)
def test_bad_message_parameters_name_the_path(message: object, field: str) -> None:
    with pytest.raises(BadInputError) as err:
        normalize_message(message)
    assert err.value.field == field


texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20)
segments = st.one_of(
    texts.map(Segment.text),
    st.builds(
        Segment,
        st.sampled_from(["at", "face", "image", "reply", "json", "markdown"]),
        st.lists(st.tuples(st.sampled_from(["qq", "id", "file", "data", "url"]), texts),
                 max_size=3, unique_by=lambda kv: kv[0]).map(tuple),
    ),
)


def _merged(items: list[Segment]) -> list[Segment]:
    out: list[Segment] = []
    for item in items:
        if out and item.type == "text" and out[-1].type == "text":
            out[-1] = Segment.text((out[-1].get("text") or "") + (item.get("text") or ""))
        else:
            out.append(item)
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(segments, max_size=6))
def test_cq_round_trip(items: list[Segment]) -> None:
    message = _merged(items)
    assert parse_cq(segments_to_cq(message)) == message
    assert normalize_message(segments_to_json(message)) == message


@settings(max_examples=200, deadline=None)
@given(texts)
def test_escape_round_trips(text: str) -> None:
    assert unescape(escape_text(text)) == text
    assert unescape(escape_param(text)) == text
    assert "[" not in escape_text(text) and "," not in escape_param(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
@example("[CQ:")  # the error branches, every run: random text reaches them only by luck
@example("[CQ:at,qq]")
@example("[CQ:]")
def test_any_string_parses_or_names_the_problem(text: str) -> None:
    try:
        parse_cq(text)
    except BadInputError as err:
        assert err.field == "message" and err.value == text and err.reason


@settings(max_examples=300, deadline=None)
@given(st.lists(segments, max_size=6), st.integers(min_value=0, max_value=120))
def test_cq_within_a_bound_fits_parses_back_and_is_a_start_of_the_whole(
        items: list[Segment], max_bytes: int) -> None:
    message = _merged(items)
    whole = segments_to_cq(message)
    cut = segments_to_cq_within(message, max_bytes)
    assert len(cut.encode("utf-8")) <= max_bytes
    assert whole.startswith(cut)
    kept = parse_cq(cut)  # never half a code
    assert kept == message[:len(kept)] or kept[-1].type == "text"
    if len(whole.encode("utf-8")) <= max_bytes:
        assert cut == whole


def test_cq_within_cuts_text_never_an_escape_and_replaces_lone_surrogates() -> None:
    message = [Segment.text("ab&c"), Segment("face", (("id", "1"),))]
    assert segments_to_cq_within(message, 3) == "ab"  # "&amp;" does not fit: not cut in half
    assert segments_to_cq_within(message, 7) == "ab&amp;"
    assert segments_to_cq_within(message, 8) == "ab&amp;c"  # the face code does not fit
    assert segments_to_cq_within(message, 100) == "ab&amp;c[CQ:face,id=1]"
    assert segments_to_cq_within([Segment.text("x\ud800y")], 100) == "x?y"
