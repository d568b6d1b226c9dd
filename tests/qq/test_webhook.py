"""Webhook receiver over real sockets: a signing sender, the real bridge, real stores."""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer

from gensokyo_idmap.bridge.inbound import BridgeSettings, InboundBridge, InboundPipeline
from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.runtime.msgid import MsgIdMap
from gensokyo_idmap.qq.events import QQEvent
from gensokyo_idmap.qq.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, WebhookKey
from gensokyo_idmap.qq.webhook import WebhookReceiver
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore

APP = "102000001"
SECRET = "DG5g3B4j9X2KOErG"
GROUP = "A1B2C3D4E5F60718293A4B5C6D7E8F90"
USER = "0F1E2D3C4B5A69788796A5B4C3D2E1F0"
DISPATCH = json.dumps({
    "op": 0, "s": 7, "t": "GROUP_AT_MESSAGE_CREATE", "id": "GROUP_AT_MESSAGE_CREATE:k3j2",
    "d": {"id": "ROBOT1.0_grpMsg0001", "content": " hello", "timestamp": "2025-01-01T12:00:00+08:00",
          "group_openid": GROUP, "author": {"id": USER, "member_openid": USER}},
}).encode()


NOW = 1725442341  # the receiver's clock where a test sets it


def signed(body: bytes, secret: str = SECRET, ts: str | None = None) -> dict[str, str]:
    """The headers of the platform's delivery of ``body`` (timestamp: now, by default)."""
    ts = str(int(time.time())) if ts is None else ts
    return {TIMESTAMP_HEADER: ts, SIGNATURE_HEADER: WebhookKey.from_secret(secret)
            .sign_callback(ts, body), "X-Bot-Appid": APP, "User-Agent": "QQBot-Callback"}


Scenario = Callable[[ClientSession, str, WebhookReceiver, list[dict[str, Any]]], Awaitable[None]]


def serve(identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, scenario: Scenario,
          translate_wrapper: Callable[[Any], Any] | None = None,
          clock: Callable[[], float] = time.time) -> InboundPipeline:
    """Start the receiver on 127.0.0.1 with the real bridge and pipeline, run the scenario."""
    collected = Collector()

    class Bridge(InboundBridge):
        async def translate_many(self, events: Any) -> list[list[dict[str, Any]]]:
            inner = super().translate_many
            return await (translate_wrapper(inner) if translate_wrapper else inner)(events)

    bridge = Bridge(IdentityGraph(identity_store), MsgIdMap(msgid_store),
                    BridgeSettings(app_id=APP, self_id=int(APP)))
    pipeline = InboundPipeline(bridge, [collected])
    receiver = WebhookReceiver(APP, WebhookKey.from_secret(SECRET), pipeline, clock=clock)

    async def main() -> None:
        app = web.Application()
        app.add_routes(receiver.routes())
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        try:
            async with ClientSession() as session:
                await asyncio.wait_for(
                    scenario(session, str(server.make_url("/qqbot")), receiver,
                             collected.events), 20)
        finally:
            await server.close()

    asyncio.run(main())
    return pipeline


class Collector:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def publish(self, event: dict[str, Any]) -> None:
        self.events.append(event)


def stored(identity_store: LmdbIdentityStore) -> int:
    with identity_store.read() as view:
        return view.counts().identities


def test_signed_dispatch_is_processed_then_acknowledged(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore) -> None:
    async def scenario(session: ClientSession, url: str, receiver: WebhookReceiver,
                       forwarded: list[dict[str, Any]]) -> None:
        async with session.post(url, data=DISPATCH, headers=signed(DISPATCH)) as resp:
            assert resp.status == 200
            assert await resp.json() == {"op": 12}
        # acknowledged only after the identities were committed and the event built
        assert len(forwarded) == 1 and forwarded[0]["message_type"] == "group"
        assert receiver.processed == 1

    serve(identity_store, msgid_store, scenario)
    with identity_store.read() as view:
        assert view.vuin_of(OpenId(APP, USER).key) is not None


