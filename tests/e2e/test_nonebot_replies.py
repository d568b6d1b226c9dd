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

Harness: the NoneBot app (``nonebot_app/bot.py``, its plugin ``nb_replies``) and helpers of
:mod:`tests.e2e.test_nonebot`; the daemon is ``gensokyo-idmap serve``."""

from __future__ import annotations

import asyncio
import json
import re
import signal
from pathlib import Path
from typing import Any

import pytest

from gensokyo_idmap.bridge.cannot import refusal
from gensokyo_idmap.testing import (
    APP,
    DaemonProcess,
    EmulatedPlatform,
    daemon_config,
    free_port,
    group_message,
    until,
    until_listening,
    write_config,
)
from gensokyo_idmap.testing.platform_emulator import RECALL_NOT_FOUND

from .jsonl_records import Records, run_context
from .test_nonebot import GROUP, USER, WAIT, nonebot_missing, start_nonebot

TOKEN = "nb-replies-token-8Ws"
TTL = 3  # idmap.msgid_ttl_seconds: the "late ping" is let expire


def lines_of(log: Path, component: str, event: str) -> list[dict[str, Any]]:
    """The daemon's JSON log lines of ``[component] event``."""
    found = []
    for line in log.read_text("utf-8", "replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and (entry.get("component"), entry.get("event")) == (
                component, event):
            found.append(entry)
    return found


@pytest.mark.slow
def test_nonebot_gets_one_answer_for_the_impossible_and_replies_to_gone_messages_are_sent(
        tmp_path: Path) -> None:
    missing = nonebot_missing()
    if missing is not None:
        pytest.skip(f"NoneBot2 / nonebot-adapter-onebot not importable: {missing}")
    data_dir = tmp_path / "data"
    records = Records(tmp_path / "nonebot-records.jsonl")
    nb_port = free_port()
    nb_lines: list[str] = []
    sends: list[tuple[str, Any]] = []
    pushed: dict[str, str] = {}  # command → the platform id of its message

    def context() -> str:
        return run_context("NoneBot", nb_lines, tmp_path, records)

    async def main() -> DaemonProcess:
        platform = EmulatedPlatform()
        await platform.start()
        daemon = DaemonProcess(write_config(tmp_path / "config.yml", daemon_config(
            data_dir, platform=platform, log={"format": "json"},
            idmap={"msgid_ttl_seconds": TTL},
            onebot={"reverse_ws": [f"ws://127.0.0.1:{nb_port}/onebot/v11/ws"],
                    "access_token": TOKEN, "reconnect_interval_seconds": 0.2})), tmp_path)
        nonebot, pumping = await start_nonebot(nb_port, TOKEN, records, tmp_path, nb_lines)

        async def command(n: int, text: str, *done: str) -> None:
            """Push ``text`` as message ``n`` of the group; wait for any of ``done``."""
            d = group_message(n, GROUP, USER) | {"content": f" {text}"}
            pushed[text] = d["id"]
            await platform.push("GROUP_AT_MESSAGE_CREATE", d)
            await until(lambda: any(records.of(key) for key in done), WAIT,
                        lambda: f"{text!r} done ({done})\n{context()}")

        try:
            await until_listening(nb_port, WAIT)
            await daemon.start()
            await until(lambda: any(re.search(rf"Bot {APP}\b.* connected", line)
                                    for line in nb_lines), WAIT,
                        lambda: f"NoneBot connection\n{context()}")
            # a message pushed before the gateway session is established is only replayed
            await until(lambda: bool(platform.identifies), WAIT,
                        lambda: f"gateway Identify\n{context()}")
            await command(1, "card", "unknown_failed")
            await command(2, "recall twice", "recall_again_failed", "recall_error")
            await command(3, "own reply", "own_result", "own_error")
            await command(4, "late ping", "late_waiting")
            await asyncio.sleep(TTL + 1)  # the late ping's message id expires meanwhile
            await command(5, "now", "late_result", "late_error")
            assert await daemon.stop(signal.SIGTERM, WAIT) == 0, context()
            sends.extend(platform.api_requests("POST", "/messages"))
        finally:
            await daemon.kill()
            if nonebot.returncode is None:
                nonebot.kill()
                await asyncio.wait_for(nonebot.wait(), WAIT)
            await asyncio.wait_for(pumping, WAIT)
            await platform.close()
        return daemon

    daemon = asyncio.run(asyncio.wait_for(main(), 120))
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
              for entry in lines_of(daemon.log, "message", "reply sent without its quote")
              if entry["level"] == "warning"}
    assert warned == {(own["first"]["message_id"], "the bot's own message"),
                      (late_id, "unknown or expired")}, context()
