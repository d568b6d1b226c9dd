"""jsonio: orjson's speed with json's results (property tests against the standard library)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap import jsonio

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
