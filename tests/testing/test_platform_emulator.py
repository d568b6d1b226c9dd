"""The emulated platform carries ``message_reference`` both ways, as the platform does: a
channel or guild DM message quoting another names it by its id, and a send quoting a
message of its chat gets it back in the answered message object; a quote of a message the
platform cannot find stops the send unless ``ignore_get_message_error`` says otherwise."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import ClientSession

from gensokyo_idmap.testing import (
    EmulatedPlatform,
    channel_message,
    direct_message,
    quoting,
)
from gensokyo_idmap.testing.platform_emulator import CHANNEL

DM_GUILD = "7000000099"


def test_a_guild_message_quotes_another_by_its_id() -> None:
    quoted = channel_message(1, "the words")
    quote = quoting(channel_message(2, "about that"), quoted)
    assert quote["message_reference"] == {"message_id": quoted["id"]}
    assert quote["content"].endswith("about that") and "msg_elements" not in quote
    dm = quoting(direct_message(4, "and this"), direct_message(3))
    assert dm["message_reference"] == {"message_id": direct_message(3)["id"]}


async def _send(session: ClientSession, platform: EmulatedPlatform, path: str,
                body: dict[str, Any]) -> tuple[int, Any]:
    """POST ``body`` to ``path`` as the bot does, with the platform's newest token."""
    if not platform.tokens_issued:
        await platform.token_manager(session).get()
    async with session.post(platform.url(path), json=body,
                            headers={"Authorization": platform.current_token()}) as answer:
        return answer.status, await answer.json()


def test_a_send_quoting_a_message_of_its_chat_gets_the_quote_back() -> None:
    async def main() -> None:
        async with EmulatedPlatform() as platform, ClientSession() as session:
            await platform.push("AT_MESSAGE_CREATE", channel_message(1))
            await platform.push("DIRECT_MESSAGE_CREATE", direct_message(2))
            channel, dms = f"/channels/{CHANNEL}/messages", f"/dms/{DM_GUILD}/messages"

            def quoting_id(message_id: object, **more: Any) -> dict[str, Any]:
                return {"content": "pong", "message_reference": {"message_id": message_id,
                                                                 **more}}

            status, sent = await _send(session, platform, channel,
                                       quoting_id(channel_message(1)["id"]))
            assert status == 200 and sent["message_reference"] == {
                "message_id": channel_message(1)["id"]}, sent
            # the bot's own message of that chat can be quoted too
            status, mine = await _send(session, platform, channel, quoting_id(sent["id"]))
            assert mine["message_reference"] == {"message_id": sent["id"]}, mine
            status, private = await _send(session, platform, dms,
                                          quoting_id(direct_message(2)["id"]))
            assert private["message_reference"]["message_id"] == direct_message(2)["id"]
            # a message of another chat, or none: not sent
            for body in (quoting_id(direct_message(2)["id"]), quoting_id("08f1nothing"),
                         quoting_id(""), quoting_id(7), {"content": "x",
                                                         "message_reference": "08f1"}):
                status, refused = await _send(session, platform, channel, body)
                assert (status, refused["code"]) == (400, 40011000), (body, refused)
            # unless the quote may be left out
            status, plain = await _send(session, platform, channel, quoting_id(
                "08f1nothing", ignore_get_message_error=True))
            assert status == 200 and "message_reference" not in plain, plain
            assert len(platform.sent_messages) == 4

    asyncio.run(asyncio.wait_for(main(), 10))
