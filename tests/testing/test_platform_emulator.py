"""The emulated platform keeps the platform's rules, driven with our own OpenAPI client as the
daemon drives it. Recalls (issue 33 item 10): a message the bot sent is recalled once; a
second ``DELETE`` of it, or one of a message the bot never sent in that chat, is HTTP 404
with the not-found code. Quotes in channels and guild DMs (issue 33 item 4): a message
quoting another names it by its id (``message_reference``), and a send quoting a message of
its chat gets it back in the answered message object; a quote of a message the platform
cannot find stops the send unless ``ignore_get_message_error`` says otherwise."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import ClientSession

from gensokyo_idmap.errors import PlatformError
from gensokyo_idmap.qq.openapi import OpenApiClient
from gensokyo_idmap.testing import channel_message, direct_message, quoting
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


def test_a_guild_message_quotes_another_by_its_id() -> None:
    quoted = channel_message(1, "the words")
    quote = quoting(channel_message(2, "about that"), quoted)
    assert quote["message_reference"] == {"message_id": quoted["id"]}
    assert quote["content"].endswith("about that") and "msg_elements" not in quote
    dm = quoting(direct_message(4, "and this"), direct_message(3))
    assert dm["message_reference"] == {"message_id": direct_message(3)["id"]}


def quoting_id(message_id: object, **more: Any) -> dict[str, Any]:
    """A channel or DM send's body quoting ``message_id``."""
    return {"content": "pong", "message_reference": {"message_id": message_id, **more}}


def test_a_send_quoting_a_message_of_its_chat_gets_the_quote_back() -> None:
    async def scenario(platform: EmulatedPlatform, api: OpenApiClient) -> None:
        await platform.push("AT_MESSAGE_CREATE", channel_message(1))
        await platform.push("DIRECT_MESSAGE_CREATE", direct_message(2))
        sent = await api.send_message("channel", CHANNEL, quoting_id(channel_message(1)["id"]))
        assert sent["message_reference"] == {"message_id": channel_message(1)["id"]}, sent
        # the bot's own message of that chat can be quoted too, until it is recalled
        mine = await api.send_message("channel", CHANNEL, quoting_id(sent["id"]))
        assert mine["message_reference"] == {"message_id": sent["id"]}, mine
        private = await api.send_message("dms", DM_GUILD, quoting_id(direct_message(2)["id"]))
        assert private["message_reference"]["message_id"] == direct_message(2)["id"]
        await api.recall("channel", CHANNEL, mine["id"])
        # a message of another chat, a recalled one, none: not sent
        for body in (quoting_id(direct_message(2)["id"]), quoting_id(mine["id"]),
                     quoting_id("08f1nothing"), quoting_id(""), quoting_id(7),
                     {"content": "x", "message_reference": "08f1"}):
            with pytest.raises(PlatformError) as refused:
                await api.send_message("channel", CHANNEL, body)
            assert (refused.value.status, refused.value.platform_code) == (400, 40011000), body
        # unless the quote may be left out
        plain = await api.send_message("channel", CHANNEL, quoting_id(
            "08f1nothing", ignore_get_message_error=True))
        assert "message_reference" not in plain, plain
        assert len(platform.sent_messages) == 3  # those not recalled

    with_api(scenario)
