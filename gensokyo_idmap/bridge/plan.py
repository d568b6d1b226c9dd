"""OneBot segments → the platform messages that carry them (reference §5.1, §5.3), pure.

A OneBot message can hold what the platform sends as several messages: text goes out as
``msg_type`` 0, each image / record / video as its own ``msg_type`` 7 after a ``/files``
upload (the text rides on the first one), markdown as ``msg_type`` 2 with its keyboard.
:func:`plan_message` decides that split; :func:`~gensokyo_idmap.qq.outgoing.message_body`
writes one body once the sender knows the ``msg_id`` / ``event_id`` / ``msg_seq`` and the
uploaded ``file_info``.

Mentions need the identity graph, so the planner takes a ``mention`` callback that turns
the ``at`` segment's ``qq`` value into the text the platform renders (``""``: nothing, for
an at of the bot itself) or None: an at the platform cannot carry in this chat (``all``, any
at in a C2C or guild DM chat), which the unsupported-segment policy below decides.

No segment is lost silently: one the platform has no form for in this kind of chat (a
``face`` in a group, an ``at`` in C2C, ``poke``, ``share``, a type nobody knows…) refuses
the whole message,
naming it, or with ``onebot.unsupported_segments: drop`` is left out and named in
:attr:`MessagePlan.dropped`, for the sender to log.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from gensokyo_idmap import jsonio
from gensokyo_idmap.bridge.chat import GUILD_CHAT_KINDS
from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.onebot.message import Segment
from gensokyo_idmap.qq.outgoing import (
    FILE_ANY,
    FILE_IMAGE,
    FILE_RECORD,
    FILE_VIDEO,
    MSG_MARKDOWN,
    MSG_MEDIA,
    MSG_TEXT,
    Media,
    OutgoingPart,
)
from gensokyo_idmap.runtime.msgid import check_virtual_id

__all__ = ["EMOJI_TEXT_CHATS", "FILE_TYPES", "MessagePlan", "UnsupportedSegments",
           "plan_message"]

#: ``/files`` ``file_type`` per OneBot segment type.
FILE_TYPES: Final = {"image": FILE_IMAGE, "video": FILE_VIDEO, "record": FILE_RECORD,
                     "file": FILE_ANY}
_BASE64: Final = "base64://"
#: What a segment the platform cannot carry does to a send: refuse it (naming the segment),
#: or leave the segment out (the plan names it, the sender logs a warning).
UnsupportedSegments = Literal["refuse", "drop"]
#: Chat kinds whose message text shows a QQ system face written ``<emoji:ID>`` (the
#: platform's embedded format, bot-docs ``message_format.md``: channel messages and channel
#: DMs). Groups and C2C have no documented form: the ``<faceType=…>`` tag the platform
#: delivers to a bot shows as plain text when a bot sends it there (nonebot/adapter-qq#113),
#: so a ``face`` to them is a segment the platform cannot carry.
EMOJI_TEXT_CHATS: Final = GUILD_CHAT_KINDS


@dataclass(frozen=True, slots=True)
class MessagePlan:
    """The platform messages of one OneBot message, in order, and what it replies to."""

    parts: tuple[OutgoingPart, ...]
    reply_to: int | None  # the virtual message id a ``reply`` segment named
    #: segments left out (``unsupported_segments: drop``): (index in the message, type)
    dropped: tuple[tuple[int, str], ...] = ()


def _media(segment: Segment, index: int) -> Media:
    field = f"message[{index}].file"
    source = segment.get("url") or segment.get("file")
    if not source:
        raise BadInputError(field, None, f"a {segment.type} segment needs a file or url")
    if source.startswith(("http://", "https://")):
        return Media(FILE_TYPES[segment.type], url=source)
    if source.startswith(_BASE64):
        data = source[len(_BASE64):]
        try:
            base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise BadInputError(field, source[:40], "base64:// data is not valid base64") from None
        if not data:
            raise BadInputError(field, source[:40], "base64:// data is empty")
        return Media(FILE_TYPES[segment.type], file_data=data)
    raise BadInputError(field, source[:80],
                        "only http(s):// URLs and base64:// data can be sent; "
                        "local files are not read")


def _json_object(segment: Segment, index: int, name: str) -> dict[str, Any] | None:
    """A JSON object passed through in ``data.data`` (plain or ``base64://``)."""
    raw = segment.get("data")
    if raw is None:
        return None
    text = raw
    if raw.startswith(_BASE64):
        try:
            text = base64.b64decode(raw[len(_BASE64):], validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise BadInputError(f"message[{index}].data", raw[:40],
                                f"{name}: base64:// data is not valid") from None
    try:
        value = jsonio.loads(text)
    except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
        raise BadInputError(f"message[{index}].data", raw[:80],
                            f"{name} data must be a JSON object") from None
    if not isinstance(value, dict):
        raise BadInputError(f"message[{index}].data", raw[:80],
                            f"{name} data must be a JSON object")
    return value


def _passthrough(segment: Segment, index: int, short_form: str) -> dict[str, Any]:
    """A markdown or keyboard segment's object: ``{short_form: value}`` when that field is
    given (markdown ``content``, keyboard template ``id``), else the JSON in ``data``."""
    value = segment.get(short_form)
    found = {short_form: value} if value else _json_object(segment, index, segment.type)
    if found is None:
        raise BadInputError(f"message[{index}]", segment.type,
                            f"a {segment.type} segment needs {short_form} or data")
    return found


def _face(segment: Segment, index: int) -> str:
    """A ``face`` segment as the embedded ``<emoji:ID>`` text (a system face: its id is a
    number, the platform's EmojiType 1)."""
    face_id = segment.get("id") or ""
    if not (face_id.isascii() and face_id.isdigit()):
        raise BadInputError(f"message[{index}].id", face_id or None,
                            "a face segment needs the number of a QQ system face")
    return f"<emoji:{int(face_id)}>"


_DROP_HINT: Final = " (onebot.unsupported_segments: drop sends the rest without it)"


def _uncarried(unsupported: UnsupportedSegments, dropped: list[tuple[int, str]], index: int,
               kind: str, refusal: BadInputError) -> None:
    """A segment the platform cannot carry: left out and named (drop), or ``refusal``."""
    if unsupported != "drop":
        raise refusal
    dropped.append((index, kind))


def plan_message(segments: Sequence[Segment], chat_kind: str,
                 mention: Callable[[str], str | None],
                 unsupported: UnsupportedSegments = "refuse") -> MessagePlan:
    """Split a OneBot message into the platform messages that carry it, in order.

    A segment the platform cannot carry in ``chat_kind`` raises a :class:`BadInputError`
    naming it (``unsupported`` refuse), or is left out and named in the plan (drop).
    """
    dropped: list[tuple[int, str]] = []
    text: list[str] = []
    media: list[Media] = []
    markdown: dict[str, Any] | None = None
    keyboard: dict[str, Any] | None = None
    reply_to: int | None = None
    for index, segment in enumerate(segments):
        kind = segment.type
        if kind == "text":
            text.append(segment.get("text") or "")
        elif kind == "at":
            target = segment.get("qq")
            if not target:
                raise BadInputError(f"message[{index}].qq", None, "an at segment needs qq")
            rendered = mention(target)
            if rendered is not None:
                text.append(rendered)
            else:
                _uncarried(unsupported, dropped, index, kind, BadInputError(
                    f"message[{index}].qq", target,
                    f"the platform cannot carry an at segment of {target} in a {chat_kind} "
                    f"message{_DROP_HINT}"))
        elif kind == "reply":
            if reply_to is None:
                reply_to = check_virtual_id(segment.get("id") or "", f"message[{index}].id")
        elif kind in FILE_TYPES:
            if kind == "file":
                raise BadInputError(f"message[{index}]", kind,
                                    "the platform does not send files yet (file_type 4)")
            media.append(_media(segment, index))
        elif kind == "markdown":
            markdown = _passthrough(segment, index, "content")
        elif kind == "keyboard":
            keyboard = _passthrough(segment, index, "id")
        elif kind == "face" and chat_kind in EMOJI_TEXT_CHATS:
            text.append(_face(segment, index))
        else:
            _uncarried(unsupported, dropped, index, kind, BadInputError(
                f"message[{index}].type", kind,
                f"the platform cannot carry a {kind} segment in a {chat_kind} "
                f"message{_DROP_HINT}"))
    body = "".join(text)
    if keyboard is not None and markdown is None:
        raise BadInputError("message", "keyboard", "a keyboard is sent with a markdown segment")
    parts: list[OutgoingPart] = []
    if markdown is not None:
        if body.strip() and not media:
            parts.append(OutgoingPart(MSG_TEXT, content=body))
        parts.append(OutgoingPart(MSG_MARKDOWN, markdown=markdown, keyboard=keyboard))
    for number, item in enumerate(media):
        caption = body if number == 0 and body.strip() else " "
        parts.append(OutgoingPart(MSG_MEDIA, content=caption, media=item))
    if markdown is None and not media:
        if not body.strip():
            left_out = "; left out: " + ", ".join(
                f"message[{index}] {kind}" for index, kind in dropped) if dropped else ""
            raise BadInputError("message", body,
                                f"nothing to send (the message is empty{left_out})")
        parts.append(OutgoingPart(MSG_TEXT, content=body))
    return MessagePlan(tuple(parts), reply_to, tuple(dropped))