@pytest.mark.parametrize(
    "headers",
    [{}, {TIMESTAMP_HEADER: "1725442341"},
     {TIMESTAMP_HEADER: "1725442341", SIGNATURE_HEADER: "00" * 64},
     "other-secret", "tampered"],
)
def test_unsigned_or_badly_signed_callbacks_get_401_and_store_nothing(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, headers: Any) -> None:
    async def scenario(session: ClientSession, url: str, receiver: WebhookReceiver,
                       forwarded: list[dict[str, Any]]) -> None:
        body = DISPATCH
        if headers == "other-secret":
            sent = signed(body, secret="someone-else")
        elif headers == "tampered":
            sent = signed(body)
            body = body.replace(b"hello", b"HELLO")
        else:
            sent = headers
        async with session.post(url, data=body, headers=sent) as resp:
            assert resp.status == 401
            error = (await resp.json())["error"]
            assert SIGNATURE_HEADER in error["message"] or TIMESTAMP_HEADER in error["message"]
            assert SECRET not in error["message"]
        assert forwarded == [] and receiver.rejected == 1

    serve(identity_store, msgid_store, scenario)
    assert stored(identity_store) == 0


def test_url_validation_is_answered_with_the_reference_signature(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore) -> None:
    body = json.dumps({"op": 13, "d": {"plain_token": "Arq0D5A61EgUu4OxUvOp",
                                       "event_ts": "1725442341"}}).encode()

    async def scenario(session: ClientSession, url: str, receiver: WebhookReceiver,
                       forwarded: list[dict[str, Any]]) -> None:
        for headers in ({}, signed(body)):  # unsigned as in the platform's example, or signed
            async with session.post(url, data=body, headers=headers) as resp:
                assert resp.status == 200
                assert await resp.json() == {
                    "plain_token": "Arq0D5A61EgUu4OxUvOp",
                    "signature": "87befc99c42c651b3aac0278e71ada338433ae26fcb24307bdc5ad38c1adc2d0"
                                 "1bcfcadc0842edac85e85205028a1132afe09280305f13aa6909ffc2d652c706"}
        bad = signed(body, secret="someone-else")
        async with session.post(url, data=body, headers=bad) as resp:
            assert resp.status == 401  # a present but wrong signature is still refused

    serve(identity_store, msgid_store, scenario)


def test_signed_garbage_is_400(identity_store: LmdbIdentityStore,
                               msgid_store: LmdbMsgIdStore) -> None:
    async def scenario(session: ClientSession, url: str, receiver: WebhookReceiver,
                       forwarded: list[dict[str, Any]]) -> None:
        for body in (b"{not json", b'{"op":0,"t":"GROUP_AT_MESSAGE_CREATE","d":{"id":"x"}}'):
            async with session.post(url, data=body, headers=signed(body)) as resp:
                assert resp.status == 400
                assert "error" in await resp.json()

    serve(identity_store, msgid_store, scenario)
    assert stored(identity_store) == 0


def test_duplicate_deliveries_are_processed_once(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore) -> None:
    calls: list[str] = []

    def slow(translate: Any) -> Any:
        async def wrapped(events: list[QQEvent]) -> list[list[dict[str, Any]]]:
            calls.extend(event.event_type for event in events)
            await asyncio.sleep(0.05)  # keep the first delivery in flight for the second
            result: list[list[dict[str, Any]]] = await translate(events)
            return result
        return wrapped

    async def scenario(session: ClientSession, url: str, receiver: WebhookReceiver,
                       forwarded: list[dict[str, Any]]) -> None:
        async def deliver() -> int:
            async with session.post(url, data=DISPATCH, headers=signed(DISPATCH)) as resp:
                return resp.status
        statuses = await asyncio.gather(deliver(), deliver())
        statuses.append(await deliver())  # and once more after both finished
        assert statuses == [200, 200, 200]
        assert len(forwarded) == 1

    pipeline = serve(identity_store, msgid_store, scenario, slow)
    assert calls == ["GROUP_AT_MESSAGE_CREATE"]
    assert pipeline.duplicates == 2


def failing_first(*failures: Exception) -> Callable[[Any], Any]:
    """A translate wrapper for :func:`serve`: the first calls raise ``failures``, in turn."""
    left = list(failures)

    def flaky(translate: Any) -> Any:
        async def wrapped(events: list[QQEvent]) -> list[list[dict[str, Any]]]:
            if left:
                raise left.pop(0)
            result: list[list[dict[str, Any]]] = await translate(events)
            return result
        return wrapped

    return flaky


def test_failed_processing_is_not_acknowledged_and_is_retried(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore) -> None:
    flaky = failing_first(RuntimeError("downstream queue closed"))

    async def scenario(session: ClientSession, url: str, receiver: WebhookReceiver,
                       forwarded: list[dict[str, Any]]) -> None:
        async with session.post(url, data=DISPATCH, headers=signed(DISPATCH)) as resp:
            assert resp.status == 503  # the platform delivers it again
        async with session.post(url, data=DISPATCH, headers=signed(DISPATCH)) as resp:
            assert resp.status == 200
        assert len(forwarded) == 1

    serve(identity_store, msgid_store, scenario, flaky)


