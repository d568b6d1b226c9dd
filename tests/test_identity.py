"""Typed identity keys, rUIN text and client-input parsing (DESIGN §1).

Unit tests pin the documented examples; hypothesis property tests check the round trips
(``parse_key(k.key) == k``, ``parse_ruin_text(format_ruin_text(r)) == r``) and that
parsing arbitrary text either yields a valid key or raises ``BadInputError``.
"""

from __future__ import annotations

import base64
import re

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from gensokyo_idmap.errors import BadInputError, IdmapError
from gensokyo_idmap.redaction import redact_text
from gensokyo_idmap.identity import (
    MAX_VUIN,
    OpenId,
    RawId,
    RUin,
    UnionId,
    VUin,
    format_ruin_text,
    parse_client_input,
    parse_key,
    parse_ruin_text,
    parse_vuin,
    served_app_id,
)

APP = "102000001"
OPENID_HEX = "9F3A0C55E1B24D7A8C6E0F1D2B3A4C5D"
UNION_HEX = "7C1D9E2F3A4B5C6D7E8F90A1B2C3D4E5"
QQ = "2870338968"
QQ_B32 = "GI4DOMBTGM4DSNRY"

# --------------------------------------------------------------------------- strategies

platforms = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,15}", fullmatch=True)
app_ids = st.from_regex(r"[0-9]{1,20}", fullmatch=True)
tokens = st.from_regex(r"[A-Za-z0-9_\-]{1,64}", fullmatch=True)

# printable, non-whitespace unicode: no control, format, surrogate, private-use,
# unassigned or separator (space / line / paragraph) code points.
_printable_chars = st.characters(
    exclude_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs")
)
# ids of rUINs and raw keys: any printable non-whitespace text, with ':' and '-' mixed in
# often (they are separators elsewhere in the key and rUIN text).
free_ids = st.lists(
    st.one_of(
        st.text(_printable_chars, min_size=1, max_size=8),
        st.sampled_from([":", "-", "::", "--", ":-", "=", "0", "rUIN-", "ruin:"]),
    ),
    min_size=1,
    max_size=8,
).map("".join)
# rUIN indexes are at most 9 digits (RUin refuses larger ones)
indexes = st.integers(min_value=0, max_value=10**9 - 1)

open_ids = st.builds(OpenId, app_id=app_ids, openid=tokens, platform=platforms)
union_ids = st.builds(UnionId, union_openid=tokens, platform=platforms)
ruins = st.builds(RUin, platform=platforms, index=indexes, id=free_ids)
qq_numbers = st.from_regex(r"[0-9]{1,20}", fullmatch=True)
# what rUIN text can carry: QQ numbers are digits there, other platforms' ids anything
text_ruins = st.one_of(
    ruins.filter(lambda r: r.platform != "QQ"),
    st.builds(RUin, platform=st.just("QQ"), index=indexes, id=qq_numbers),
)
raw_ids = st.builds(RawId, value=free_ids)
identity_keys = st.one_of(open_ids, union_ids, ruins, raw_ids)

KEY_TYPES = (OpenId, UnionId, RUin, RawId)


def _b32(text: str) -> str:
    """Stdlib oracle: RFC 4648 Base32 of the UTF-8 bytes, upper case, unpadded."""
    return base64.b32encode(text.encode("utf-8")).decode("ascii").rstrip("=")


def _b32_padded(text: str) -> str:
    return base64.b32encode(text.encode("utf-8")).decode("ascii")


def _b32_is_all_digits(text: str) -> bool:
    # Base32 uses 2-7 as symbols; see test_ruin_text_round_trip_when_base32_is_all_digits
    return re.fullmatch(r"[0-9]+", _b32(text)) is not None


def _shown(value: object) -> str:
    """How the offending value must appear in the error message: what follows a secret's
    name (``SECRET:0``) hidden, as every echoed value is (gensokyo_idmap.redaction)."""
    if isinstance(value, str):
        return repr(redact_text(value)[:200])[1:-1]
    return repr(value)


def assert_bad(excinfo: pytest.ExceptionInfo[BadInputError], field: str, value: object) -> None:
    err = excinfo.value
    assert type(err) is BadInputError
    assert err.field == field
    message = str(err)
    assert message.startswith(f"{field}: ")
    assert _shown(value) in message
    assert err.message == message


# --------------------------------------------------------------------------- canonical keys

