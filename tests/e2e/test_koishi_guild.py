"""A real Koishi bot (``koishi-plugin-adapter-onebot``, forward WS) in a QQ channel and a
guild DM: quotes both ways, and a DM that Koishi takes for what it is, a private message.

The bot (``tests/e2e/koishi_app/bot.cjs``) does on ``ping`` what it does in groups: fetch
the message (``get_msg``), answer it with a quote of it plus ``pong`` and fetch its own
answer, whose ``reply`` makes Koishi fetch the quoted ``ping`` in turn. In a channel, each
fetched message now comes with its content (before, a channel message answered ``get_msg``
empty), and the answer reaches the platform quoting the ``ping``: ``message_reference``
beside ``msg_id`` on ``/channels/{id}/messages``. Then the user quotes their ``ping`` (the
platform's ``message_reference``): Koishi's session quotes it, with its text. A guild DM
``ping`` reaches Koishi as a direct message (``private:<vUIN>``, no guild: it had one when
the event carried the DM session's ``guild_id``, and Koishi's answer then went to
``send_group_msg`` of ``private:…``), and the answer goes to the DM session quoting it.
Harness: :class:`tests.e2e.frameworks.KoishiRun`."""

from __future__ import annotations

from pathlib import Path

import pytest

from gensokyo_idmap.identity import RawId
from gensokyo_idmap.testing import (
    APP,
    EmulatedPlatform,
    channel_message,
    direct_message,
    quoting,
)
from gensokyo_idmap.testing.platform_emulator import CHANNEL, GUILD_USER

from .frameworks import KoishiRun

TOKEN = "koishi-guild-token-6Tc"
DM_GUILD = "7000000099"


@pytest.mark.slow
def test_koishi_quotes_in_a_channel_and_takes_a_guild_dm_as_private(tmp_path: Path) -> None:
    koishi = KoishiRun(tmp_path, TOKEN)
    records, context = koishi.records, koishi.context
    ping, dm_ping = channel_message(1, "ping"), direct_message(3, "ping")

    async def steps(platform: EmulatedPlatform) -> None:
        await platform.push("AT_MESSAGE_CREATE", ping)
        await koishi.after("Koishi's channel round", "mine")
        # the user quotes their ping in the channel
        await platform.push("AT_MESSAGE_CREATE",
                            quoting(channel_message(2, "what was that"), ping))
        await koishi.after("Koishi's quote", "event", count=2)
        await platform.push("DIRECT_MESSAGE_CREATE", dm_ping)
        await koishi.after("Koishi's DM round", "mine", count=2)

    # channels and DMs asked for as documented; no error, no warning in Koishi's log
    koishi.run(steps, qq={"intents": 1107300354})
    channel, author = koishi.vuins(RawId(CHANNEL), RawId(GUILD_USER))
    channel_event, quote_event, dm_event = records.of("event")
    (channel_quoted, dm_quoted), (channel_mine, dm_mine) = records.of("quoted"), records.of("mine")

    # the channel, as a group: each message Koishi fetched has its text and author
    assert channel_event["channelId"] == channel_event["guildId"] == str(channel), context()
    assert channel_quoted["id"] == channel_event["id"]
    assert channel_quoted["content"] == channel_event["content"]
    assert channel_quoted["content"].endswith("ping"), channel_quoted
    assert channel_quoted["user"] == channel_event["userId"] == str(author)
    # its answer quotes the ping, which Koishi fetched (get_msg) with its text
    assert (channel_mine["user"], channel_mine["content"]) == (APP, "pong"), channel_mine
    assert channel_mine["quote"] is not None, channel_mine
    assert channel_mine["quote"]["id"] == channel_event["id"], channel_mine
    assert channel_mine["quote"]["content"] == channel_event["content"], channel_mine
    # the user's quote: Koishi fetched the quoted message for the session's quote
    assert quote_event["content"].endswith("what was that"), quote_event
    assert quote_event["quote"] is not None, context()
    assert quote_event["quote"]["id"] == channel_event["id"], quote_event
    assert quote_event["quote"]["content"] == channel_event["content"], quote_event

    # the guild DM: private, no guild; answered in the DM session
    assert (dm_event["channelId"], dm_event["guildId"]) == (f"private:{author}", None), dm_event
    assert dm_event["userId"] == str(author) and dm_event["content"] == "ping"
    assert (dm_quoted["content"], dm_quoted["channel"]) == ("ping", f"private:{author}")
    assert dm_mine["quote"] is not None and dm_mine["quote"]["content"] == "ping", dm_mine

    # what reached the platform: passive replies that show the quote
    assert [(path, body["content"], body["msg_id"], body["message_reference"]["message_id"])
            for path, body in koishi.sends] == [
        (f"/channels/{CHANNEL}/messages", "pong", ping["id"], ping["id"]),
        (f"/dms/{DM_GUILD}/messages", "pong", dm_ping["id"], dm_ping["id"])], koishi.sends
