"""Webhook signatures of the QQ bot platform (reference §3.2–3.4), pure: no I/O.

The platform signs every callback with an Ed25519 key derived from the bot secret: the
secret's bytes repeated to 32 bytes are the RFC 8032 seed. We verify ``timestamp + raw
body`` against the derived public key (nothing is stored for a request that fails), and
answer the op 13 URL validation by signing ``event_ts + plain_token``. The emulated
platform (``gensokyo_idmap.testing.webhook_sender``) signs and checks with its own code and
another library (``cryptography``), so a mistake here cannot hide behind the same mistake
there.

**op 13 must never sign what a callback signature covers.** A callback's signed message is
``X-Signature-Timestamp + body``; op 13's is ``event_ts + plain_token``. Sign any text
asked for, and an attacker sends a crafted event body as ``plain_token`` and gets a valid
signature for it (a signing oracle). So op 13 is answered only when ``event_ts`` is unix
seconds (digits) and ``plain_token`` has the platform's shape: a short token of ASCII
letters and digits (the reference's example is 20 of them; ``-`` and ``_`` are tolerated,
the URL-safe alphabet). Such a message holds no ``{``, ``"`` or ``:``, so however it is cut
into a timestamp and a body, the body is never a JSON object, and nothing but an object is
an event.

**A signature is only as good as its age.** A captured callback verifies for ever, so one
whose timestamp is older than ``max_age`` is refused (:func:`check_fresh`), and so is one
from further in the future than :data:`MAX_CLOCK_SKEW_SECONDS`: it would stay "fresh" past
``max_age`` after it was sent, longer than repeats are remembered.

Ed25519 comes from PyNaCl (libsodium; well kept by the same maintainers as
``cryptography``, wheels for every platform we run on), not from hand-written code. It
verifies a callback in half the CPU of ``cryptography``'s OpenSSL (about 50 against 100 us
on the development machine), and the check is the largest single cost of a webhook
callback: every one is verified on the event loop. libsodium is also the stricter of the
two (it refuses non-canonical encodings and small-order points, which no honest signer
makes). The secret never appears in an error or a repr. libsodium (``nacl.signing``, 1.6 MiB
of a daemon's memory) is loaded with the first key, so a daemon without the webhook, or
with the webhook and no secret yet, never loads it (``bench/idle_imports.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from nacl.exceptions import BadSignatureError

from gensokyo_idmap.errors import BadInputError

if TYPE_CHECKING:
    from nacl.signing import SigningKey, VerifyKey

__all__ = [
    "DEFAULT_MAX_AGE_SECONDS",
    "MAX_CLOCK_SKEW_SECONDS",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "WebhookKey",
    "check_fresh",
    "check_validation_request",
    "seed_from_secret",
]

SIGNATURE_HEADER: Final = "X-Signature-Ed25519"
TIMESTAMP_HEADER: Final = "X-Signature-Timestamp"
_SEED_SIZE: Final = 32
#: How old a callback's timestamp may be (``webhook.max_age_seconds``).
DEFAULT_MAX_AGE_SECONDS: Final = 600
#: How far ahead of our clock a callback's timestamp may be: clocks of two hosts kept by
#: NTP differ by far less; a timestamp further ahead would keep a captured callback
#: acceptable for longer than ``max_age`` after it was sent.
MAX_CLOCK_SKEW_SECONDS: Final = 60
_PLAIN_TOKEN: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_UNIX_SECONDS: Final = re.compile(r"[0-9]{1,20}")


def seed_from_secret(secret: str) -> bytes:
    """The bot secret's UTF-8 bytes repeated cyclically and cut to 32 bytes."""
    raw = secret.encode("utf-8")
    if not raw:
        raise BadInputError("bot.secret", "<empty>", "an empty secret cannot derive a key")
    repeated = raw * (_SEED_SIZE // len(raw) + 1)
    return repeated[:_SEED_SIZE]


@dataclass(frozen=True)
class WebhookKey:
    """The Ed25519 key pair of one bot, derived from its secret."""

    _signing: SigningKey = field(repr=False)

    @classmethod
    def from_secret(cls, secret: str) -> WebhookKey:
        from nacl.signing import SigningKey  # libsodium loads with the first key (docstring)

        return cls(SigningKey(seed_from_secret(secret)))

    @property
    def verify_key(self) -> VerifyKey:
        """The public half (PyNaCl derives it once, with the signing key)."""
        return self._signing.verify_key

    @property
    def public_hex(self) -> str:
        return bytes(self.verify_key).hex()

    def sign(self, message: bytes) -> str:
        """Hex signature of ``message`` (what the platform puts in X-Signature-Ed25519)."""
        return self._signing.sign(message).signature.hex()

    def sign_callback(self, timestamp: str, body: bytes) -> str:
        return self.sign(timestamp.encode("ascii") + body)

    def verify_callback(self, timestamp: str | None, body: bytes, signature: str | None) -> None:
        """Check one callback; BadInputError names the header that is missing or wrong.

        The message is the timestamp header's ASCII text followed by the raw body bytes,
        exactly as received (never re-serialised JSON).
        """
        if not signature:
            raise BadInputError(SIGNATURE_HEADER, signature, "missing")
        if not timestamp:
            raise BadInputError(TIMESTAMP_HEADER, timestamp, "missing")
        if not _UNIX_SECONDS.fullmatch(timestamp):
            raise BadInputError(TIMESTAMP_HEADER, timestamp, "must be unix seconds")
        try:
            raw = bytes.fromhex(signature)
        except ValueError:
            raise BadInputError(SIGNATURE_HEADER, signature, "not hex") from None
        if len(raw) != 64 or raw[63] & 0xE0:
            raise BadInputError(SIGNATURE_HEADER, signature, "not an Ed25519 signature")
        try:
            self.verify_key.verify(timestamp.encode("ascii") + body, raw)
        except BadSignatureError:
            raise BadInputError(
                SIGNATURE_HEADER, signature, "does not match the body and timestamp"
            ) from None

    def validation_response(self, plain_token: object, event_ts: object) -> dict[str, str]:
        """The answer to op 13: ``{"plain_token", "signature"}``, signing event_ts first;
        only for a request of the platform's shape (:func:`check_validation_request`)."""
        token, ts = check_validation_request(plain_token, event_ts)
        return {"plain_token": token, "signature": self.sign((ts + token).encode("ascii"))}


def check_validation_request(plain_token: object, event_ts: object) -> tuple[str, str]:
    """``(plain_token, event_ts)`` of an op 13 request, if it has the platform's shape.

    BadInputError otherwise: signing anything else would make op 13 a signing oracle
    (module docstring).
    """
    if plain_token is None or plain_token == "":
        raise BadInputError("d.plain_token", plain_token, "missing")
    if not isinstance(plain_token, str) or not _PLAIN_TOKEN.fullmatch(plain_token):
        raise BadInputError("d.plain_token", plain_token,
                            "must be a token of 1 to 64 letters, digits, '-' or '_'")
    if event_ts is None or event_ts == "":
        raise BadInputError("d.event_ts", event_ts, "missing")
    if not isinstance(event_ts, str) or not _UNIX_SECONDS.fullmatch(event_ts):
        raise BadInputError("d.event_ts", event_ts, "must be unix seconds as text (digits)")
    return plain_token, event_ts


def check_fresh(timestamp: str, now: float, max_age: float,
                skew: float = MAX_CLOCK_SKEW_SECONDS) -> None:
    """Refuse a callback timestamp (unix seconds, digits) older than ``max_age`` seconds or
    more than ``skew`` seconds ahead of ``now`` (module docstring): a replayed capture."""
    age = now - int(timestamp)
    if age > max_age:
        raise BadInputError(TIMESTAMP_HEADER, timestamp,
                            f"{int(age)} s old; callbacks older than {max_age:g} s "
                            "(webhook.max_age_seconds) are refused")
    if -age > skew:
        raise BadInputError(TIMESTAMP_HEADER, timestamp,
                            f"{int(-age)} s ahead of this host's clock; at most {skew:g} s "
                            "are accepted (check both clocks)")
