"""jsonio: orjson's speed with json's results (property tests against the standard library)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap import jsonio

from .conftest import ANY_JSON

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=20,
)


@given(json_values)
def test_dumps_reads_back_as_json_would_write_it(value: Any) -> None:
    text = jsonio.dumps(value)
    assert json.loads(text) == json.loads(json.dumps(value, ensure_ascii=False))
    assert jsonio.loads(text) == json.loads(text)


@given(json_values)
def test_loads_reads_what_json_writes(value: Any) -> None:
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False, indent=2)):
        assert jsonio.loads(text) == json.loads(text)
        assert jsonio.loads(text.encode("utf-8")) == json.loads(text)


@given(json_values)
def test_dumps_bytes_is_dumps_in_utf8(value: Any) -> None:
    assert jsonio.dumps_bytes(value) == jsonio.dumps(value).encode("utf-8")


def test_dumps_bytes_falls_back_as_dumps_does() -> None:
    assert jsonio.dumps_bytes({1: "你"}) == '{"1":"你"}'.encode()


def test_non_ascii_is_written_as_is_and_compact() -> None:
    assert jsonio.dumps({"text": "你好", "n": [1, 2]}) == '{"text":"你好","n":[1,2]}'


def test_what_orjson_refuses_to_write_json_writes() -> None:
    assert jsonio.dumps({1: "a"}) == '{"1":"a"}'
    assert jsonio.dumps({"big": 2**70}) == '{"big":1180591620717411303424}'


def test_default_turns_unknown_objects_into_json() -> None:
    assert jsonio.dumps({"p": Path("/x")}, default=str) == '{"p":"/x"}'
    with pytest.raises(TypeError):
        jsonio.dumps({"p": Path("/x")})


@pytest.mark.parametrize("text", ["NaN", '{"a": Infinity}', "[-Infinity]", "{", "", "{'a': 1}",
                                  '{"a": 1} trailing'])
def test_what_is_not_json_is_refused_with_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        jsonio.loads(text)


# --------------------------------------------------------------------------- lone surrogates


def encodable(value: Any) -> bool:
    """Every string of ``value`` (keys too) encodes as UTF-8."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@given(ANY_JSON, st.sampled_from(["escaped", "raw text", "raw bytes"]))
def test_whatever_json_text_spells_is_read_as_encodable_text(value: Any, form: str) -> None:
    escaped = json.dumps(value)  # a lone surrogate as \udXXX, as on the wire
    raw: str | bytes = {"escaped": escaped,
                        "raw text": json.dumps(value, ensure_ascii=False),
                        "raw bytes": json.dumps(value, ensure_ascii=False).encode(
                            "utf-8", "surrogatepass")}[form]
    read, repaired = jsonio.loads_repaired(raw)
    assert encodable(read)
    jsonio.dumps(read).encode("utf-8")
    jsonio.dumps_bytes(read)
    meant = json.loads(raw)  # what the text says (an escaped pair is one character)
    assert (repaired > 0) == (not encodable(meant))
    if encodable(meant):
        assert read == meant


@pytest.mark.parametrize(("text", "expected", "count"), [
    (r'{"content":"hi \ud83d"}', {"content": "hi \ufffd"}, 1),
    (r'{"content":"\ude00 x \ud83d"}', {"content": "\ufffd x \ufffd"}, 1),
    (r'{"a":{"b":["\udfff",1,{"\ud800k":"v"}]},"c":"\ud800"}',
     {"a": {"b": ["\ufffd", 1, {"\ufffdk": "v"}]}, "c": "\ufffd"}, 3),
    (r'"\ud83d"', "\ufffd", 1),
    (r'{"ok":"\ud83d\ude00","big":18446744073709551616}',  # a pair is one character
     {"ok": "😀", "big": 18446744073709551616}, 0),
])
def test_lone_surrogates_become_the_replacement_character(text: str, expected: Any,
                                                           count: int) -> None:
    assert jsonio.loads_repaired(text) == (expected, count)
    assert jsonio.loads_repaired(text.encode())[0] == expected
    assert jsonio.loads(text) == json.loads(text)  # loads reads what json reads


def test_raw_surrogate_bytes_and_bytes_that_are_not_utf8_are_repaired_too() -> None:
    assert jsonio.loads_repaired(b'{"content":"\xed\xa0\xbd!"}') == ({"content": "\ufffd!"}, 1)
    assert jsonio.loads_repaired(b'{"a":"\xff\xfe x","b":"\\ud83d"}') == (
        {"a": "\ufffd\ufffd x", "b": "\ufffd"}, 2)
    with pytest.raises(ValueError):
        jsonio.loads_repaired(b'{"a":\xff}')  # not JSON either way: refused as before
    with pytest.raises(ValueError):
        jsonio.loads(b'{"a":"\xff"}')  # loads reads what json reads


def test_repair_of_deep_nesting_does_not_recurse() -> None:
    depth = 900
    text = "[" * depth + r'"\ud83d"' + "]" * depth
    value, repaired = jsonio.loads_repaired(text)
    assert repaired == 1
    for _ in range(depth):
        value = value[0]
    assert value == "\ufffd"