CANONICAL = [
    (f"openid:QQ:{APP}:{OPENID_HEX}", OpenId(app_id=APP, openid=OPENID_HEX)),
    (f"union:QQ:{UNION_HEX}", UnionId(union_openid=UNION_HEX)),
    (f"ruin:QQ:0:{QQ}", RUin(platform="QQ", index=0, id=QQ)),
    ("ruin:OAuth_Github:0:583231", RUin(platform="OAuth_Github", index=0, id="583231")),
    ("raw:ABC", RawId("ABC")),
]


@pytest.mark.parametrize(("text", "expected"), CANONICAL, ids=[t for t, _ in CANONICAL])
def test_design_examples_parse_and_format(text: str, expected: object) -> None:
    parsed = parse_key(text)
    assert parsed == expected
    assert type(parsed) is type(expected)
    assert parsed.key == text


def test_openid_fields_and_default_platform() -> None:
    key = parse_key(f"openid:QQ:{APP}:{OPENID_HEX}")
    assert isinstance(key, OpenId)
    assert (key.platform, key.app_id, key.openid) == ("QQ", APP, OPENID_HEX)
    assert OpenId(app_id="1", openid="x").key == "openid:QQ:1:x"
    assert OpenId(app_id="1", openid="x", platform="Other").key == "openid:Other:1:x"


def test_other_platform_union_key() -> None:
    key = parse_key("union:Other_2:abc-DEF_1")
    assert key == UnionId(union_openid="abc-DEF_1", platform="Other_2")


def test_ruin_and_raw_ids_keep_colons_and_dashes() -> None:
    assert parse_key("ruin:QQ:3:a:b-c:") == RUin(platform="QQ", index=3, id="a:b-c:")
    assert parse_key("raw:a:b:-c") == RawId("a:b:-c")
    assert parse_key("raw:raw:x") == RawId("raw:x")
    assert parse_key("ruin:QQ:0:幻想郷") == RUin(platform="QQ", index=0, id="幻想郷")


def test_values_are_kept_exactly_no_case_folding() -> None:
    lower = parse_key(f"openid:QQ:{APP}:{OPENID_HEX.lower()}")
    upper = parse_key(f"openid:QQ:{APP}:{OPENID_HEX}")
    assert lower != upper
    assert isinstance(lower, OpenId)
    assert lower.openid == OPENID_HEX.lower()
    assert parse_key("raw:AbC") != parse_key("raw:abc")
    assert parse_key("ruin:QQ:0:Ab").id == "Ab"


def test_value_at_length_limit_is_accepted() -> None:
    long_id = "字" * 133  # 399 UTF-8 bytes: the limit is in bytes, so keys fit LMDB
    assert parse_key(f"ruin:QQ:0:{long_id}") == RUin(platform="QQ", index=0, id=long_id)
    assert parse_key("raw:" + "x" * 400) == RawId("x" * 400)


def test_value_over_byte_limit_is_refused() -> None:
    with pytest.raises(BadInputError, match="400 bytes"):
        RUin(platform="QQ", index=0, id="字" * 134)  # 402 bytes, 134 characters
    with pytest.raises(BadInputError, match="400 bytes"):
        RawId("x" * 401)


