"""Webhook signatures of the QQ bot platform (reference §3.2–3.4), pure: no I/O.

The platform signs every callback with an Ed25519 key derived from the bot secret: the
secret's bytes repeated to 32 bytes are the RFC 8032 seed. We verify ``timestamp + raw
body`` against the derived public key (nothing is stored for a request that fails), and
answer the op 13 URL validation by signing ``event_ts + plain_token``. The emulated
platform in ``tests/`` uses the same class to sign what it sends.

Ed25519 comes from ``cryptography`` (well kept, wheels for every platform we run on), not
from hand-written code. The secret never appears in an error or a repr.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from gensokyo_idmap.errors import BadInputError

__all__ = ["SIGNATURE_HEADER", "TIMESTAMP_HEADER", "WebhookKey", "seed_from_secret"]

SIGNATURE_HEADER: Final = "X-Signature-Ed25519"
TIMESTAMP_HEADER: Final = "X-Signature-Timestamp"
_SEED_SIZE: Final = 32


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

    _private: Ed25519PrivateKey = field(repr=False)

    @classmethod
    def from_secret(cls, secret: str) -> WebhookKey:
        return cls(Ed25519PrivateKey.from_private_bytes(seed_from_secret(secret)))

    @property
    def public_key(self) -> Ed25519PublicKey:
        return self._private.public_key()

    @property
    def public_hex(self) -> str:
        return self.public_key.public_bytes(Encoding.Raw, PublicFormat.Raw).hex()

    def sign(self, message: bytes) -> str:
        """Hex signature of ``message`` (what the platform puts in X-Signature-Ed25519)."""
        return self._private.sign(message).hex()

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
        if not timestamp.isascii() or not timestamp.isdigit():
            raise BadInputError(TIMESTAMP_HEADER, timestamp, "must be unix seconds")
        try:
            raw = bytes.fromhex(signature)
        except ValueError:
            raise BadInputError(SIGNATURE_HEADER, signature, "not hex") from None
        if len(raw) != 64 or raw[63] & 0xE0:
            raise BadInputError(SIGNATURE_HEADER, signature, "not an Ed25519 signature")
        try:
            self.public_key.verify(raw, timestamp.encode("ascii") + body)
        except InvalidSignature:
            raise BadInputError(
                SIGNATURE_HEADER, signature, "does not match the body and timestamp"
            ) from None

    def validation_response(self, plain_token: str, event_ts: str) -> dict[str, str]:
        """The answer to op 13: ``{"plain_token", "signature"}``, signing event_ts first."""
        if not plain_token:
            raise BadInputError("d.plain_token", plain_token, "missing")
        if not event_ts:
            raise BadInputError("d.event_ts", event_ts, "missing")
        message = (event_ts + plain_token).encode("utf-8")
        return {"plain_token": plain_token, "signature": self.sign(message)}
