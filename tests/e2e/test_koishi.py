"""A real Koishi bot — ``koishi`` with ``koishi-plugin-adapter-onebot`` — fetching messages
with ``get_msg`` over the daemon's forward WebSocket.

Koishi's adapter turns a ``get_msg`` answer into a message with ``sender.user_id``
(``decodeUser``: it throws on ``sender: {}``), and when a message starts with a ``reply``
segment it fetches the quoted one the same way (an error there is only logged, and the
quote is lost). So the bot (``tests/e2e/koishi_app/bot.cjs``), on ``ping`` in a group and in
C2C, fetches that message (``bot.getMessage``), answers it with a quote of it plus
``pong``, then fetches its own answer: whose ``reply`` makes Koishi fetch the quoted
message in turn. Checked: no error on the way, no warning in Koishi's log, and each fetched
message is the one Koishi saw (content, author's vUIN, group), the answer's author is the
bot, and its quote is the ``ping``. Then the user quotes their ``ping`` (the platform's
``message_type`` 103): the daemon makes that a ``reply`` segment, for which Koishi's adapter
fetches the quoted message with ``get_msg``, and the session's quote is the ``ping``.

Harness: :class:`tests.e2e.frameworks.KoishiRun`. The npm packages (versions pinned in
``koishi_app/package.json`` and its ``package-lock.json``) are installed by ``npm ci`` into
``build/koishi-e2e/`` at the top of the checkout, once per lock file; the test is skipped,
saying so, only when node or npm is absent (``.ci/run`` installs them).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.testing import APP, EmulatedPlatform, c2c_message, group_message, quoting

from .frameworks import GROUP, USER, KoishiRun

TOKEN = "koishi-e2e-token-3Jv"


@pytest.mark.slow
def test_koishi_fetches_messages_and_quotes_with_get_msg_without_an_error(
        tmp_path: Path) -> None:
    koishi = KoishiRun(tmp_path, TOKEN)
    records, sends, context = koishi.records, koishi.sends, koishi.context

    async def steps(platform: EmulatedPlatform) -> None:
        await platform.push("GROUP_AT_MESSAGE_CREATE",
                            group_message(1, GROUP, USER) | {"content": " ping"})
        await koishi.after("Koishi's group round", "mine")
        await platform.push("C2C_MESSAGE_CREATE", c2c_message(2, USER, "ping"))
        await koishi.after("Koishi's C2C round", "mine", count=2)
        # the user quotes their ping, in the group and in C2C
        await platform.push("GROUP_AT_MESSAGE_CREATE", quoting(
            group_message(3, GROUP, USER) | {"content": " what was that"},
            group_message(1, GROUP, USER) | {"content": " ping"}))
        await platform.push("C2C_MESSAGE_CREATE", quoting(
            c2c_message(4, USER, "and this"), c2c_message(2, USER, "ping")))
        await koishi.after("Koishi's quotes", "event", count=4)

    koishi.run(steps)  # no error on the way, no warning in Koishi's log
    user, group = koishi.vuins(OpenId(APP, USER), OpenId(APP, GROUP))
    assert isinstance(user, int) and isinstance(group, int)
    group_event, private_event, group_quote, private_quote = records.of("event")
    (group_quoted, private_quoted), (group_mine, private_mine) = (
        records.of("quoted"), records.of("mine"))

    # the fetched message is the one Koishi was given: content, author, chat
    assert group_event["channelId"] == group_event["guildId"] == str(group), context()
    assert group_quoted["id"] == group_event["id"]
    assert group_quoted["content"] == group_event["content"]
    assert "ping" in group_quoted["content"]
    assert group_quoted["user"] == group_event["userId"] == str(user)
    assert (group_quoted["guild"], group_quoted["channel"]) == (str(group), str(group))
    assert isinstance(group_quoted["timestamp"], int) and group_quoted["timestamp"] > 0
    assert private_quoted["content"] == private_event["content"] == "ping"
    assert private_quoted["user"] == private_event["userId"] == str(user)
    assert private_quoted["channel"] == f"private:{user}"

    # the bot's own answer: its author is the bot, its quote fetched by Koishi itself
    for mine, quoted in ((group_mine, group_quoted), (private_mine, private_quoted)):
        assert mine["user"] == APP, mine
        assert mine["content"] == "pong", mine
        assert mine["quote"] is not None and mine["quote"]["id"] == quoted["id"], mine
        assert mine["quote"]["content"] == quoted["content"], mine
    assert [(path, body["content"], body["msg_id"]) for path, body in sends] == [
        (f"/v2/groups/{GROUP}/messages", "pong", "ROBOT1.0_gw1"),
        (f"/v2/users/{USER}/messages", "pong", "ROBOT1.0_c2c2")]

    # the user's quotes: Koishi fetched each quoted message (get_msg) for the reply segment
    assert group_event["quote"] is None and private_event["quote"] is None
    for quote, event, quoted, said in ((group_quote, group_event, group_quoted, "what was that"),
                                       (private_quote, private_event, private_quoted,
                                        "and this")):
        assert quote["content"].endswith(said), quote
        assert "ping" not in quote["content"], quote  # the quoted text is the quote's own
        assert quote["quote"] is not None, context()
        assert quote["quote"]["id"] == event["id"], quote
        assert quote["quote"]["content"] == quoted["content"], quote
        assert quote["quote"]["user"] == str(user), quote
