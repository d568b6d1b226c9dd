"""OneBot v11 action frames and responses: parsing, response shapes, lenient params."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap.errors import BadInputError, NotFoundError, StoreError
from gensokyo_idmap.onebot.actions import (
    RETCODE_ASYNC,
    RETCODE_UNKNOWN_ACTION,
    ActionRequest,
    async_accepted,
    bool_param,
    failed,
    failed_from,
    int_param,
    ok,
    parse_action,
    str_param,
    unknown_action,
)

Reader = Callable[..., Any]
RESPONSE_KEYS = {"status", "retcode", "data", "message", "wording", "echo"}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


# --- parse_action -------------------------------------------------------------------------


def test_full_frame_is_read() -> None:
    request = parse_action({"action": "send_msg", "params": {"message": "hi"}, "echo": "e1"})
    assert request == ActionRequest("send_msg", {"message": "hi"}, "e1", False)


def test_missing_params_and_echo_mean_none() -> None:
    request = parse_action({"action": "get_status"})
    assert request.action == "get_status"
    assert dict(request.params) == {}
    assert request.echo is None
    assert request.queued is False


def test_null_params_mean_no_arguments() -> None:
    assert dict(parse_action({"action": "get_status", "params": None}).params) == {}


@pytest.mark.parametrize("params", [[], [1, 2], "x=1", 5, True])
def test_non_object_params_are_refused(params: object) -> None:
    with pytest.raises(BadInputError) as err:
        parse_action({"action": "send_msg", "params": params})
    assert err.value.field == "params"


def test_async_suffix_is_stripped_and_flagged() -> None:
    request = parse_action({"action": "send_msg_async", "params": {"a": 1}, "echo": 7})
    assert request.action == "send_msg"
    assert request.queued is True
    assert request.params == {"a": 1}
    assert request.echo == 7


def test_bare_async_name_is_an_action_not_a_suffix() -> None:
    request = parse_action({"action": "_async"})
    assert request.action == "_async"
    assert request.queued is False


def test_async_suffix_is_stripped_only_once() -> None:
    request = parse_action({"action": "x_async_async"})
    assert request.action == "x_async"
    assert request.queued is True


@pytest.mark.parametrize("frame", [None, [], ["send_msg"], "send_msg", 3, 1.5, True])
def test_non_object_frames_are_refused(frame: object) -> None:
    with pytest.raises(BadInputError) as err:
        parse_action(frame)
    assert err.value.field == "frame"


@pytest.mark.parametrize("action", [None, "", 5, True, ["send_msg"], {"a": 1}, "a" * 65])
def test_bad_action_is_refused_naming_action(action: object) -> None:
    with pytest.raises(BadInputError) as err:
        parse_action({"action": action, "params": {}})
    assert err.value.field == "action"
    assert err.value.retcode == 100


def test_missing_action_is_refused_naming_action() -> None:
    with pytest.raises(BadInputError) as err:
        parse_action({"params": {}})
    assert err.value.field == "action"


def test_action_of_64_chars_is_accepted() -> None:
    assert parse_action({"action": "a" * 64}).action == "a" * 64


# --- responses ----------------------------------------------------------------------------


def test_ok_shape() -> None:
    assert ok({"message_id": 5}, echo="abc") == {
        "status": "ok", "retcode": 0, "data": {"message_id": 5}, "message": "",
        "wording": "", "echo": "abc",
    }


def test_ok_default_echo_is_none() -> None:
    response = ok(None)
    assert set(response) == RESPONSE_KEYS
    assert response["echo"] is None and response["data"] is None


def test_failed_shape_carries_message_in_message_and_wording() -> None:
    assert failed(100, "bad thing", echo=[1]) == {
        "status": "failed", "retcode": 100, "data": None, "message": "bad thing",
        "wording": "bad thing", "echo": [1],
    }


def test_async_accepted_shape() -> None:
    assert async_accepted("e") == {
        "status": "async", "retcode": RETCODE_ASYNC, "data": None, "message": "",
        "wording": "", "echo": "e",
    }
    assert RETCODE_ASYNC == 1


def test_unknown_action_shape() -> None:
    response = unknown_action("fly_to_moon", echo=3)
    assert set(response) == RESPONSE_KEYS
    assert response["status"] == "failed"
    assert response["retcode"] == RETCODE_UNKNOWN_ACTION == 1404
    assert "fly_to_moon" in response["message"]
    assert response["wording"] == response["message"]
    assert response["data"] is None and response["echo"] == 3


def test_failed_from_uses_the_error_class_retcode() -> None:
    bad = BadInputError("user_id", "x", "must be an integer")
    response = failed_from(bad, echo="q")
    assert response["retcode"] == 100
    assert response["message"] == bad.message
    assert "user_id" in response["message"]
    assert response["echo"] == "q"
    assert failed_from(StoreError("disk gone"))["retcode"] == 102
    assert failed_from(NotFoundError("no such vuin"))["message"] == "no such vuin"


@pytest.mark.parametrize("response", [
    ok(1), ok([1], 2), failed(5, "m"), async_accepted(), unknown_action("a"),
    failed_from(BadInputError("f", 1, "r")),
])
def test_every_response_has_all_keys(response: dict[str, Any]) -> None:
    assert set(response) == RESPONSE_KEYS
    assert isinstance(response["retcode"], int)
    assert isinstance(response["message"], str) and isinstance(response["wording"], str)


@given(json_values)
def test_echo_of_any_json_type_returns_unchanged(echo: Any) -> None:
    request = parse_action({"action": "send_msg_async", "params": {}, "echo": echo})
    assert request.echo == echo and type(request.echo) is type(echo)
    for response in (ok({"x": 1}, request.echo), failed(100, "no", request.echo),
                     async_accepted(request.echo), unknown_action("x", request.echo)):
        assert response["echo"] == echo
        assert type(response["echo"]) is type(echo)


# --- int_param ----------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [
    (42, 42), ("42", 42), (" 7 ", 7), ("0", 0), (0, 0), (-3, -3), ("007", 7),
    (2**40, 2**40),
])
def test_int_param_accepts(value: object, expected: int) -> None:
    assert int_param({"x": value}, "x") == expected


INT_REFUSED = [1.5, 2.0, True, False, "1.5", "-3", "+3", "", "  ", "abc", "1e3", "٣", [1],
               {"a": 1}]
BOOL_REFUSED = [2, -1, 1.0, 0.5, "maybe", "2", "t", [True], {}]
STR_REFUSED = [True, False, 1.5, [1], {"a": "b"}]


@pytest.mark.parametrize(("reader", "value"), [
    *((int_param, value) for value in INT_REFUSED),
    *((bool_param, value) for value in BOOL_REFUSED),
    *((str_param, value) for value in STR_REFUSED),
])
def test_param_readers_refuse_naming_the_parameter(reader: Reader, value: object) -> None:
    with pytest.raises(BadInputError) as err:
        reader({"p": value}, "p")
    assert err.value.field == "p"
    assert err.value.value == value


@pytest.mark.parametrize("reader", [int_param, str_param])
@pytest.mark.parametrize("params", [{}, {"p": None}])
def test_required_missing_param_is_refused(reader: Reader, params: dict[str, Any]) -> None:
    with pytest.raises(BadInputError) as err:
        reader(params, "p")
    assert err.value.field == "p"
    assert "required" in err.value.reason


def test_int_param_optional_gives_default() -> None:
    assert int_param({}, "x", required=False) is None
    assert int_param({}, "x", required=False, default=9) == 9
    assert int_param({"x": None}, "x", required=False, default=9) == 9
    assert int_param({"x": "3"}, "x", required=False, default=9) == 3


def test_int_param_optional_still_refuses_bad_values() -> None:
    with pytest.raises(BadInputError):
        int_param({"x": "nope"}, "x", required=False, default=1)


@given(st.integers(min_value=0))
def test_int_param_non_negative_int_and_its_text_agree(n: int) -> None:
    assert int_param({"x": n}, "x") == n
    assert int_param({"x": str(n)}, "x") == n


# --- bool_param ---------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [
    (True, True), (False, False), (1, True), (0, False),
    ("true", True), ("True", True), (" TRUE ", True), ("1", True), ("yes", True),
    ("on", True), ("false", False), ("FALSE", False), ("0", False), ("no", False),
    ("off", False), ("", False),
])
def test_bool_param_accepts(value: object, expected: bool) -> None:
    assert bool_param({"b": value}, "b") is expected


def test_bool_param_missing_gives_default() -> None:
    assert bool_param({}, "b") is False
    assert bool_param({}, "b", True) is True
    assert bool_param({"b": None}, "b", True) is True
    assert bool_param({"b": "false"}, "b", True) is False


# --- str_param ----------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [
    ("hello", "hello"), ("", ""), (" x ", " x "), (123, "123"), (-5, "-5"), (0, "0"),
])
def test_str_param_accepts(value: object, expected: str) -> None:
    assert str_param({"s": value}, "s") == expected


def test_str_param_optional_gives_default() -> None:
    assert str_param({}, "s", required=False) is None
    assert str_param({"s": None}, "s", required=False, default="d") == "d"
    assert str_param({"s": 4}, "s", required=False, default="d") == "4"