def test_without_a_secret_every_callback_is_refused(identity_store: LmdbIdentityStore,
                                                    msgid_store: LmdbMsgIdStore) -> None:
    async def main() -> None:
        async def pipeline(event: QQEvent) -> None:
            raise AssertionError("nothing may get through")

        receiver = WebhookReceiver(APP, None, pipeline)
        app = web.Application()
        app.add_routes(receiver.routes())
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        try:
            async with ClientSession() as session:
                async with session.post(server.make_url("/qqbot"), data=DISPATCH,
                                        headers=signed(DISPATCH)) as resp:
                    assert resp.status == 401
                    error = (await resp.json())["error"]
                    assert "bot.secret" in error["message"]
                    assert error["code"] == "not_configured"  # the operator's gap, not input
        finally:
            await server.close()

    asyncio.run(main())
    assert stored(identity_store) == 0


FORGED = json.dumps({  # an event the attacker wants accepted, from a user of their choice
    "op": 0, "t": "C2C_MESSAGE_CREATE", "id": "C2C_MESSAGE_CREATE:forged",
    "d": {"id": "ROBOT1.0_forged", "content": "transfer everything",
          "timestamp": "2025-01-01T12:00:00+08:00",
          "author": {"id": USER, "user_openid": USER}}}, separators=(",", ":")).encode()


@pytest.mark.parametrize("cut", [0, 1, 12], ids=["token-is-body", "ts-ends-in-brace", "split"])
def test_op13_cannot_be_made_to_sign_an_event_body(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, cut: int) -> None:
    """The signing oracle: op 13 signs ``event_ts + plain_token``, a callback signature
    covers ``timestamp + body``. Asked to sign ``<now>`` + a crafted event (whole, or cut
    anywhere between the two fields), it must refuse, and the event must not get in."""
    ts = str(NOW)
    probe = json.dumps({"op": 13, "d": {"event_ts": ts + FORGED[:cut].decode(),
                                        "plain_token": FORGED[cut:].decode()}}).encode()

    async def scenario(session: ClientSession, url: str, receiver: WebhookReceiver,
                       forwarded: list[dict[str, Any]]) -> None:
        async with session.post(url, data=probe) as resp:  # unsigned, as op 13 may be
            answered, answer = resp.status, await resp.json()
        signature = answer.get("signature", "00" * 64)
        async with session.post(url, data=FORGED, headers={
                TIMESTAMP_HEADER: ts, SIGNATURE_HEADER: signature}) as resp:
            assert resp.status == 401, "the forged event was accepted"
        assert forwarded == [] and receiver.processed == 0
        assert answered == 400, answer
        assert answer["error"]["message"].startswith(("d.plain_token", "d.event_ts"))

    serve(identity_store, msgid_store, scenario, clock=lambda: NOW)
    assert stored(identity_store) == 0


def test_signed_op13_of_a_bad_shape_is_refused_too(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore) -> None:
    body = json.dumps({"op": 13, "d": {"plain_token": FORGED.decode(),
                                       "event_ts": str(NOW)}}).encode()

    async def scenario(session: ClientSession, url: str, receiver: WebhookReceiver,
                       forwarded: list[dict[str, Any]]) -> None:
        async with session.post(url, data=body, headers=signed(body)) as resp:
            assert resp.status == 400 and "signature" not in await resp.json()

    serve(identity_store, msgid_store, scenario)


@pytest.mark.parametrize(("age", "status"), [(-60, 200), (0, 200), (600, 200),
                                             (601, 401), (86400, 401), (-61, 401),
                                             (-3600, 401)])
def test_callbacks_older_than_max_age_or_from_the_future_are_refused(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, age: int,
        status: int) -> None:
    """A captured callback replayed later is refused (webhook.max_age_seconds, 600), and so
    is one dated more than 60 s ahead (it would stay acceptable past its max age)."""
    ts = str(NOW - age)

    async def scenario(session: ClientSession, url: str, receiver: WebhookReceiver,
                       forwarded: list[dict[str, Any]]) -> None:
        async with session.post(url, data=DISPATCH, headers=signed(DISPATCH, ts=ts)) as resp:
            assert resp.status == status
            if status == 401:
                message = (await resp.json())["error"]["message"]
                assert message.startswith(TIMESTAMP_HEADER)
                assert ("webhook.max_age_seconds" in message if age > 0
                        else "ahead" in message)
        assert len(forwarded) == (status == 200)

    serve(identity_store, msgid_store, scenario, clock=lambda: NOW)
    assert (stored(identity_store) > 0) == (status == 200)


