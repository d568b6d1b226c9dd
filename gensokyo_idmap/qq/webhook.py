"""Webhook receiver: the platform POSTs signed event frames; we verify, hand on, acknowledge.

Rules (reference qq-platform.md §3):

1. **Nothing unsigned gets in.** Every callback is verified over ``X-Signature-Timestamp``
   + the raw body before it is parsed; a missing or bad signature is answered 401 and
   nothing is stored. op 13 (URL validation) is answered even without signature headers
   (the platform's own example sends none), but a present, bad signature is still refused,
   and only a request of the platform's shape is signed at all (``qq.signing``: op 13 must
   never sign what a callback signature covers).
2. **Nothing old gets in.** A signed callback whose timestamp is older than
   ``max_age_seconds`` (``webhook.max_age_seconds``), or too far ahead of our clock, is
   answered 401: a captured callback cannot be replayed later. Within that age a repeat is
   a duplicate, and the de-duplication window is at least that long (``runtime.claims``).
3. **Only this bot's callbacks.** ``X-Bot-Appid``, when present, must be ``bot.app_id``
   (403 otherwise): a callback meant for another bot is not processed as ours. A daemon of
   several bots serves them all on one URL (:class:`WebhookRouter`): the header picks the
   bot, whose receiver verifies the callback with its own key
   (:mod:`~gensokyo_idmap.qq.appid_routing`).
4. **One size limit, one error shape.** A body over 4 MiB is answered 413 with the JSON
   error every refusal has, whether its size was announced (Content-Length) or not
   (chunked); the body is read here, not by aiohttp (whose own limit, 1 MiB by default,
   answers in plain text).
5. **Acknowledge only what is durable.** A dispatch is answered ``{"op":12}`` after the
   pipeline finished with it (identities committed, delivery claimed); if the pipeline
   fails the answer is a 5xx, so the platform delivers it again. A crash before the answer
   loses nothing.
6. **One delivery, one processing** is the pipeline's job (:class:`InboundPipeline`
   de-duplicates whatever source an event came from, across restarts too).

The pipeline is any ``async (QQEvent) -> None`` that raises when it could not process.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Final

import structlog
from aiohttp import web

from gensokyo_idmap import counters
from gensokyo_idmap.errors import BadInputError, IdmapError, NotConfiguredError
from gensokyo_idmap.qq.appid_routing import APPID_HEADER, callback_bot
from gensokyo_idmap.qq.events import QQEvent, parse_dispatch, parse_envelope
from gensokyo_idmap.qq.signing import (
    DEFAULT_MAX_AGE_SECONDS,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    WebhookKey,
    check_fresh,
)

__all__ = ["APPID_HEADER", "DEFAULT_WEBHOOK_PATH", "MAX_BODY_BYTES", "Pipeline",
           "WebhookReceiver", "WebhookRouter"]

log = structlog.get_logger("gensokyo_idmap.qq.webhook")

DEFAULT_WEBHOOK_PATH: Final = "/qqbot"
MAX_BODY_BYTES: Final = 4 * 1024 * 1024

Pipeline = Callable[[QQEvent], Awaitable[None]]

#: The acknowledgement of a processed dispatch, encoded once (not per callback).
_ACK: Final = b'{"op": 12}'  # byte for byte what json_response wrote
#: ``gensokyo_events_in`` of this transport, counted as each event goes to the pipeline.
_RECEIVED: Final = counters.EVENTS_IN.labels("webhook")
#: ``gensokyo_webhook_responses`` of each status the receiver answers, made before the first
#: callback: a dashboard's rate of 5xx is 0, not "no data", until one happens.
_ANSWERED: Final = {status: counters.WEBHOOK_RESPONSES.labels(str(status))
                    for status in (200, 400, 401, 403, 413, 500, 503)}


class WebhookReceiver:
    """The aiohttp handler of one bot's callback URL."""

    def __init__(
        self,
        app_id: str,
        key: WebhookKey | None,
        pipeline: Pipeline,
        *,
        max_age_seconds: float = DEFAULT_MAX_AGE_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.app_id = app_id
        self.key = key
        self.pipeline = pipeline
        self.max_age_seconds = max_age_seconds
        self._clock = clock
        self.processed = 0
        self.rejected = 0

    @classmethod
    def for_secret(cls, app_id: str, secret: str, pipeline: Pipeline, *,
                   max_age_seconds: float = DEFAULT_MAX_AGE_SECONDS) -> WebhookReceiver:
        """The receiver of a configured bot: its key derived from ``bot.secret``. Without a
        secret it still answers, refusing every callback (said once, loudly, here)."""
        if not secret:
            log.warning("[qq] webhook has no bot.secret: every callback is refused until it "
                        "is set")
        key = WebhookKey.from_secret(secret) if secret else None
        return cls(app_id, key, pipeline, max_age_seconds=max_age_seconds)

    def routes(self, path: str = DEFAULT_WEBHOOK_PATH) -> list[web.RouteDef]:
        return [web.post(path, self.handle)]

    def _refuse(self, status: int, err: IdmapError) -> web.Response:
        self.rejected += 1
        return _refusal(status, err)

    @staticmethod
    async def _read_body(request: web.Request) -> bytes | None:
        """The whole body, or None once it is over :data:`MAX_BODY_BYTES` (announced or
        counted while it streams in: a chunked body has no Content-Length)."""
        length = request.content_length
        if length is not None:
            if length > MAX_BODY_BYTES:
                return None
            try:  # announced: read in one call (the platform's way), not chunk by chunk
                return await request.content.readexactly(length)
            except asyncio.IncompleteReadError as short:
                return short.partial  # what came before the sender stopped: refused later
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.content.iter_any():
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    def _verify(self, key: WebhookKey, timestamp: str | None, body: bytes,
                signature: str | None) -> None:
        """Rules 1 and 2: a good signature, over a timestamp neither old nor ahead."""
        key.verify_callback(timestamp, body, signature)
        assert timestamp is not None  # verify_callback refuses a missing one
        check_fresh(timestamp, self._clock(), self.max_age_seconds)

    async def handle(self, request: web.Request) -> web.Response:
        """The answer to one callback, counted by status (``gensokyo_webhook_responses``;
        a bug of ours is the 500 aiohttp answers)."""
        try:
            response = await self._answer(request)
        except Exception:
            _ANSWERED[500].inc()
            raise
        return _counted(response)

    async def _answer(self, request: web.Request) -> web.Response:
        body = await self._read_body(request)
        if body is None:
            return self._refuse(413, BadInputError(
                "body", request.content_length or f"over {MAX_BODY_BYTES} bytes",
                f"a callback body may have at most {MAX_BODY_BYTES} bytes"))
        appid = request.headers.get(APPID_HEADER)
        if appid is not None and appid != self.app_id:
            return self._refuse(403, BadInputError(
                APPID_HEADER, appid, "is not this bot's AppID (bot.app_id): the callback "
                "is meant for another bot"))
        if self.key is None:
            return self._refuse(401, NotConfiguredError(
                "bot.secret", "not configured: callbacks cannot be verified"))
        timestamp = request.headers.get(TIMESTAMP_HEADER)
        signature = request.headers.get(SIGNATURE_HEADER)
        envelope = None
        if signature is None:  # only the URL validation may come unsigned
            try:
                envelope = parse_envelope(body)
            except BadInputError:
                envelope = None
            if envelope is not None and envelope.op != 13:
                envelope = None
        if envelope is None:
            try:
                self._verify(self.key, timestamp, body, signature)
            except BadInputError as err:
                return self._refuse(401, err)
            try:
                envelope = parse_envelope(body)
            except BadInputError as err:
                return self._refuse(400, err)
        if envelope.op == 13:
            d = envelope.d if isinstance(envelope.d, dict) else {}
            try:
                answer = self.key.validation_response(d.get("plain_token"), d.get("event_ts"))
            except BadInputError as err:
                return self._refuse(400, err)
            log.info("[qq] webhook validation answered", signed=signature is not None)
            return web.json_response(answer)
        if envelope.op != 0:
            log.info("[qq] webhook frame ignored", op=envelope.op)
            return web.json_response({"op": 12})
        try:
            event = parse_dispatch(envelope, self.app_id)
        except BadInputError as err:
            return self._refuse(400, err)
        try:
            _RECEIVED.inc()
            await self.pipeline(event)  # de-duplicates, and waits for a repeat in flight
        except Exception as exc:  # noqa: BLE001 - logged; the 503 makes the platform retry
            log.error("[qq] webhook event not processed: the platform will retry",
                      type=event.event_type, error=f"{type(exc).__name__}: {exc}")
            return web.json_response({"op": 12, "d": 1}, status=503)
        self.processed += 1
        return web.Response(body=_ACK, content_type="application/json", charset="utf-8")


def _refusal(status: int, err: IdmapError) -> web.Response:
    """The JSON error every refusal of a callback is answered with (logged)."""
    log.warning("[qq] webhook refused", status=status, reason=err.message)
    return web.json_response({"error": {"code": err.code, "message": err.message}},
                             status=status)


def _counted(response: web.Response) -> web.Response:
    status = response.status
    (_ANSWERED.get(status) or counters.WEBHOOK_RESPONSES.labels(str(status))).inc()
    return response


class WebhookRouter:
    """One callback URL for every bot of the daemon: each callback goes to the receiver of
    the bot its ``X-Bot-Appid`` names (rule 3), which verifies and processes it as its own."""

    def __init__(self, receivers: Sequence[WebhookReceiver]) -> None:
        self.receivers = {receiver.app_id: receiver for receiver in receivers}
        self._app_ids = list(self.receivers)
        self.rejected = 0

    def routes(self, path: str = DEFAULT_WEBHOOK_PATH) -> list[web.RouteDef]:
        return [web.post(path, self.handle)]

    async def handle(self, request: web.Request) -> web.Response:
        chosen = callback_bot(self._app_ids, request.headers.get(APPID_HEADER))
        if isinstance(chosen, BadInputError):
            self.rejected += 1
            return _counted(_refusal(403, chosen))
        return await self.receivers[chosen].handle(request)