def test_longest_keys_fit_an_lmdb_key(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import lmdb

    longest = [
        OpenId(app_id="9" * 20, openid="a" * 400, platform="P" * 32),
        RUin(platform="P" * 32, index=999_999_999, id="字" * 133),
        UnionId(union_openid="u" * 400, platform="P" * 32),
        RawId("x" * 400),
    ]
    env = lmdb.open(str(tmp_path / "k.db"), subdir=False)
    try:
        for key in longest:
            assert len(key.key.encode("utf-8")) <= env.max_key_size()
    finally:
        env.close()


@settings(deadline=None)
@given(open_ids)
def test_openid_key_round_trip(key: OpenId) -> None:
    assert key.key == f"openid:{key.platform}:{key.app_id}:{key.openid}"
    assert parse_key(key.key) == key


def _built(app_id: object, openid: object, platform: str) -> tuple[str, str]:
    """("key", the key without its platform) or ("error", the field the error names)."""
    try:
        key = OpenId(app_id=app_id, openid=openid, platform=platform)  # type: ignore[arg-type]
    except BadInputError as err:
        return "error", err.field
    except (TypeError, AttributeError) as err:
        return "error", type(err).__name__
    return "key", key.key.removeprefix(f"openid:{platform}:")


@settings(deadline=None)
@given(st.one_of(app_ids, st.text(alphabet="0123456789:a -", max_size=22)),
       st.one_of(tokens, st.text(max_size=8), st.text(alphabet="ab:_- \n", max_size=6),
                 st.integers(0, 400).map(lambda n: "a" * n),
                 st.integers(399, 402).map(lambda n: "a" * n)))
@example("1", "a" * 401)
@example("1" * 21, "x")
@example("12:3", "x")
@example("12", "3:x")
@example(12, "x")
@example("12", 3)
def test_a_qq_openid_passes_the_checks_of_any_other_platform(app_id: object,
                                                              openid: object) -> None:
    """QQ OpenIDs are checked in one match of the whole key (the hot path); it must accept
    exactly what the field-by-field checks of another platform accept."""
    assert _built(app_id, openid, "QQ") == _built(app_id, openid, "Other")


@settings(deadline=None)
@given(union_ids)
def test_union_key_round_trip(key: UnionId) -> None:
    assert key.key == f"union:{key.platform}:{key.union_openid}"
    assert parse_key(key.key) == key


@settings(deadline=None)
@given(ruins)
def test_ruin_key_round_trip(key: RUin) -> None:
    assert key.key == f"ruin:{key.platform}:{key.index}:{key.id}"
    assert parse_key(key.key) == key


@settings(deadline=None)
@given(raw_ids)
def test_raw_key_round_trip(key: RawId) -> None:
    assert key.key == f"raw:{key.value}"
    assert parse_key(key.key) == key


@settings(deadline=None)
@given(identity_keys, st.sampled_from(["key", "identity", "user_id"]))
def test_any_key_round_trips_and_keeps_its_type(key: object, field: str) -> None:
    parsed = parse_key(key.key, field)  # type: ignore[attr-defined]
    assert parsed == key
    assert type(parsed) is type(key)


@settings(deadline=None)
@given(app_ids, tokens)
def test_openids_differing_only_in_case_stay_distinct(app_id: str, openid: str) -> None:
    other = openid.swapcase()
    assume(other != openid)
    assert parse_key(f"openid:QQ:{app_id}:{openid}") != parse_key(f"openid:QQ:{app_id}:{other}")


@settings(deadline=None)
@given(st.integers(min_value=0))
@example(10**9)
def test_every_buildable_ruin_round_trips_any_index(index: int) -> None:
    try:
        key = RUin(platform="QQ", index=index, id="1")
    except BadInputError:
        return  # refusing at construction would also keep the invariant
    assert parse_key(key.key) == key
    assert parse_ruin_text(key.text) == key


# --------------------------------------------------------------------------- rUIN text


def test_format_ruin_text_design_example() -> None:
    ruin = RUin(platform="QQ", index=0, id=QQ)
    assert format_ruin_text(ruin) == f"rUIN-QQ-0-{QQ_B32}"
    assert ruin.text == "rUIN-QQ-0-GI4DOMBTGM4DSNRY"


def test_format_ruin_text_strips_padding() -> None:
    # 6 bytes -> 10 Base32 symbols + 6 '=' in padded form
    ruin = RUin(platform="OAuth_Github", index=2, id="583231")
    assert format_ruin_text(ruin) == "rUIN-OAuth_Github-2-GU4DGMRTGE"
    assert "=" not in ruin.text


@pytest.mark.parametrize(
    "text",
    [
        f"rUIN-QQ-0-{QQ}",
        f"rUIN-QQ-0-{QQ_B32}",
        f"rUIN-QQ-0-{QQ_B32.lower()}",
        "rUIN-QQ-0-Gi4dOmBtGm4dSnRy",
        f"RUIN-QQ-0-{QQ_B32}",
        f"ruin-QQ-0-{QQ}",
        f"  rUIN-QQ-0-{QQ_B32}\n",
    ],
)
def test_parse_ruin_text_accepts_raw_and_base32_any_case(text: str) -> None:
    assert parse_ruin_text(text) == RUin(platform="QQ", index=0, id=QQ)


@pytest.mark.parametrize(
    "ident", ["GU4DGMRTGE", "GU4DGMRTGE======", "gu4dgmrtge======", "gu4dgmrtge", "583231"]
)
def test_parse_ruin_text_accepts_padded_or_unpadded(ident: str) -> None:
    assert parse_ruin_text(f"rUIN-OAuth_Github-2-{ident}") == RUin(
        platform="OAuth_Github", index=2, id="583231"
    )


def test_parse_ruin_text_non_base32_ids_are_raw() -> None:
    assert parse_ruin_text("rUIN-Other-1-user:with-dash").id == "user:with-dash"
    assert parse_ruin_text("rUIN-Other-1-幻想郷").id == "幻想郷"
    # Base32 of "\x00": decodes, but not to printable text, so it is the raw id
    assert parse_ruin_text("rUIN-Other-0-AA").id == "AA"
    # "ME" is canonical Base32 of "a"; "MF" has non-zero trailing bits, so it is raw
    assert parse_ruin_text("rUIN-Other-0-ME").id == "a"
    assert parse_ruin_text("rUIN-Other-0-MF").id == "MF"


def test_parse_ruin_text_index_and_platform() -> None:
    ruin = parse_ruin_text("rUIN-OAuth_Github-17-GU4DGMRTGE")
    assert (ruin.platform, ruin.index, ruin.id) == ("OAuth_Github", 17, "583231")


@settings(deadline=None)
@given(text_ruins)
def test_ruin_text_is_upper_base32_without_padding(ruin: RUin) -> None:
    assume(not _b32_is_all_digits(ruin.id))  # those keep padding: see the test below
    text = format_ruin_text(ruin)
    assert text == f"rUIN-{ruin.platform}-{ruin.index}-{_b32(ruin.id)}"
    assert re.fullmatch(r"rUIN-[A-Za-z][A-Za-z0-9_]*-[0-9]+-[A-Z2-7]+", text)
    assert ruin.text == text


@settings(deadline=None)
@given(text_ruins)
def test_ruin_text_round_trip(ruin: RUin) -> None:
    assert parse_ruin_text(format_ruin_text(ruin)) == ruin
    assert parse_ruin_text(ruin.text, "group_id") == ruin


@settings(deadline=None)
@given(text_ruins, st.booleans(), st.booleans(),
       st.sampled_from(["rUIN", "ruin", "RUIN", "Ruin"]))
def test_ruin_text_variants_read_back(ruin: RUin, lower: bool, padded: bool, prefix: str) -> None:
    assume(not _b32_is_all_digits(ruin.id))
    ident = _b32_padded(ruin.id) if padded else _b32(ruin.id)
    if lower:
        ident = ident.lower()
    assert parse_ruin_text(f"{prefix}-{ruin.platform}-{ruin.index}-{ident}") == ruin


@settings(deadline=None)
@given(st.from_regex(r"[0-9]{1,40}", fullmatch=True), platforms, indexes)
def test_digits_only_id_reads_back_as_itself(digits: str, platform: str, index: int) -> None:
    parsed = parse_ruin_text(f"rUIN-{platform}-{index}-{digits}")
    assert parsed == RUin(platform=platform, index=index, id=digits)
    ruin = RUin(platform=platform, index=index, id=digits)
    assert parse_ruin_text(ruin.text) == ruin
    assert parse_client_input(f"rUIN-{platform}-{index}-{digits}", APP) == ruin


@settings(deadline=None)
@given(free_ids, indexes)
@example("ME", 0)  # canonical Base32 of "a"
@example("MF", 0)  # not canonical Base32
@example("AA", 0)  # Base32 of "\x00"
@example("GI4DOMBTGM4DSNRY=", 0)  # QQ's Base32 with a wrong padding
@example("SECRET:0", 0)  # echoed with the value after "secret:" hidden
def test_qq_ruin_text_ids_are_numbers(ident: str, index: int) -> None:
    """rUIN-QQ-…: an id that is neither digits nor the Base32 of digits is refused (it was
    kept as a raw id, so a mistyped number became a new identity); another platform takes
    the same text as its id."""
    assume(not re.fullmatch(r"[0-9]+", ident))
    try:
        other = parse_ruin_text(f"rUIN-Other-{index}-{ident}")
    except BadInputError:
        return  # not an id at all (whitespace, too long…): refused everywhere
    text = f"rUIN-QQ-{index}-{ident}"
    if re.fullmatch(r"[0-9]+", other.id):  # the Base32 of digits
        assert parse_ruin_text(text) == RUin("QQ", index, other.id)
        return
    with pytest.raises(BadInputError) as excinfo:
        parse_ruin_text(text, "user_id")
    assert_bad(excinfo, "user_id", text)
    assert "a QQ number is digits" in excinfo.value.reason
    with pytest.raises(BadInputError):
        parse_client_input(text, APP)


@settings(deadline=None)
@given(qq_numbers, indexes, st.booleans(), st.booleans())
def test_qq_numbers_read_raw_or_in_base32(number: str, index: int, lower: bool,
                                          padded: bool) -> None:
    ident = _b32_padded(number) if padded else _b32(number)
    for form in (number, ident.lower() if lower else ident):
        assert parse_ruin_text(f"rUIN-QQ-{index}-{form}") == RUin("QQ", index, number)


@pytest.mark.parametrize("ident", ["\u6d6d", "\u6d7d", "\u6ded"])
def test_ruin_text_round_trip_when_base32_is_all_digits(ident: str) -> None:
    ruin = RUin(platform="Other", index=0, id=ident)
    assert _b32_is_all_digits(ident)
    assert format_ruin_text(ruin).endswith("=")  # padding kept so it cannot read as digits
    assert parse_ruin_text(format_ruin_text(ruin)) == ruin


# --------------------------------------------------------------------------- client input


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (QQ, 2870338968),
        ("1", 1),
        (" 42 ", 42),
        (str(MAX_VUIN), MAX_VUIN),
        (7, 7),
        (MAX_VUIN, MAX_VUIN),
    ],
)
def test_client_digits_are_vuins(value: str | int, expected: int) -> None:
    assert parse_client_input(value, APP) == VUin(expected)
    assert parse_client_input(value, None, guess_openid=False) == VUin(expected)


