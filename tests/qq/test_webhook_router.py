"""One webhook URL for two bots (issue 34.2) over real sockets: each callback goes to the bot
its X-Bot-Appid names, verified with that bot's own key, translated with its AppID and
self_id into one identity graph; a person with one union_openid in both bots is one vUIN."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer

from gensokyo_idmap.bridge.inbound import BridgeSettings, InboundBridge, InboundPipeline
from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.qq.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, WebhookKey
from gensokyo_idmap.qq.webhook import WebhookReceiver, WebhookRouter
from gensokyo_idmap.runtime.claims import DeliveryLog
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore
from gensokyo_idmap.runtime.msgid import MsgIdMap
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore

from .test_webhook import Collector

BOTS = {"102000001": ("first-bot-secret-Hk29", 10001),
        "102000002": ("second-bot-secret-Q7x", 20002)}
GROUP = "A1B2C3D4E5F60718293A4B5C6D7E8F90"
USER_A = "0F1E2D3C4B5A69788796A5B4C3D2E1F0"
USER_B = "1F1E2D3C4B5A69788796A5B4C3D2E1F0"
UNION = "UNION0000000000000000000000000001"


def dispatch(n: int, user: str) -> bytes:
    return json.dumps({
        "op": 0, "s": n, "t": "GROUP_AT_MESSAGE_CREATE", "id": f"GROUP_AT_MESSAGE_CREATE:{n}",
        "d": {"id": "ROBOT1.0_same", "content": f" m{n}",  # one message id in both bots
              "timestamp": "2025-01-01T12:00:00+08:00", "group_openid": GROUP,
              "author": {"id": user, "member_openid": user, "union_openid": UNION}},
    }).encode()


def signed(body: bytes, app_id: str | None, secret: str) -> dict[str, str]:
    ts = str(int(time.time()))
    headers = {TIMESTAMP_HEADER: ts, "User-Agent": "QQBot-Callback",
               SIGNATURE_HEADER: WebhookKey.from_secret(secret).sign_callback(ts, body)}
    if app_id is not None:
        headers["X-Bot-Appid"] = app_id
    return headers


def test_each_callback_goes_to_the_bot_it_names(identity_store: LmdbIdentityStore,
                                                msgid_store: LmdbMsgIdStore) -> None:
    graph, msgids, deliveries = IdentityGraph(identity_store), MsgIdMap(msgid_store), DeliveryLog()
    collected = {app_id: Collector() for app_id in BOTS}
    receivers = [WebhookReceiver(app_id, WebhookKey.from_secret(secret), InboundPipeline(
        InboundBridge(graph, msgids, BridgeSettings(app_id=app_id, self_id=self_id)),
        [collected[app_id]], deliveries, key_scope=f"{app_id}:"))
        for app_id, (secret, self_id) in BOTS.items()]
    router = WebhookRouter(receivers)
    (first, (secret_a, _)), (second, (secret_b, _)) = BOTS.items()

    async def main() -> None:
        app = web.Application()
        app.add_routes(router.routes())
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        url = str(server.make_url("/qqbot"))
        try:
            async with ClientSession() as session:
                async def post(body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
                    async with session.post(url, data=body, headers=headers) as resp:
                        return resp.status, await resp.json()

                body_a, body_b = dispatch(1, USER_A), dispatch(2, USER_B)
                assert (await post(body_a, signed(body_a, first, secret_a)))[0] == 200
                assert (await post(body_b, signed(body_b, second, secret_b)))[0] == 200
                # the other bot's key does not verify a callback naming this one
                body = dispatch(3, USER_B)
                status, _ = await post(body, signed(body, second, secret_a))
                assert status == 401
                # an AppID the daemon does not serve, or none: 403 naming the bots served
                status, answer = await post(body, signed(body, "102000009", secret_b))
                assert status == 403
                assert "it serves 102000001, 102000002" in answer["error"]["message"]
                status, answer = await post(body, signed(body, None, secret_b))
                assert status == 403 and "missing" in answer["error"]["message"]
        finally:
            await server.close()

    asyncio.run(main())
    [event_a] = collected[first].events
    [event_b] = collected[second].events
    assert (event_a["self_id"], event_b["self_id"]) == (10001, 20002)
    # the leading @bot is each bot's own (self_id); one message id in both bots is no repeat
    assert (event_a["raw_message"], event_b["raw_message"]) == ("[CQ:at,qq=10001] m1",
                                                                "[CQ:at,qq=20002] m2")
    # keys of each bot's AppID; one union_openid in both bots: one person, one vUIN
    vuin_a = graph.lookup(OpenId(first, USER_A))
    vuin_b = graph.lookup(OpenId(second, USER_B))
    assert vuin_a is not None and vuin_a == vuin_b == event_a["user_id"] == event_b["user_id"]
    assert graph.lookup(OpenId(first, GROUP)) != graph.lookup(OpenId(second, GROUP))
    assert router.rejected == 2 and receivers[1].rejected == 1
