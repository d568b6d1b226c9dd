"""A real Koishi bot (``koishi-plugin-adapter-onebot``, forward WS) doing what issue 33
found failing or surprising (items 7, 8, 10), through its own calls:

- ``bot.internal.setGroupCard`` is known but impossible: Koishi's error carries retcode 103
  (an unknown action would be 1404);
- a reply quoting message 99999, an id the daemon never held, is sent without the quote as
  a passive reply to the message that asked for it, and the daemon warns naming the id;
- ``bot.deleteMessage`` twice: the emulated platform answers the second with 404, Koishi's
  error carries retcode 103.

Harness: :class:`tests.e2e.frameworks.KoishiRun`."""

from __future__ import annotations

from pathlib import Path

import pytest

from gensokyo_idmap.testing import EmulatedPlatform, group_message

from .frameworks import GROUP, USER, KoishiRun

TOKEN = "koishi-replies-token-5Pq"


@pytest.mark.slow
def test_koishi_gets_103_for_the_impossible_and_a_quote_of_a_gone_message_is_sent(
        tmp_path: Path) -> None:
    koishi = KoishiRun(tmp_path, TOKEN)
    records, context, sends = koishi.records, koishi.context, koishi.sends
    pushed: dict[str, str] = {}

    async def steps(platform: EmulatedPlatform) -> None:
        async def command(n: int, text: str, done: str) -> None:
            d = group_message(n, GROUP, USER) | {"content": f" {text}"}
            pushed[text] = d["id"]
            await platform.push("GROUP_AT_MESSAGE_CREATE", d)
            await koishi.after(f"{text!r} done", done)

        await command(1, "card", "card")
        await command(2, "quote gone", "gone")
        await command(3, "recall twice", "recall_again")

    koishi.run(steps, log={"format": "json"})  # no error on the way
    [card] = records.of("card")
    assert card is not None and card["code"] == 103, card  # not 1404: known, impossible
    assert "set_group_card" in card["message"], card
    [gone] = records.of("gone")
    assert len(gone) == 1, gone  # sent: one message id back
    body = next(body for _, body in sends if body["content"] == "still here")
    assert body["msg_id"] == pushed["quote gone"], sends  # the usual rule's choice
    warned = [(entry["reply_to"], entry["reason"]) for entry in
              koishi.logged("message", "reply sent without its quote")]
    assert warned == [(99999, "unknown or expired")], context()
    [again] = records.of("recall_again")
    assert again is not None and again["code"] == 103, again
    assert [path for path, _ in sends].count(f"/v2/groups/{GROUP}/messages") == 2