@settings(deadline=None)
@given(st.integers(min_value=1, max_value=MAX_VUIN))
def test_client_any_in_range_int_is_a_vuin(number: int) -> None:
    assert parse_client_input(number, APP) == VUin(number)
    assert parse_client_input(str(number), APP) == VUin(number)
    assert parse_vuin(str(number)) == number


@pytest.mark.parametrize("value", [0, -1, 2**63, "0", "00", str(2**63), "9" * 20, "1" * 600])
def test_client_out_of_range_vuin_is_bad_input(value: str | int) -> None:
    with pytest.raises(BadInputError) as excinfo:
        parse_client_input(value, APP, field="group_id")
    assert_bad(excinfo, "group_id", value)


@pytest.mark.parametrize("prefix", ["rUIN", "ruin", "RUIN", "RuIn"])
def test_client_ruin_text_any_prefix_case(prefix: str) -> None:
    expected = RUin(platform="QQ", index=0, id=QQ)
    assert parse_client_input(f"{prefix}-QQ-0-{QQ_B32}", APP) == expected
    assert parse_client_input(f"{prefix}-QQ-0-{QQ}", None, guess_openid=False) == expected


@pytest.mark.parametrize(("text", "expected"), CANONICAL, ids=[t for t, _ in CANONICAL])
def test_client_typed_keys_are_that_key(text: str, expected: object) -> None:
    assert parse_client_input(text, "999") == expected
    assert parse_client_input(text, None, guess_openid=False) == expected


