"""A real NoneBot2 bot (OneBot v11 adapter, reverse WS) against the daemon and the emulated
platform, doing what issue 33 found failing or surprising (items 7, 8, 10):

- ``set_group_card`` (NoneBot's ``bot.set_group_card``) is known but impossible: NoneBot's
  ``ActionFailed`` carries retcode 103 and the reason the platform lacks it; an action
  nobody has heard of is still 1404;
- a recall of a message recalled already: the emulated platform answers 404, NoneBot's
  ``ActionFailed`` carries retcode 103 with the platform's code and message;
- a reply quoting one of the bot's own messages, and ``send(…, reply_message=True)`` on a
  message past ``idmap.msgid_ttl_seconds`` (3 s here): both are sent, without the quote, as
  passive replies to the newest message of the group, and the daemon's log warns naming
  the id and why.

Harness: the NoneBot app (``nonebot_app/bot.py``, its plugin ``nb_replies``) run by
:class:`tests.e2e.frameworks.NoneBotRun`; the daemon is ``gensokyo-idmap serve``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from gensokyo_idmap.bridge.cannot import refusal
from gensokyo_idmap.testing import EmulatedPlatform, group_message
from gensokyo_idmap.testing.platform_emulator import RECALL_NOT_FOUND

from .frameworks import GROUP, USER, NoneBotRun

TOKEN = "nb-replies-token-8Ws"
TTL = 3  # idmap.msgid_ttl_seconds: the "late ping" is let expire


@pytest.mark.slow
def test_nonebot_gets_one_answer_for_the_impossible_and_replies_to_gone_messages_are_sent(
        tmp_path: Path) -> None:
    nb = NoneBotRun(tmp_path, TOKEN)
    records, context, sends = nb.records, nb.context, nb.sends
    pushed: dict[str, str] = {}  # command → the platform id of its message

    async def steps(platform: EmulatedPlatform) -> None:
        async def command(n: int, text: str, *done: str) -> None:
            """Push ``text`` as message ``n`` of the group; wait for any of ``done``."""
            d = group_message(n, GROUP, USER) | {"content": f" {text}"}
            pushed[text] = d["id"]
            await platform.push("GROUP_AT_MESSAGE_CREATE", d)
            await nb.after(f"{text!r} done ({done})", *done)

        await command(1, "card", "unknown_failed")
        await command(2, "recall twice", "recall_again_failed", "recall_error")
        await command(3, "own reply", "own_result", "own_error")
        await command(4, "late ping", "late_waiting")
        await asyncio.sleep(TTL + 1)  # the late ping's message id expires meanwhile
        await command(5, "now", "late_result", "late_error")

    nb.run(steps, log={"format": "json"}, idmap={"msgid_ttl_seconds": TTL})
    for failed in ("recall_error", "own_error", "late_error"):
        assert records.of(failed) == [], f"{failed}\n{context()}"

    # item 7: known but impossible is 103 with its reason; unknown is 1404
    [card] = records.of("card_failed")
    assert (card["status"], card["retcode"]) == ("failed", 103), card
    assert card["message"] == refusal("set_group_card") == card["wording"]
    assert "the QQ bot platform gives a bot no way to set a member's group card" \
        in card["message"]
    [unknown] = records.of("unknown_failed")
    assert (unknown["retcode"], unknown["message"]) == (1404, "unsupported action: get_weather")

    # item 10: the second recall is the platform's 404, answered 103 with its code and message
    [again] = records.of("recall_again_failed")
    assert (again["status"], again["retcode"]) == ("failed", 103), again
    assert again["message"] == (f"delete_msg: platform code {RECALL_NOT_FOUND}: "
                                "message not found")

    # item 8: both replies were sent, each answering the newest message with replies left
    [own] = records.of("own_result")
    [late] = records.of("late_result")
    assert isinstance(own["second"]["message_id"], int)
    assert isinstance(late["message_id"], int)
    by_content = {body["content"]: body for _, body in sends}
    assert by_content["second"]["msg_id"] == pushed["own reply"], sends
    assert by_content["late pong"]["msg_id"] == pushed["now"], sends  # not the expired one
    assert "message_reference" not in by_content["late pong"]
    [(late_call)] = [entry["params"] for entry in records.all()
                     if entry.get("call_api") == "send_msg"
                     and "late pong" in json.dumps(entry["params"])]
    [late_id] = records.of("late_waiting")
    assert late_call["message"][0] == {"type": "reply", "data": {"id": str(late_id)}}, \
        late_call  # what NoneBot's reply_message=True sent
    warned = {(entry["reply_to"], entry["reason"])
              for entry in nb.logged("message", "reply sent without its quote")
              if entry["level"] == "warning"}
    assert warned == {(own["first"]["message_id"], "the bot's own message"),
                      (late_id, "unknown or expired")}, context()
