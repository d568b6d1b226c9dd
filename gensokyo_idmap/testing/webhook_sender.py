"""The emulated platform's webhook side: signed dispatch deliveries, as the real platform sends.

An independent implementation of the wire format (reference qq-platform.md §3), written from
the reference and ``cryptography`` alone: it must not share code with the daemon's
``gensokyo_idmap.qq.signing``, or a mistake there would be repeated here and go unseen.

- Key (§3.2): the bot secret's UTF-8 bytes repeated cyclically and cut to 32 bytes are the
  RFC 8032 Ed25519 seed.
- Each delivery (§3.1/§3.3): ``POST`` of the raw envelope ``{"op":0,"s","t","id","d"}`` with
  ``X-Signature-Ed25519`` = hex(sign(timestamp + raw body)), ``X-Signature-Timestamp`` = unix
  seconds, ``X-Bot-Appid`` and ``User-Agent: QQBot-Callback``.
- op 13 (§3.4): ``{"op":13,"d":{"plain_token","event_ts"}}``, signed too (the reference
  says an emulator should); the answer must be ``{"plain_token", "signature"}`` where the
  signature verifies over ``event_ts + plain_token`` with the public key.

Any event type goes the same way: :meth:`WebhookSender.dispatch` takes the ``t`` and ``d``
the emulated platform's builders make (group and C2C messages, and the guild events:
``channel_message``, ``direct_message``, ``message_delete``, ``guild_member``).

Every delivery is recorded (seq, status, response body). A body can be built and signed
ahead of time (:meth:`WebhookSender.build`) and posted later (:meth:`WebhookSender.post`),
so a benchmark does not time the signing.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass
from typing import Any, Final

import aiohttp
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

__all__ = ["Delivery", "Prepared", "Validation", "WebhookSender", "ed25519_seed"]

SIGNATURE: Final = "X-Signature-Ed25519"
TIMESTAMP: Final = "X-Signature-Timestamp"
APPID: Final = "X-Bot-Appid"


def ed25519_seed(secret: str) -> bytes:
    """§3.2: the secret repeated cyclically, truncated to 32 bytes."""
    raw = secret.encode("utf-8")
    if not raw:
        raise ValueError("an empty bot secret derives no key")
    return (raw * (32 // len(raw) + 1))[:32]


@dataclass(frozen=True, slots=True)
class Prepared:
    """One signed request, ready to post: its seq (None for op 13), body and headers."""

    seq: int | None
    body: bytes
    headers: dict[str, str]


@dataclass(frozen=True, slots=True)
class Delivery:
    """What the receiver answered to one POST."""

    seq: int | None
    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True, slots=True)
class Validation:
    """The op 13 exchange: what was asked, what came back, and whether it checks out."""

    plain_token: str
    event_ts: str
    delivery: Delivery
    ok: bool


class WebhookSender:
    """Posts signed dispatches to one callback URL and records every answer.

    Use as ``async with WebhookSender(url, app_id, secret) as sender:`` (it then owns an
    ``aiohttp.ClientSession``), or pass ``session=`` to share one.
    """

    def __init__(self, url: str, app_id: str, secret: str, *,
                 session: aiohttp.ClientSession | None = None,
                 timeout: float = 10.0) -> None:
        self.url = url
        self.app_id = app_id
        self._key = Ed25519PrivateKey.from_private_bytes(ed25519_seed(secret))
        self._session = session
        self._own_session = session is None
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self.seq = 0
        self.deliveries: list[Delivery] = []

    async def __aenter__(self) -> WebhookSender:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._own_session and self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def public_key(self) -> Ed25519PublicKey:
        return self._key.public_key()

    # --- signing ------------------------------------------------------------------------------

    def sign(self, timestamp: str, body: bytes) -> str:
        """§3.3: hex Ed25519 signature of the timestamp's ASCII followed by the raw body."""
        return self._key.sign(timestamp.encode("ascii") + body).hex()

    def headers(self, body: bytes, timestamp: str | None = None) -> dict[str, str]:
        ts = timestamp if timestamp is not None else str(int(time.time()))
        return {SIGNATURE: self.sign(ts, body), TIMESTAMP: ts, APPID: self.app_id,
                "User-Agent": "QQBot-Callback", "Content-Type": "application/json"}

    def build(self, t: str, d: Any, *, event_id: str | None = None,
              timestamp: str | None = None) -> Prepared:
        """The next dispatch envelope (seq counts up from 1), serialised once and signed."""
        self.seq += 1
        envelope = {"op": 0, "s": self.seq, "t": t, "id": event_id or f"{t}:{self.seq}", "d": d}
        body = json.dumps(envelope, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        return Prepared(self.seq, body, self.headers(body, timestamp))

    # --- sending ------------------------------------------------------------------------------

    async def post(self, prepared: Prepared) -> Delivery:
        """POST one prepared request as is; the answer is recorded and returned."""
        return await self.post_raw(prepared.body, prepared.headers, seq=prepared.seq)

    async def post_raw(self, body: bytes, headers: dict[str, str], *,
                       seq: int | None = None) -> Delivery:
        """POST any body with any headers (for tampered or unsigned requests)."""
        if self._session is None:
            raise RuntimeError("use 'async with WebhookSender(...)' or pass session=")
        async with self._session.post(self.url, data=body, headers=headers,
                                      timeout=self._timeout) as resp:
            delivery = Delivery(seq, resp.status, await resp.read())
        self.deliveries.append(delivery)
        return delivery

    async def dispatch(self, t: str, d: Any, *, event_id: str | None = None) -> Delivery:
        """Build, sign and post one dispatch."""
        return await self.post(self.build(t, d, event_id=event_id))

    # --- op 13 --------------------------------------------------------------------------------

    def check_validation(self, answer: Any, plain_token: str, event_ts: str) -> bool:
        """Whether an op 13 answer is what the platform accepts: the same plain_token and a
        signature over ``event_ts + plain_token`` (event_ts first) by the bot's key."""
        if not isinstance(answer, dict) or answer.get("plain_token") != plain_token:
            return False
        try:
            raw = bytes.fromhex(str(answer.get("signature", "")))
            self.public_key.verify(raw, (event_ts + plain_token).encode("utf-8"))
        except (ValueError, InvalidSignature):
            return False
        return True

    async def validate(self, plain_token: str | None = None, event_ts: str | None = None, *,
                       signed: bool = True) -> Validation:
        """Send the URL validation request (op 13) and check the answer."""
        token = plain_token or secrets.token_urlsafe(15)
        ts = event_ts or str(int(time.time()))
        body = json.dumps({"op": 13, "d": {"plain_token": token, "event_ts": ts}}).encode()
        headers = (self.headers(body) if signed
                   else {APPID: self.app_id, "User-Agent": "QQBot-Callback"})
        delivery = await self.post_raw(body, headers)
        ok = False
        if delivery.status == 200:
            try:
                ok = self.check_validation(delivery.json(), token, ts)
            except ValueError:
                ok = False
        return Validation(token, ts, delivery, ok)