def test_client_typed_openid_keeps_its_own_app_id() -> None:
    key = parse_client_input(f"openid:QQ:{APP}:{OPENID_HEX}", "555")
    assert key == OpenId(app_id=APP, openid=OPENID_HEX)


def test_client_bare_text_is_openid_of_serving_app() -> None:
    assert parse_client_input(OPENID_HEX, APP) == OpenId(app_id=APP, openid=OPENID_HEX)
    assert parse_client_input(f" {OPENID_HEX}\t", "7") == OpenId(app_id="7", openid=OPENID_HEX)
    assert parse_client_input("abc", APP) != parse_client_input("ABC", APP)


@settings(deadline=None)
@given(tokens, app_ids)
def test_client_any_bare_token_is_openid(token: str, app_id: str) -> None:
    assume(not token.isdigit() and not token[:5].lower() == "ruin-")
    assume(not (token[0] in "+-" and token[1:].isdigit()))  # a signed number: refused below
    assert parse_client_input(token, app_id) == OpenId(app_id=app_id, openid=token)
    with pytest.raises(BadInputError) as excinfo:
        parse_client_input(token, app_id, guess_openid=False)
    assert_bad(excinfo, "user_id", token)


@pytest.mark.parametrize("value", ["-1", "-0", "+5", "-123456789012"])
def test_client_signed_number_is_refused_not_taken_as_openid(value: str) -> None:
    with pytest.raises(BadInputError) as excinfo:
        parse_client_input(value, APP)
    assert_bad(excinfo, "user_id", value)
    assert "without a sign" in excinfo.value.reason


