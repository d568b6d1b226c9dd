"""Webhook signatures: the reference's test vectors, round trips, and every rejection."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.qq.signing import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    WebhookKey,
    seed_from_secret,
)

DOC_SECRET = "naOC0ocQE3shWLAfffVLB1rhYPG7"
DOC_PUBLIC = "d7c362fe78aef81ff23287b493628b5db02a3c4fe30b215e4d19609b5d76673a"
VALIDATION_SECRET = "DG5g3B4j9X2KOErG"
VALIDATION_SIGNATURE = (
    "87befc99c42c651b3aac0278e71ada338433ae26fcb24307bdc5ad38c1adc2d0"
    "1bcfcadc0842edac85e85205028a1132afe09280305f13aa6909ffc2d652c706"
)


def test_seed_repeats_the_secret_to_32_bytes() -> None:
    assert seed_from_secret(DOC_SECRET) == b"naOC0ocQE3shWLAfffVLB1rhYPG7naOC"
    assert seed_from_secret("ab") == b"ab" * 16
    assert seed_from_secret("x" * 40) == b"x" * 32


def test_empty_secret_is_refused_without_echoing_anything() -> None:
    with pytest.raises(BadInputError, match="bot.secret"):
        seed_from_secret("")


def test_public_key_matches_the_reference_vector() -> None:
    assert WebhookKey.from_secret(DOC_SECRET).public_hex == DOC_PUBLIC


def test_validation_response_matches_the_reference_vector() -> None:
    key = WebhookKey.from_secret(VALIDATION_SECRET)
    answer = key.validation_response("Arq0D5A61EgUu4OxUvOp", "1725442341")
    assert answer == {"plain_token": "Arq0D5A61EgUu4OxUvOp", "signature": VALIDATION_SIGNATURE}


def test_secret_not_in_repr() -> None:
    key = WebhookKey.from_secret(DOC_SECRET)
    assert DOC_SECRET not in repr(key) and "naOC" not in repr(key)


@settings(max_examples=50, deadline=None)
@given(secret=st.text(min_size=1, max_size=40), ts=st.integers(0, 2**40), body=st.binary())
def test_sign_then_verify_round_trips(secret: str, ts: int, body: bytes) -> None:
    key = WebhookKey.from_secret(secret)
    signature = key.sign_callback(str(ts), body)
    key.verify_callback(str(ts), body, signature)  # no exception
    with pytest.raises(BadInputError) as err:
        key.verify_callback(str(ts), body + b" ", signature)
    assert err.value.field == SIGNATURE_HEADER
    with pytest.raises(BadInputError):
        key.verify_callback(str(ts + 1), body, signature)


def test_another_bots_signature_is_refused() -> None:
    body = b'{"op":0,"t":"C2C_MESSAGE_CREATE","d":{}}'
    forged = WebhookKey.from_secret("someone else").sign_callback("1700000000", body)
    with pytest.raises(BadInputError, match="does not match"):
        WebhookKey.from_secret(DOC_SECRET).verify_callback("1700000000", body, forged)


@pytest.mark.parametrize(
    ("timestamp", "signature", "field", "reason"),
    [
        ("1700000000", None, SIGNATURE_HEADER, "missing"),
        ("1700000000", "", SIGNATURE_HEADER, "missing"),
        (None, "ab" * 64, TIMESTAMP_HEADER, "missing"),
        ("17e8", "ab" * 64, TIMESTAMP_HEADER, "unix seconds"),
        ("1700000000", "zz" * 64, SIGNATURE_HEADER, "not hex"),
        ("1700000000", "ab" * 63, SIGNATURE_HEADER, "not an Ed25519 signature"),
        ("1700000000", "00" * 63 + "ff", SIGNATURE_HEADER, "not an Ed25519 signature"),
    ],
)
def test_malformed_headers_name_the_header(
    timestamp: str | None, signature: str | None, field: str, reason: str
) -> None:
    key = WebhookKey.from_secret(DOC_SECRET)
    with pytest.raises(BadInputError) as err:
        key.verify_callback(timestamp, b"{}", signature)
    assert err.value.field == field and reason in err.value.reason


def test_validation_needs_both_fields() -> None:
    key = WebhookKey.from_secret(DOC_SECRET)
    with pytest.raises(BadInputError, match="plain_token"):
        key.validation_response("", "1725442341")
    with pytest.raises(BadInputError, match="event_ts"):
        key.validation_response("tok", "")
