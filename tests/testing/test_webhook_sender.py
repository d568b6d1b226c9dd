"""The emulator's WebhookSender against the reference vectors and the daemon's real receiver.

The sender signs with its own code (``cryptography`` only); the receiver verifies with the
daemon's. A delivery one accepts and the other refuses would show up here.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import ClientSession
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.qq.webhook import WebhookReceiver
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore

from gensokyo_idmap.testing.platform_emulator import group_message
from ..qq.test_webhook import APP, SECRET, serve, stored
from gensokyo_idmap.testing.webhook_sender import SIGNATURE, TIMESTAMP, WebhookSender, ed25519_seed

REF_TOKEN, REF_TS = "Arq0D5A61EgUu4OxUvOp", "1725442341"
REF_SIGNATURE = ("87befc99c42c651b3aac0278e71ada338433ae26fcb24307bdc5ad38c1adc2d0"
                 "1bcfcadc0842edac85e85205028a1132afe09280305f13aa6909ffc2d652c706")
GROUP = "A1B2C3D4E5F60718293A4B5C6D7E8F90"
USER = "0F1E2D3C4B5A69788796A5B4C3D2E1F0"


def test_key_derivation_matches_the_reference_vectors() -> None:
    assert ed25519_seed("naOC0ocQE3shWLAfffVLB1rhYPG7") == b"naOC0ocQE3shWLAfffVLB1rhYPG7naOC"
    sender = WebhookSender("http://127.0.0.1:9/", APP, "naOC0ocQE3shWLAfffVLB1rhYPG7")
    assert sender.public_key.public_bytes(Encoding.Raw, PublicFormat.Raw).hex() == (
        "d7c362fe78aef81ff23287b493628b5db02a3c4fe30b215e4d19609b5d76673a")
    ref = WebhookSender("http://127.0.0.1:9/", APP, "DG5g3B4j9X2KOErG")  # §3.2 vector
    assert ref.sign(REF_TS, REF_TOKEN.encode()) == REF_SIGNATURE  # event_ts, then plain_token
    assert ref.check_validation({"plain_token": REF_TOKEN, "signature": REF_SIGNATURE},
                                REF_TOKEN, REF_TS)
    swapped = ref.sign(REF_TOKEN, REF_TS.encode())  # plain_token first: what the platform refuses
    assert not ref.check_validation({"plain_token": REF_TOKEN, "signature": swapped},
                                    REF_TOKEN, REF_TS)
    assert not ref.check_validation({"plain_token": "other", "signature": REF_SIGNATURE},
                                    REF_TOKEN, REF_TS)
    assert not ref.check_validation({"plain_token": REF_TOKEN, "signature": "zz"},
                                    REF_TOKEN, REF_TS)


def test_envelopes_count_seq_and_carry_the_platform_headers() -> None:
    sender = WebhookSender("http://127.0.0.1:9/", APP, SECRET)
    first = sender.build("GROUP_AT_MESSAGE_CREATE", group_message(1), timestamp="1735700000")
    second = sender.build("C2C_MESSAGE_CREATE", {"id": "x"}, event_id="C2C_MESSAGE_CREATE:abc")
    assert (first.seq, second.seq) == (1, 2)
    assert json.loads(first.body) == {"op": 0, "s": 1, "t": "GROUP_AT_MESSAGE_CREATE",
                                      "id": "GROUP_AT_MESSAGE_CREATE:1", "d": group_message(1)}
    assert json.loads(second.body)["id"] == "C2C_MESSAGE_CREATE:abc"
    assert first.headers[TIMESTAMP] == "1735700000"
    assert first.headers["X-Bot-Appid"] == APP
    assert first.headers["User-Agent"] == "QQBot-Callback"
    assert first.headers[SIGNATURE] == sender.sign("1735700000", first.body)
    assert len(bytes.fromhex(first.headers[SIGNATURE])) == 64


def test_signed_deliveries_are_accepted_by_the_daemons_receiver(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore) -> None:
    async def scenario(session: ClientSession, url: str, receiver: WebhookReceiver,
                       forwarded: list[dict[str, Any]]) -> None:
        sender = WebhookSender(url, APP, SECRET, session=session)
        for n in (1, 2):
            delivery = await sender.dispatch("GROUP_AT_MESSAGE_CREATE",
                                             group_message(n, group=GROUP, user=USER))
            assert (delivery.seq, delivery.status, delivery.json()) == (n, 200, {"op": 12})
        assert [(d.seq, d.status) for d in sender.deliveries] == [(1, 200), (2, 200)]
        assert receiver.processed == 2 and receiver.rejected == 0
        assert [e["message"][-1]["data"]["text"] for e in forwarded] == ["m1", "m2"]

    serve(identity_store, msgid_store, scenario)
    with identity_store.read() as view:
        assert view.vuin_of(OpenId(APP, USER).key) is not None


def test_tampered_or_wrongly_signed_deliveries_get_401(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore) -> None:
    async def scenario(session: ClientSession, url: str, receiver: WebhookReceiver,
                       forwarded: list[dict[str, Any]]) -> None:
        sender = WebhookSender(url, APP, SECRET, session=session)
        good = sender.build("GROUP_AT_MESSAGE_CREATE", group_message(1))
        tampered = await sender.post_raw(good.body.replace(b'"m1"', b'"m2"'), good.headers,
                                         seq=good.seq)
        later = dict(good.headers, **{TIMESTAMP: str(int(good.headers[TIMESTAMP]) + 1)})
        retimed = await sender.post_raw(good.body, later, seq=good.seq)
        stranger = WebhookSender(url, APP, "someone-else", session=session)
        foreign = await stranger.dispatch("GROUP_AT_MESSAGE_CREATE", group_message(2))
        for delivery in (tampered, retimed, foreign):
            assert delivery.status == 401, delivery
            assert SIGNATURE in delivery.json()["error"]["message"]
        assert receiver.rejected == 3 and forwarded == []
        # the untouched original still goes through: only the tampering was refused
        assert (await sender.post(good)).status == 200
        assert len(forwarded) == 1

    serve(identity_store, msgid_store, scenario)
    assert stored(identity_store) == 2  # the group and the author of the one good delivery


def test_op13_validation_is_answered_and_checked(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore) -> None:
    async def scenario(session: ClientSession, url: str, receiver: WebhookReceiver,
                       forwarded: list[dict[str, Any]]) -> None:
        assert SECRET == "DG5g3B4j9X2KOErG"  # the receiver's bot is the vector's bot
        sender = WebhookSender(url, APP, SECRET, session=session)
        for signed in (True, False):
            ref = await sender.validate(REF_TOKEN, REF_TS, signed=signed)
            assert ref.ok and ref.delivery.status == 200
            assert ref.delivery.json() == {"plain_token": REF_TOKEN, "signature": REF_SIGNATURE}
        fresh = await sender.validate()  # random token, current time
        assert fresh.ok and fresh.delivery.json()["plain_token"] == fresh.plain_token
        stranger = WebhookSender(url, APP, "someone-else", session=session)
        refused = await stranger.validate()
        assert refused.delivery.status == 401 and not refused.ok
        assert forwarded == []

    serve(identity_store, msgid_store, scenario)