def test_client_guess_refused() -> None:
    with pytest.raises(BadInputError) as excinfo:
        parse_client_input(OPENID_HEX, APP, field="user_id", guess_openid=False)
    assert_bad(excinfo, "user_id", OPENID_HEX)
    assert "guess" in excinfo.value.reason


def test_client_bare_openid_needs_app_id() -> None:
    with pytest.raises(BadInputError) as excinfo:
        parse_client_input(OPENID_HEX, None, field="target")
    assert_bad(excinfo, "target", OPENID_HEX)
    assert "AppID" in excinfo.value.reason


@pytest.mark.parametrize("value", [True, False])
def test_client_bools_are_refused(value: bool) -> None:
    with pytest.raises(BadInputError) as excinfo:
        parse_client_input(value, APP)
    assert_bad(excinfo, "user_id", value)
    with pytest.raises(BadInputError):
        parse_vuin(value)


@pytest.mark.parametrize("value", [None, 1.5, b"123", ["1"]])
def test_client_non_text_non_int_refused(value: object) -> None:
    with pytest.raises(BadInputError) as excinfo:
        parse_client_input(value, APP, field="group_id")  # type: ignore[arg-type]
    assert_bad(excinfo, "group_id", value)


# --------------------------------------------------------------------------- bad input

LONG = "x" * 513

BAD_KEYS = [
    "",
    "openid",
    "ABC",
    "foo:bar",
    "OPENID:QQ:1:abc",
    "uid:QQ:1:abc",
    "openid:QQ:1",
    "openid:QQ",
    "openid:",
    "union:QQ",
    "ruin:QQ:0",
    "ruin:QQ",
    "raw:",
    "openid:QQ:abc:x",
    "openid:QQ::x",
    "openid:QQ:12a:x",
    "openid:QQ:-1:x",
    "openid:QQ:" + "1" * 21 + ":x",
    "openid:Q Q:1:x",
    "openid:1QQ:1:x",
    "openid::1:x",
    "openid:Q-Q:1:x",
    "openid:QQ:1:",
    "openid:QQ:1:a b",
    "openid:QQ:1:a\tb",
    "openid:QQ:1:a.b",
    "openid:QQ:1:a:b",
    "openid:QQ:1:" + "a" * 513,
    "union:QQ:",
    "union:Q-Q:x",
    "union:QQ:x y",
    "ruin:QQ:-1:123",
    "ruin:QQ:x:1",
    "ruin:QQ::1",
    "ruin:QQ:+1:1",
    "ruin:QQ:1.5:1",
    "ruin:_QQ:0:1",
    "ruin:QQ:0:",
    "ruin:QQ:0:a b",
    "ruin:QQ:0:\x00",
    "ruin:QQ:0:a\u200bb",
    "ruin:QQ:0:a\u3000b",
    "raw:a\nb",
    "raw: ",
    "raw:\x7f",
    "raw:" + LONG,
]


@pytest.mark.parametrize("text", BAD_KEYS)
def test_parse_key_rejects(text: str) -> None:
    with pytest.raises(BadInputError) as excinfo:
        parse_key(text)
    assert_bad(excinfo, "key", text)
    with pytest.raises(BadInputError) as excinfo:
        parse_key(text, "identity")
    assert_bad(excinfo, "identity", text)
    assert excinfo.value.value == text


@pytest.mark.parametrize("value", [None, 123, b"raw:x"])
def test_parse_key_rejects_non_text(value: object) -> None:
    with pytest.raises(BadInputError) as excinfo:
        parse_key(value, "identity")  # type: ignore[arg-type]
    assert_bad(excinfo, "identity", value)


def test_unknown_kind_is_named_in_message() -> None:
    with pytest.raises(BadInputError) as excinfo:
        parse_key("uid:QQ:1:abc")
    assert "'uid'" in excinfo.value.reason


