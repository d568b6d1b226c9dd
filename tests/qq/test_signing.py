"""Webhook signatures: the reference's test vectors, round trips, and every rejection."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from hypothesis import given, settings
from hypothesis import strategies as st

from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.qq.events import parse_envelope
from gensokyo_idmap.qq.signing import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    WebhookKey,
    check_fresh,
    check_validation_request,
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
    for token in ("", None):
        with pytest.raises(BadInputError, match="d.plain_token: missing"):
            key.validation_response(token, "1725442341")
    for ts in ("", None):
        with pytest.raises(BadInputError, match="d.event_ts: missing"):
            key.validation_response("tok", ts)


EVENT = '{"op":0,"t":"C2C_MESSAGE_CREATE","id":"x","d":{"id":"m","content":"hi"}}'


@pytest.mark.parametrize(("token", "ts", "field"), [
    (EVENT, "1725442341", "d.plain_token"),        # the signing oracle: a body as the token
    (EVENT[1:], "1725442341{", "d.plain_token"),   # ... or cut between the two fields
    ("Arq0D5A61EgUu4OxUvOp", "1725442341" + EVENT, "d.event_ts"),
    ("a" * 65, "1725442341", "d.plain_token"),     # not short
    ("tok en", "1725442341", "d.plain_token"),
    ("töken", "1725442341", "d.plain_token"),
    ("tok", "1725442341.5", "d.event_ts"),
    ("tok", "١٧٢٥", "d.event_ts"),                 # digits, but not ASCII ones
    (12345, "1725442341", "d.plain_token"),        # JSON numbers are not tokens
    ("tok", 1725442341, "d.event_ts"),
])
def test_op13_of_another_shape_is_not_signed(token: object, ts: object, field: str) -> None:
    with pytest.raises(BadInputError) as err:
        WebhookKey.from_secret(DOC_SECRET).validation_response(token, ts)
    assert err.value.field == field


@given(token=st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True),
       ts=st.integers(0, 10**12).map(str))
def test_op13_of_the_platforms_shape_is_answered(token: str, ts: str) -> None:
    answer = WebhookKey.from_secret(DOC_SECRET).validation_response(token, ts)
    assert answer["plain_token"] == token
    Ed25519PublicKey.from_public_bytes(bytes.fromhex(DOC_PUBLIC)).verify(
        bytes.fromhex(answer["signature"]), (ts + token).encode())


@given(secret=st.text(min_size=1, max_size=40), ts=st.integers(0, 10**12).map(str),
       body=st.binary(max_size=200))
def test_signatures_agree_with_another_implementation(secret: str, ts: str, body: bytes
                                                      ) -> None:
    """libsodium (ours) and OpenSSL (``cryptography``) on the same seed: the same public
    key, and each verifies what the other signed (the platform signs with neither)."""
    ours = WebhookKey.from_secret(secret)
    theirs = Ed25519PrivateKey.from_private_bytes(seed_from_secret(secret))
    assert theirs.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex() == \
        ours.public_hex
    theirs.public_key().verify(bytes.fromhex(ours.sign_callback(ts, body)),
                               ts.encode() + body)
    their_signature = theirs.sign(ts.encode() + body).hex()
    ours.verify_callback(ts, body, their_signature)  # no exception
    with pytest.raises(BadInputError):
        ours.verify_callback(ts, body + b"!", their_signature)


json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                               max_size=3),
    max_leaves=8).map(lambda v: json.dumps({"op": 0, "d": v}))


@settings(max_examples=300)
@given(text=st.one_of(json_like, st.text(), st.from_regex(r"[0-9]{1,12}[A-Za-z0-9_-]{1,20}")),
       cut=st.integers(0, 200))
def test_whatever_op13_signs_is_never_a_timestamp_and_an_event(text: str, cut: int) -> None:
    """The property that closes the oracle: for any request op 13 answers, no cut of the
    signed ``event_ts + plain_token`` into an X-Signature-Timestamp and a body gives a body
    that parses as a frame."""
    cut = min(cut, len(text))
    ts, token = text[:cut], text[cut:]
    try:
        token, ts = check_validation_request(token, ts)
    except BadInputError:
        return
    signed = ts + token
    for split in range(len(signed) + 1):
        with pytest.raises(BadInputError):
            parse_envelope(signed[split:].encode())


@pytest.mark.parametrize(("age", "ok"), [(0, True), (600, True), (601, False),
                                         (-60, True), (-61, False), (10**9, False)])
def test_fresh_means_not_older_than_max_age_nor_ahead_by_more_than_the_skew(
        age: int, ok: bool) -> None:
    now = 1_750_000_000
    if ok:
        check_fresh(str(now - age), now, 600)
    else:
        with pytest.raises(BadInputError) as err:
            check_fresh(str(now - age), now, 600)
        assert err.value.field == TIMESTAMP_HEADER
