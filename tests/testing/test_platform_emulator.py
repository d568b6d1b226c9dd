"""The emulated platform keeps the platform's recall rules (issue 33 item 10): a message the
bot sent is recalled once; a second ``DELETE`` of it, or one of a message the bot never
sent in that chat, is HTTP 404 with the not-found code. Driven with our own OpenAPI client,
as the daemon drives it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import ClientSession

from gensokyo_idmap.errors import PlatformError
from gensokyo_idmap.qq.openapi import OpenApiClient
from gensokyo_idmap.testing.platform_emulator import (
    CHANNEL,
    RECALL_NOT_FOUND,
    EmulatedPlatform,
)

GROUP = "A1B2C3D4E5F60718293A4B5C6D7E8F90"
USER = "0F1E2D3C4B5A69788796A5B4C3D2E1F0"
DM_GUILD = "7000000099"


def with_api(scenario: Callable[[EmulatedPlatform, OpenApiClient], Awaitable[None]]) -> None:
    async def main() -> None:
        async with EmulatedPlatform() as platform, ClientSession() as session:
            await asyncio.wait_for(scenario(platform, platform.openapi(session)), 15)

    asyncio.run(main())


async def not_found(call: Awaitable[None]) -> PlatformError:
    with pytest.raises(PlatformError) as err:
        await call
    return err.value


@pytest.mark.parametrize(("chat_kind", "target", "body"), [
    ("group", GROUP, {"msg_type": 0, "content": "x", "event_id": "E1"}),
    ("c2c", USER, {"msg_type": 0, "content": "x", "event_id": "E1"}),
    ("channel", CHANNEL, {"content": "x"}),
    ("dms", DM_GUILD, {"content": "x"}),
])
def test_a_message_is_recalled_once_then_not_found(chat_kind: str, target: str,
                                                   body: dict[str, object]) -> None:
    async def scenario(platform: EmulatedPlatform, api: OpenApiClient) -> None:
        sent = (await api.send_message(chat_kind, target, body))["id"]
        await api.recall(chat_kind, target, sent)
        assert platform.recalled == [sent]
        again = await not_found(api.recall(chat_kind, target, sent))
        assert (again.status, again.platform_code, again.platform_message) == (
            404, RECALL_NOT_FOUND, "message not found")
        assert not again.retryable  # the daemon does not try it again
        never = await not_found(api.recall(chat_kind, target, "NEVERSENT1"))
        assert (never.status, never.platform_code) == (404, RECALL_NOT_FOUND)
        # an id the bot did send, but in another chat, is not found in this one either
        other = (await api.send_message(chat_kind, target, {**body, "event_id": "E2"}))["id"]
        elsewhere = "1" * len(target) if chat_kind in ("channel", "dms") else "F" * 32
        wrong = await not_found(api.recall(chat_kind, elsewhere, other))
        assert wrong.status == 404 and platform.recalled == [sent]
        # a recalled message's id is never given again
        assert other != sent

    with_api(scenario)