BAD_RUIN_TEXTS = [
    "",
    "rUIN",
    "rUIN-QQ",
    "rUIN-QQ-0",
    "uin-QQ-0-1",
    "rUIN_QQ_0_1",
    "rUIN:QQ:0:1",
    "rUIN-Q Q-0-1",
    "rUIN-1QQ-0-1",
    "rUIN--0-1",
    "rUIN-Q.Q-0-1",
    "rUIN-QQ--1-1",
    "rUIN-QQ-x-1",
    "rUIN-QQ--1",
    "rUIN-QQ-1e3-1",
    "rUIN-QQ-0-",
    "rUIN-QQ-0-a b",
    "rUIN-QQ-0-a\x00",
    "rUIN-QQ-0-a\u200bb",
    "rUIN-QQ-0-" + LONG,
]


@pytest.mark.parametrize("text", BAD_RUIN_TEXTS)
def test_parse_ruin_text_rejects(text: str) -> None:
    with pytest.raises(BadInputError) as excinfo:
        parse_ruin_text(text)
    assert_bad(excinfo, "ruin", text)
    with pytest.raises(BadInputError) as excinfo:
        parse_ruin_text(text, "user_id")
    assert_bad(excinfo, "user_id", text)


def test_parse_ruin_text_rejects_non_text() -> None:
    with pytest.raises(BadInputError) as excinfo:
        parse_ruin_text(2870338968, "ruin")  # type: ignore[arg-type]
    assert_bad(excinfo, "ruin", 2870338968)


BAD_CLIENT_TEXTS = [
    "",
    "   ",
    "\t\n",
    "a b",
    "abc\x00",
    "has.dot",
    "+123",
    "１２３",
    "été",
    "rUIN-QQ-x-1",
    "rUIN-QQ-0",
    "rUIN-QQ-0-",
    "ruin-1QQ-0-1",
    "openid:QQ:abc:x",
    "openid:QQ:1",
    "union:QQ:",
    "ruin:QQ:-1:1",
    "raw:",
    "raw:a b",
    LONG,
]


@pytest.mark.parametrize("value", BAD_CLIENT_TEXTS)
def test_parse_client_input_rejects(value: str) -> None:
    with pytest.raises(BadInputError) as excinfo:
        parse_client_input(value, APP)
    assert_bad(excinfo, "user_id", value.strip() or value)
    with pytest.raises(BadInputError) as excinfo:
        parse_client_input(value, APP, field="group_id")
    assert excinfo.value.field == "group_id"


@pytest.mark.parametrize("value", ["abc", "-5x", "12 34", "0x10", ""])
def test_parse_vuin_rejects(value: str) -> None:
    with pytest.raises(BadInputError) as excinfo:
        parse_vuin(value, "count")
    assert_bad(excinfo, "count", value)


@pytest.mark.parametrize(
    ("build", "field", "value"),
    [
        (lambda: OpenId(app_id="abc", openid="x"), "app_id", "abc"),
        (lambda: OpenId(app_id="", openid="x"), "app_id", ""),
        (lambda: OpenId(app_id="1", openid="a b"), "openid", "a b"),
        (lambda: OpenId(app_id="1", openid=""), "openid", ""),
        (lambda: OpenId(app_id="1", openid="x", platform="Q-Q"), "platform", "Q-Q"),
        (lambda: UnionId(union_openid="a:b"), "union_openid", "a:b"),
        (lambda: UnionId(union_openid="x", platform="9QQ"), "platform", "9QQ"),
        (lambda: RUin(platform="QQ", index=-1, id="1"), "index", -1),
        (lambda: RUin(platform="QQ", index=True, id="1"), "index", True),
        (lambda: RUin(platform="QQ", index="0", id="1"), "index", "0"),
        (lambda: RUin(platform="QQ", index=0, id=""), "id", ""),
        (lambda: RUin(platform="QQ", index=0, id="a\nb"), "id", "a\nb"),
        (lambda: RUin(platform="", index=0, id="1"), "platform", ""),
        (lambda: RawId(""), "raw", ""),
        (lambda: RawId(LONG), "raw", LONG),
        (lambda: VUin(0), "vuin", 0),
        (lambda: VUin(MAX_VUIN + 1), "vuin", MAX_VUIN + 1),
        (lambda: VUin(True), "vuin", True),
        (lambda: VUin("5"), "vuin", "5"),
    ],
)
def test_constructors_reject(build: object, field: str, value: object) -> None:
    with pytest.raises(BadInputError) as excinfo:
        build()  # type: ignore[operator]
    assert_bad(excinfo, field, value)


