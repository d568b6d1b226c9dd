"""console/form_tokens.py (pure): signed double-submit tokens, any change to one refused."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap.api.console.form_tokens import MAX_AGE, FormTokens

from ...conftest import FakeClock

KEY = b"k" * 32


def test_a_token_passes_with_its_cookie_until_it_is_too_old() -> None:
    clock = FakeClock(1000.0)
    tokens = FormTokens(KEY, clock=clock)
    token = tokens.issue()
    assert tokens.passes(token, token)
    clock.now += MAX_AGE
    assert tokens.passes(token, token)
    clock.now += 1
    assert not tokens.passes(token, token)


def test_the_form_must_carry_the_cookies_token() -> None:
    tokens = FormTokens(KEY)
    first, second = tokens.issue(), tokens.issue()
    assert first != second
    for cookie, presented in ((first, second), (None, first), (first, None), ("", ""),
                              (first, ""), ("", first)):
        assert not tokens.passes(cookie, presented)


def test_another_process_key_refuses_the_token() -> None:
    token = FormTokens(KEY).issue()
    assert not FormTokens(b"j" * 32).passes(token, token)
    assert not FormTokens().passes(token, token)  # a restart: a new random key


def test_a_page_keeps_a_live_cookie_and_renews_an_old_one() -> None:
    clock = FakeClock(1000.0)
    tokens = FormTokens(KEY, clock=clock)
    token, new = tokens.current(None)
    assert new and tokens.passes(token, token)
    assert tokens.current(token) == (token, False)  # two tabs share it
    clock.now += MAX_AGE - 1800  # less than an hour left
    renewed, new = tokens.current(token)
    assert new and renewed != token
    assert tokens.current("forged.token.x")[1]


@given(st.data())
def test_any_change_to_a_token_is_refused(data: st.DataObject) -> None:
    tokens = FormTokens(KEY, clock=FakeClock(1000.0))
    token = tokens.issue()
    kind = data.draw(st.sampled_from(["replace", "insert", "delete", "append", "truncate"]))
    at = data.draw(st.integers(0, len(token) - 1))
    char = data.draw(st.characters(codec="utf-8") | st.sampled_from("0123456789.-_ABCxyz"))
    if kind == "replace":
        tampered = token[:at] + char + token[at + 1:]
    elif kind == "insert":
        tampered = token[:at] + char + token[at:]
    elif kind == "delete":
        tampered = token[:at] + token[at + 1:]
    elif kind == "append":
        tampered = token + char
    else:
        tampered = token[:at]
    if tampered == token:
        return
    assert tokens.age(tampered) is None
    assert not tokens.passes(tampered, tampered)
    assert not tokens.passes(token, tampered) and not tokens.passes(tampered, token)


@given(st.text(max_size=120))
def test_any_text_is_refused_never_an_error(text: str) -> None:
    tokens = FormTokens(KEY)
    assert tokens.age(text) is None and not tokens.passes(text, text)


@given(st.integers(0, 10**6), st.text(alphabet="abcdefABC0123456789-_", min_size=1,
                                      max_size=30))
def test_a_token_written_with_another_time_or_nonce_is_refused(issued: int, nonce: str) -> None:
    tokens = FormTokens(KEY, clock=FakeClock(1000.0))
    _, _, signature = tokens.issue().split(".")
    forged = f"{issued}.{nonce}.{signature}"
    assert tokens.age(forged) is None