@pytest.mark.parametrize("appid", ["102000002", "", "1020000011"])
def test_a_callback_for_another_bot_is_refused(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, appid: str) -> None:
    async def scenario(session: ClientSession, url: str, receiver: WebhookReceiver,
                       forwarded: list[dict[str, Any]]) -> None:
        async with session.post(url, data=DISPATCH,
                                headers={**signed(DISPATCH), "X-Bot-Appid": appid}) as resp:
            assert resp.status == 403
            message = (await resp.json())["error"]["message"]
            assert message.startswith("X-Bot-Appid") and "bot.app_id" in message
        headers = signed(DISPATCH)
        del headers["X-Bot-Appid"]  # absent: the signature alone decides
        async with session.post(url, data=DISPATCH, headers=headers) as resp:
            assert resp.status == 200
        assert len(forwarded) == 1

    serve(identity_store, msgid_store, scenario)


def large_dispatch(size: int) -> bytes:
    """A group message whose content makes the body ``size`` bytes long."""
    envelope = json.loads(DISPATCH)
    envelope["d"]["content"] = ""
    bare = len(json.dumps(envelope).encode())
    envelope["d"]["content"] = "x" * (size - bare)
    body = json.dumps(envelope).encode()
    assert len(body) == size
    return body


def test_bodies_up_to_4_mib_are_taken_larger_ones_get_the_json_413(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore) -> None:
    """One limit (4 MiB), one error shape, whether the size is announced or streamed
    (chunked): aiohttp's own limit (1 MiB) must not answer first, in plain text."""
    limit = 4 * 1024 * 1024
    fits, too_large = large_dispatch(limit), large_dispatch(limit + 1)

    async def chunked(body: bytes) -> Any:
        for start in range(0, len(body), 256 * 1024):
            yield body[start:start + 256 * 1024]

    async def scenario(session: ClientSession, url: str, receiver: WebhookReceiver,
                       forwarded: list[dict[str, Any]]) -> None:
        for data in (io.BytesIO(too_large), chunked(too_large)):  # Content-Length, chunked
            async with session.post(url, data=data, headers=signed(too_large)) as resp:
                assert resp.status == 413
                assert resp.content_type == "application/json"
                message = (await resp.json())["error"]["message"]
                assert message.startswith("body:") and str(limit) in message
        assert forwarded == []
        async with session.post(url, data=chunked(fits), headers=signed(fits)) as resp:
            assert resp.status == 200, await resp.text()
        assert len(forwarded) == 1

    serve(identity_store, msgid_store, scenario)


def test_every_answer_is_counted_by_its_status_code(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore) -> None:
    """``gensokyo_webhook_responses_total{code}``: what the alert on the webhook's 5xx rate
    reads. Each status the receiver answers is counted once per answer, a bug of ours (an
    exception out of the handler: aiohttp's 500) too; every code it can answer is there
    from the start, at 0."""
    from gensokyo_idmap import counters, metrics

    def count(code: str) -> float:
        return counters.WEBHOOK_RESPONSES.labels(code).value

    text = metrics.render().decode()
    for code in ("200", "400", "401", "403", "413", "500", "503"):
        assert f'gensokyo_webhook_responses_total{{code="{code}"}}' in text
    before = {code: count(code) for code in ("200", "400", "401", "500", "503")}
    flaky = failing_first(RuntimeError("downstream queue closed"))
    clock_fails = False

    def clock() -> float:
        if clock_fails:
            raise RuntimeError("a bug of ours")
        return time.time()

    async def scenario(session: ClientSession, url: str, receiver: WebhookReceiver,
                       forwarded: list[dict[str, Any]]) -> None:
        nonlocal clock_fails
        for body, headers, status in [(DISPATCH, signed(DISPATCH), 503),
                                      (DISPATCH, signed(DISPATCH), 200),
                                      (DISPATCH, {}, 401), (DISPATCH, {}, 401),
                                      (b"{", signed(b"{"), 400)]:
            async with session.post(url, data=body, headers=headers) as resp:
                assert resp.status == status
        clock_fails = True
        async with session.post(url, data=DISPATCH, headers=signed(DISPATCH)) as resp:
            assert resp.status == 500

    serve(identity_store, msgid_store, scenario, flaky, clock=clock)
    assert {code: count(code) - before[code] for code in before} == {
        "200": 1, "400": 1, "401": 2, "500": 1, "503": 1}
