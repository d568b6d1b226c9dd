"""NoneBot plugin of the end-to-end test app: what a bot hits when the platform cannot do
something, or a reply names a message gone (issue 33 items 7, 8, 10).

Each command is a message whose plain text is exactly the command; each outcome is
appended to ``NB_RECORD_FILE`` (an ``ActionFailed`` as its response, ``exc.info``):

- ``card``: ``bot.set_group_card`` of the author → ``{"card_failed": …}``, then an action
  nobody has heard of (``get_weather``) → ``{"unknown_failed": …}``;
- ``recall twice``: sends ``to recall``, recalls it (``delete_msg``), recalls it again →
  ``{"recall_again_failed": …}`` (``{"recall_error": …}`` if an earlier step failed);
- ``own reply``: sends ``first``, then ``second`` quoting ``first`` (the bot's own message)
  → ``{"own_result": …}`` / ``{"own_error": …}``;
- ``late ping``: records ``{"late_waiting": <message_id>}``, waits until a ``now`` message
  has arrived (the test lets the message id expire meanwhile), then answers with
  ``bot.send(event, "late pong", reply_message=True)`` → ``{"late_result": …}`` /
  ``{"late_error": …}``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from nonebot import on_message
from nonebot.adapters.onebot.v11 import ActionFailed, Bot, GroupMessageEvent, MessageSegment

from record_file import record

commands = on_message(priority=2, block=False)
_now = asyncio.Event()


def _failure(exc: Exception) -> dict[str, Any]:
    return exc.info if isinstance(exc, ActionFailed) else {"error": f"{type(exc).__name__}: {exc}"}


@commands.handle()
async def run_command(bot: Bot, event: GroupMessageEvent) -> None:
    text = event.get_plaintext().strip()
    if text == "now":
        _now.set()
    elif text == "card":
        for key, call in (("card_failed", bot.set_group_card(
                              group_id=event.group_id, user_id=event.user_id, card="x")),
                          ("unknown_failed", bot.call_api("get_weather"))):
            try:
                await call
            except Exception as exc:  # noqa: BLE001 - recorded for the test to read
                record({key: _failure(exc)})
            else:
                record({key: None})
    elif text == "recall twice":
        try:
            sent = await bot.send(event, "to recall")
            await bot.delete_msg(message_id=sent["message_id"])
        except Exception as exc:  # noqa: BLE001
            record({"recall_error": _failure(exc)})
            return
        try:
            await bot.delete_msg(message_id=sent["message_id"])
        except Exception as exc:  # noqa: BLE001
            record({"recall_again_failed": _failure(exc)})
        else:
            record({"recall_again_failed": None})
    elif text == "own reply":
        try:
            first = await bot.send(event, "first")
            result = await bot.send(event, MessageSegment.reply(first["message_id"]) + "second")
        except Exception as exc:  # noqa: BLE001
            record({"own_error": _failure(exc)})
        else:
            record({"own_result": {"first": first, "second": result}})
    elif text == "late ping":
        record({"late_waiting": event.message_id})
        await asyncio.wait_for(_now.wait(), 60)
        try:
            result = await bot.send(event, "late pong", reply_message=True)
        except Exception as exc:  # noqa: BLE001
            record({"late_error": _failure(exc)})
        else:
            record({"late_result": result})