def test_long_value_is_truncated_in_message_but_kept_on_error() -> None:
    with pytest.raises(BadInputError) as excinfo:
        parse_key("raw:" + LONG)
    err = excinfo.value
    assert err.value == "raw:" + LONG
    assert ("raw:" + LONG)[:200] + "…" in str(err)
    assert LONG not in str(err)


_texts_near_keys = st.one_of(
    st.text(),
    st.text(st.characters(codec="ascii")),
    st.builds(
        lambda prefix, rest: prefix + rest,
        st.sampled_from(
            ["openid:", "openid:QQ:", f"openid:QQ:{APP}:", "union:", "union:QQ:", "ruin:",
             "ruin:QQ:", "ruin:QQ:0:", "raw:", "rUIN-", "rUIN-QQ-", "rUIN-QQ-0-", "ruin-QQ-1-",
             " ", "0", ""]
        ),
        st.one_of(st.text(), free_ids, tokens, st.from_regex(r"[0-9:\-=A-Za-z]*", fullmatch=True)),
    ),
)


def _assert_valid_key(result: object) -> None:
    assert isinstance(result, KEY_TYPES)
    assert parse_key(result.key) == result


@settings(deadline=None)
@given(_texts_near_keys, st.sampled_from(["key", "identity"]))
def test_parse_key_total_on_arbitrary_text(text: str, field: str) -> None:
    try:
        result = parse_key(text, field)
    except BadInputError as err:
        assert err.field == field
        assert err.value == text
        return
    _assert_valid_key(result)
    assert result.key.split(":", 1)[0] == text.split(":", 1)[0]


@settings(deadline=None)
@given(_texts_near_keys, st.sampled_from([APP, None]), st.booleans())
def test_parse_client_input_total_on_arbitrary_text(
    text: str, app_id: str | None, guess: bool
) -> None:
    try:
        result = parse_client_input(text, app_id, field="target", guess_openid=guess)
    except BadInputError as err:
        assert err.field == "target"
        return
    if isinstance(result, VUin):
        assert 0 < result.value <= MAX_VUIN
        assert result.value == int(text.strip())
        return
    _assert_valid_key(result)
    if isinstance(result, OpenId) and not text.strip().startswith("openid:"):
        assert guess
        assert result == OpenId(app_id=APP, openid=text.strip())


@settings(deadline=None)
@given(_texts_near_keys)
def test_parse_ruin_text_total_on_arbitrary_text(text: str) -> None:
    try:
        result = parse_ruin_text(text, "r")
    except BadInputError as err:
        assert err.field == "r"
        assert err.value == text
        return
    assert isinstance(result, RUin)
    assert parse_key(result.key) == result


# --------------------------------------------------------------------------- error class


def test_bad_input_error_class() -> None:
    assert issubclass(BadInputError, IdmapError)
    assert issubclass(BadInputError, ValueError)
    assert BadInputError.exit_code == 2
    assert BadInputError.http_status == 400
    assert IdmapError.exit_code == 1
    with pytest.raises(BadInputError) as excinfo:
        parse_key("nope", "user_id")
    err = excinfo.value
    assert isinstance(err, IdmapError)
    assert err.exit_code == 2
    assert err.http_status == 400
    assert err.retcode == 100
    assert err.code == "bad_input"
    assert err.field == "user_id"
    assert err.value == "nope"
    assert "identity key must start with" in err.reason


@given(st.lists(app_ids, unique=True, max_size=5), app_ids | st.none())
def test_served_app_id_is_a_bot_served_or_refused_naming_them(
        served: list[str], given: str | None) -> None:
    """Issue 34.4: no AppID given → the first served (None: none served); one of them → it;
    another → refused naming every AppID served; with none served, any AppID."""
    if given is None:
        assert served_app_id(None, served) == (served[0] if served else None)
    elif not served or given in served:
        assert served_app_id(given, served) == given
    else:
        with pytest.raises(BadInputError) as refused:
            served_app_id(given, served, "--app-id")
        assert refused.value.field == "--app-id"
        assert f"(its AppIDs: {', '.join(served)})" in refused.value.reason


@pytest.mark.parametrize("given", ["", "12a", "1" * 21, " 1"])
def test_served_app_id_refuses_what_is_no_app_id(given: str) -> None:
    with pytest.raises(BadInputError, match="AppID must be 1 to 20 digits"):
        served_app_id(given, [APP])
