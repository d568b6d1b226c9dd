"""NoneBot plugin of the end-to-end test app: records every message event, answers ``ping``.

Each message event is appended to ``NB_RECORD_FILE`` as ``{"event": {...}}`` (the event as
NoneBot parsed it: ``user_id``, ``group_id``, ``message_id``, ``self_id``, ``message`` …).
A message whose plain text is exactly ``ping`` is answered with ``pong`` through
``bot.send`` (NoneBot's ``send_msg`` action); the outcome is recorded as
``{"send_result": ...}`` or ``{"send_error": "<exception>"}``. Each notice event is
appended as ``{"notice": {...}}`` (group_increase / group_decrease … as NoneBot parsed it).
"""

from __future__ import annotations

from typing import Any

from nonebot import on_message, on_notice
from nonebot.adapters.onebot.v11 import Bot, MessageEvent, NoticeEvent

from record_file import record

recorder = on_message(priority=1, block=False)
notices = on_notice(priority=1, block=False)


@notices.handle()
async def record_notice(event: NoticeEvent) -> None:
    record({"notice": event.model_dump(mode="json")})


def _segments(message: Any) -> list[dict[str, Any]]:
    return [{"type": seg.type, "data": dict(seg.data)} for seg in message]


@recorder.handle()
async def record_and_answer(bot: Bot, event: MessageEvent) -> None:
    dumped = event.model_dump(mode="json", exclude={"message", "original_message", "reply"})
    dumped["message"] = _segments(event.message)
    dumped["original_message"] = _segments(event.original_message)
    dumped["plain_text"] = event.get_plaintext()
    dumped["to_me"] = event.to_me
    dumped["bot_self_id"] = bot.self_id
    record({"event": dumped})
    if event.get_plaintext().strip() == "ping":
        try:
            result = await bot.send(event, "pong")
        except Exception as exc:  # noqa: BLE001 - recorded for the test to read
            record({"send_error": f"{type(exc).__name__}: {exc}"})
        else:
            record({"send_result": result})


# --- quotes (issue 33.4): what NoneBot fetched for a quote, and a reply that quotes -----------
# A message starting with a reply segment makes NoneBot's adapter fetch the quoted message
# (get_msg) into ``event.reply``: recorded as ``{"quoted": {...}}``. A message whose plain
# text is exactly ``quote me`` is answered with ``quoted`` and ``reply_message=True`` (a
# ``[CQ:reply]`` of it); the outcome is ``{"quote_result": ...}`` / ``{"quote_error": ...}``.

quotes = on_message(priority=1, block=False)


@quotes.handle()
async def record_quote_and_quote_back(bot: Bot, event: MessageEvent) -> None:
    if event.reply is not None:
        record({"quoted": {"message_id": event.reply.message_id,
                           "user_id": event.reply.sender.user_id,
                           "message_type": event.reply.message_type,
                           "message": _segments(event.reply.message),
                           "plain_text": event.reply.message.extract_plain_text(),
                           "in": event.message_id}})
    if event.get_plaintext().strip() == "quote me":
        try:
            result = await bot.send(event, "quoted", reply_message=True)
        except Exception as exc:  # noqa: BLE001 - recorded for the test to read
            record({"quote_error": f"{type(exc).__name__}: {exc}"})
        else:
            record({"quote_result": result})
