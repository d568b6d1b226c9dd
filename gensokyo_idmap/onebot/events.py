"""OneBot v11 event objects, built from plain values (pure, no I/O).

Every event has ``time``, ``self_id`` and ``post_type``, then ``<post_type>_type`` and
``sub_type`` (reference onebot-v11.md §2): clients route on that chain, and NoneBot drops
an event to a generic model when a field its model needs is missing, so every builder
emits the full field set with the spec's types (ids int64, ``message_id`` int32).
``message`` is an array or a CQ string as the connection's ``message_format`` says;
``raw_message`` is always the CQ string.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.onebot.message import Segment, segments_to_cq, segments_to_json
from gensokyo_idmap.onebot.status import BotStatus

__all__ = [
    "MessageFormat",
    "friend_add",
    "friend_recall",
    "group_decrease",
    "group_increase",
    "group_message",
    "group_recall",
    "heartbeat",
    "lifecycle",
    "private_message",
]

MessageFormat = Literal["array", "string"]
_INT32_MAX: Final = 2**31 - 1
_INT64_MAX: Final = 2**63 - 1


def _id(field: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _INT64_MAX:
        raise BadInputError(field, value, "must be a positive int64")
    return value


def _message_id(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _INT32_MAX:
        raise BadInputError("message_id", value, "must be a positive int32")
    return value


def _base(self_id: int, time: int, post_type: str) -> dict[str, Any]:
    return {"time": int(time), "self_id": _id("self_id", self_id), "post_type": post_type}


def _message_event(self_id: int, time: int, message_type: str, sub_type: str, message_id: int,
                   ids: dict[str, Any], segments: Sequence[Segment], fmt: MessageFormat,
                   sender: dict[str, Any], extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """The fields every message event has, ``ids`` (chat and sender) in between.

    One dict literal: this runs for every message, and merging partial dicts (``_base(…) |
    {…}``) cost twice as much."""
    raw = segments_to_cq(segments)
    event = {
        "time": int(time), "self_id": _id("self_id", self_id), "post_type": "message",
        "message_type": message_type,
        "sub_type": sub_type,
        "message_id": _message_id(message_id),
        **ids,
        "message": segments_to_json(segments) if fmt == "array" else raw,
        "raw_message": raw, "font": 0,
        "sender": sender,
    }
    if extra:
        event.update(extra)
    return event


def group_message(
    *,
    self_id: int,
    time: int,
    message_id: int,
    group_id: int,
    user_id: int,
    segments: Sequence[Segment],
    fmt: MessageFormat = "array",
    nickname: str = "",
    role: Literal["owner", "admin", "member"] = "member",
    extra: Mapping[str, Any] | None = None,
    card: str = "",
) -> dict[str, Any]:
    """A group message (``sub_type`` normal); ``extra`` adds extension fields."""
    return _message_event(
        self_id, time, "group", "normal", message_id,
        {"group_id": _id("group_id", group_id), "user_id": _id("user_id", user_id),
         "anonymous": None},
        segments, fmt,
        {"user_id": user_id, "nickname": nickname, "card": card, "sex": "unknown", "age": 0,
         "area": "", "level": "", "role": role, "title": ""},
        extra)


def private_message(
    *,
    self_id: int,
    time: int,
    message_id: int,
    user_id: int,
    segments: Sequence[Segment],
    fmt: MessageFormat = "array",
    nickname: str = "",
    sub_type: Literal["friend", "group", "other"] = "friend",
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    return _message_event(
        self_id, time, "private", sub_type, message_id, {"user_id": _id("user_id", user_id)},
        segments, fmt, {"user_id": user_id, "nickname": nickname, "sex": "unknown", "age": 0},
        extra)


def group_increase(
    *, self_id: int, time: int, group_id: int, user_id: int, operator_id: int,
    sub_type: Literal["approve", "invite"] = "approve",
) -> dict[str, Any]:
    return _base(self_id, time, "notice") | {
        "notice_type": "group_increase", "sub_type": sub_type,
        "group_id": _id("group_id", group_id), "user_id": _id("user_id", user_id),
        "operator_id": _id("operator_id", operator_id),
    }


def group_decrease(
    *, self_id: int, time: int, group_id: int, user_id: int, operator_id: int,
    sub_type: Literal["leave", "kick", "kick_me"] = "leave",
) -> dict[str, Any]:
    return _base(self_id, time, "notice") | {
        "notice_type": "group_decrease", "sub_type": sub_type,
        "group_id": _id("group_id", group_id), "user_id": _id("user_id", user_id),
        "operator_id": _id("operator_id", operator_id),
    }


def friend_add(*, self_id: int, time: int, user_id: int) -> dict[str, Any]:
    return _base(self_id, time, "notice") | {
        "notice_type": "friend_add", "user_id": _id("user_id", user_id)}


def lifecycle(
    *, self_id: int, time: int, sub_type: Literal["enable", "disable", "connect"]
) -> dict[str, Any]:
    return _base(self_id, time, "meta_event") | {
        "meta_event_type": "lifecycle", "sub_type": sub_type}


def heartbeat(*, self_id: int, time: int, interval_ms: int, status: BotStatus
              ) -> dict[str, Any]:
    """``interval`` is milliseconds to the next heartbeat; ``status`` is the bot's as
    ``get_status`` says it now (NoneBot needs its bools: a daemon always knows them)."""
    return _base(self_id, time, "meta_event") | {
        "meta_event_type": "heartbeat",
        "status": status.data(),
        "interval": int(interval_ms),
    }


def group_recall(*, self_id: int, time: int, group_id: int, user_id: int, operator_id: int,
                 message_id: int) -> dict[str, Any]:
    """A group message was recalled (``operator_id``: who did it)."""
    return _base(self_id, time, "notice") | {
        "notice_type": "group_recall", "group_id": _id("group_id", group_id),
        "user_id": _id("user_id", user_id), "operator_id": _id("operator_id", operator_id),
        "message_id": _message_id(message_id)}


def friend_recall(*, self_id: int, time: int, user_id: int, message_id: int) -> dict[str, Any]:
    """A private message was recalled."""
    return _base(self_id, time, "notice") | {
        "notice_type": "friend_recall", "user_id": _id("user_id", user_id),
        "message_id": _message_id(message_id)}
