"""A real NoneBot2 bot (OneBot v11 adapter, reverse WS) in a QQ channel: the daemon shows
the channel as a group, NoneBot sees the @bot as addressed to it and answers ``ping`` with
``pong`` through its ordinary ``send_msg``, which the daemon sends to the channel
(``POST /channels/{channel_id}/messages``) as a passive reply to that message. A recall in
the channel reaches NoneBot as its ``group_recall`` notice. A quoted channel message
reaches NoneBot with its text, and a reply that quotes shows the quote on the platform.
Harness: :class:`tests.e2e.frameworks.NoneBotRun`; the daemon is ``gensokyo-idmap serve``."""

from __future__ import annotations

from pathlib import Path

import pytest

from gensokyo_idmap.identity import RawId
from gensokyo_idmap.testing import EmulatedPlatform, channel_message, message_delete, quoting
from gensokyo_idmap.testing.platform_emulator import CHANNEL, GUILD, GUILD_USER

from .frameworks import NoneBotRun

TOKEN = "nb-guild-token-4Kd"


@pytest.mark.slow
def test_nonebot_answers_in_a_channel(tmp_path: Path) -> None:
    nb = NoneBotRun(tmp_path, TOKEN)
    records, context = nb.records, nb.context
    message = channel_message(1, "ping")

    async def steps(platform: EmulatedPlatform) -> None:
        await platform.push("AT_MESSAGE_CREATE", message)
        await nb.after("the pong", "send_result", "send_error")
        assert not records.of("send_error"), context()
        await platform.push("PUBLIC_MESSAGE_DELETE", message_delete(message))
        await nb.after("the recall notice", "notice")

    nb.run(steps)
    [(path, body)] = nb.sends
    assert path == f"/channels/{CHANNEL}/messages", context()
    assert (body["content"], body["msg_id"]) == ("pong", message["id"]), body

    channel, author = nb.vuins(RawId(CHANNEL), RawId(GUILD_USER))
    [raw] = records.of("raw")
    [event] = records.of("event")
    assert (raw["guild_id"], raw["channel_id"]) == (GUILD, CHANNEL)  # the guild alongside
    assert (event["message_type"], event["group_id"], event["user_id"]) == (
        "group", channel, author)
    assert event["to_me"] is True and event["plain_text"].strip() == "ping", event
    [call] = [entry for entry in records.all() if "call_api" in entry]
    assert call["call_api"] == "send_msg" and call["params"]["group_id"] == channel
    assert isinstance(records.of("send_result")[0]["message_id"], int)
    [notice] = records.of("notice")
    assert (notice["notice_type"], notice["group_id"], notice["user_id"],
            notice["message_id"]) == ("group_recall", channel, author, event["message_id"])


@pytest.mark.slow
def test_nonebot_fetches_a_quoted_channel_message_and_quotes_back(tmp_path: Path) -> None:
    """A user says something, then quotes it (the platform's ``message_reference``): the
    daemon makes that a leading ``reply`` segment, NoneBot's adapter fetches the quoted
    message with ``get_msg`` (``event.reply``) and gets its text and author, not the empty
    message it got before channel messages kept their content. Then the user says
    ``quote me`` and the plugin answers with ``reply_message=True`` (a ``[CQ:reply]`` of
    that message): the daemon sends it as a passive reply (``msg_id``) that shows the
    quote (``message_reference``)."""
    nb = NoneBotRun(tmp_path, TOKEN)
    records, context = nb.records, nb.context
    said = channel_message(1, "the words")
    quote = quoting(channel_message(2, "what was that"), said)
    ask = channel_message(3, "quote me")

    async def steps(platform: EmulatedPlatform) -> None:
        await platform.push("AT_MESSAGE_CREATE", said)
        await nb.after("the first message", "event")  # stored before it is quoted
        await platform.push("AT_MESSAGE_CREATE", quote)
        await nb.after("the quoted message, fetched", "quoted")
        await platform.push("AT_MESSAGE_CREATE", ask)
        await nb.after("the quoting answer", "quote_result", "quote_error")

    nb.run(steps)
    assert not records.of("quote_error"), context()
    [(path, body)] = nb.sends
    assert path == f"/channels/{CHANNEL}/messages", context()
    assert body["content"] == "quoted" and body["msg_id"] == ask["id"], body
    assert body["message_reference"]["message_id"] == ask["id"], body

    [author] = nb.vuins(RawId(GUILD_USER))
    first, second, third = records.of("event")
    assert "the words" in first["plain_text"]
    # NoneBot took the reply segment out (event.reply) and fetched the message it names
    [quoted] = records.of("quoted")
    assert quoted["in"] == second["message_id"] and quoted["message_id"] == first["message_id"]
    assert quoted["message"] == first["original_message"], quoted  # its text, not []
    assert quoted["plain_text"].strip() == "the words", quoted
    assert (quoted["user_id"], quoted["message_type"]) == (author, "group")
    assert "what was that" in second["plain_text"] and "words" not in second["plain_text"]
    assert [entry["call_api"] for entry in records.all() if "call_api" in entry] == [
        "get_msg", "send_msg"]
    [call] = [entry for entry in records.all() if entry.get("call_api") == "send_msg"]
    assert call["params"]["message"][0] == {"type": "reply",
                                            "data": {"id": str(third["message_id"])}}
    assert isinstance(records.of("quote_result")[0]["message_id"], int)
