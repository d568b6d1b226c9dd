"""OpenAPI client against the emulated platform: auth, 401 retry, errors, interaction acks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import ClientSession

from gensokyo_idmap.bridge.inbound import BridgeSettings, InboundBridge, InboundPipeline
from gensokyo_idmap.errors import BadInputError, PlatformError
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.runtime.msgid import MsgIdMap
from gensokyo_idmap.qq.events import Interaction, parse_dispatch, parse_envelope
from gensokyo_idmap.qq.openapi import OpenApiClient
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore

from gensokyo_idmap.testing.platform_emulator import APP, SECRET, EmulatedPlatform


def with_api(scenario: Callable[[EmulatedPlatform, OpenApiClient], Awaitable[None]]) -> None:
    async def main() -> None:
        platform = EmulatedPlatform()
        await platform.start()
        try:
            async with ClientSession() as session:
                api = platform.openapi(session)
                await asyncio.wait_for(scenario(platform, api), 15)
        finally:
            await platform.close()

    asyncio.run(main())


def test_ack_interaction_with_token_and_retry_after_401() -> None:
    async def scenario(platform: EmulatedPlatform, api: OpenApiClient) -> None:
        await api.ack_interaction("i-1")
        platform.reject_next_token = True  # the platform replaced the token early
        await api.ack_interaction("i-2")
        assert [(i, body) for i, body, _ in platform.interaction_acks] == [
            ("i-1", {"code": 0}), ("i-2", {"code": 0})]
        assert platform.interaction_acks[1][2] == "QQBot T2"  # fetched anew after the 401
        with pytest.raises(PlatformError) as err:
            await api.ack_interaction("missing")
        assert "HTTP 400" in err.value.message and "11255" in err.value.message
        assert SECRET not in err.value.message and "T2" not in err.value.message

    with_api(scenario)


def test_pipeline_acknowledges_interactions(identity_store: LmdbIdentityStore,
                                            msgid_store: LmdbMsgIdStore) -> None:
    frame = {"op": 0, "s": 4, "t": "INTERACTION_CREATE", "id": "INTERACTION_CREATE:1",
             "d": {"id": "intr-77", "type": 11, "scene": "group", "chat_type": 1,
                   "timestamp": "2025-01-01T12:00:00+08:00",
                   "group_openid": "A1B2C3D4E5F60718293A4B5C6D7E8F90",
                   "group_member_openid": "0F1E2D3C4B5A69788796A5B4C3D2E1F0",
                   "data": {"type": 11, "resolved": {"button_data": "ok", "button_id": "b1"}}}}

    class Sink:
        events: list[dict[str, object]] = []

        def publish(self, event: dict[str, object]) -> None:
            self.events.append(event)

    async def scenario(platform: EmulatedPlatform, api: OpenApiClient) -> None:
        bridge = InboundBridge(IdentityGraph(identity_store), MsgIdMap(msgid_store),
                               BridgeSettings(app_id=APP, self_id=int(APP)))

        async def acknowledge(event: Interaction) -> None:
            await api.ack_interaction(event.interaction_id)

        pipeline = InboundPipeline(bridge, [Sink()], acknowledge=acknowledge)
        event = parse_dispatch(parse_envelope(json.dumps(frame)), APP)
        await pipeline(event)
        assert [i for i, _, _ in platform.interaction_acks] == ["intr-77"]
        [notice] = Sink.events
        assert notice["notice_type"] == "interaction" and notice["button_id"] == "b1"

    with_api(scenario)


def test_guild_reads_walk_every_page_and_name_a_missing_guild() -> None:
    async def scenario(platform: EmulatedPlatform, api: OpenApiClient) -> None:
        for n in range(2, 151):  # 150 guilds: two pages of 100
            platform.guilds[f"70000{n:05d}"] = {"id": f"70000{n:05d}", "name": f"g{n}",
                                                 "channels": []}
        guilds = await api.me_guilds()
        assert len(guilds) == 150 and len({g["id"] for g in guilds}) == 150
        pages = [path for method, path, _ in platform.api_calls
                 if path.startswith("/users/@me/guilds")]
        assert len(pages) == 2
        assert (await api.me())["id"] == "1"
        [channel] = await api.guild_channels("7000000001")
        assert channel["name"] == "general"
        with pytest.raises(PlatformError) as err:
            await api.guild_channels("7999999999")
        assert err.value.status == 404 and err.value.platform_code == 11281

    with_api(scenario)


def test_ids_that_are_no_platform_id_are_refused_before_any_request() -> None:
    async def scenario(platform: EmulatedPlatform, api: OpenApiClient) -> None:
        for hostile in ("../../users/@me", "8000001?x=1#", "..", "a/b"):
            calls = [("group_id", lambda: api.send_message("group", hostile, {"content": "x"})),
                     ("user_id", lambda: api.upload_media("c2c", hostile, {"url": "x"})),
                     ("channel_id", lambda: api.send_message("channel", hostile, {"content": "x"})),
                     ("guild_id", lambda: api.send_message("dms", hostile, {"content": "x"})),
                     ("message_id", lambda: api.recall("channel", "8000000001", hostile)),
                     ("guild_id", lambda: api.guild_channels(hostile)),
                     ("interaction_id", lambda: api.ack_interaction(hostile))]
            for field, call in calls:
                with pytest.raises(BadInputError) as err:
                    await call()
                assert err.value.field == field, (hostile, err.value)
        assert platform.api_calls == [] and platform.interaction_acks == []

    with_api(scenario)
