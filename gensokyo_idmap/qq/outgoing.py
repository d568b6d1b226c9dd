"""The QQ platform's outgoing message bodies (reference §5.1, §5.3), pure.

The platform sends text as ``msg_type`` 0, markdown (with its keyboard) as 2, and an image /
voice / video as 7 after a ``/files`` upload. These are the platform's own shapes, built from
plain data: which platform messages a OneBot message becomes is the bridge's plan
(:mod:`gensokyo_idmap.bridge.plan`), and which message a send answers its reply choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from gensokyo_idmap.errors import BadInputError

__all__ = [
    "FILE_ANY",
    "FILE_IMAGE",
    "FILE_RECORD",
    "FILE_VIDEO",
    "MSG_MARKDOWN",
    "MSG_MEDIA",
    "MSG_TEXT",
    "Media",
    "OutgoingPart",
    "channel_message_body",
    "check_channel_parts",
    "message_body",
]

#: ``/files`` ``file_type`` values.
FILE_IMAGE: Final = 1
FILE_VIDEO: Final = 2
FILE_RECORD: Final = 3  # voice (silk)
FILE_ANY: Final = 4  # a file; not sent by the platform yet
#: ``msg_type`` values.
MSG_TEXT: Final = 0
MSG_MARKDOWN: Final = 2
MSG_MEDIA: Final = 7


@dataclass(frozen=True, slots=True)
class Media:
    """A file to upload first: by URL, or inline (base64, no ``data:`` prefix)."""

    file_type: int
    url: str | None = None
    file_data: str | None = None

    def upload_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"file_type": self.file_type, "srv_send_msg": False}
        if self.url is not None:
            body["url"] = self.url
        else:
            body["file_data"] = self.file_data
        return body


@dataclass(frozen=True, slots=True)
class OutgoingPart:
    """One platform message."""

    msg_type: int
    content: str = ""
    media: Media | None = None
    markdown: dict[str, Any] | None = None
    keyboard: dict[str, Any] | None = None


def message_body(part: OutgoingPart, *, msg_id: str | None, event_id: str | None,
                 msg_seq: int, file_info: str | None = None) -> dict[str, Any]:
    """The JSON body of ``POST /v2/{groups|users}/{openid}/messages`` for one part."""
    body: dict[str, Any] = {"msg_type": part.msg_type, "content": part.content,
                            "msg_seq": msg_seq}
    if part.msg_type == MSG_MEDIA:
        if file_info is None:
            raise BadInputError("media", None, "upload the file before sending it")
        body["media"] = {"file_info": file_info}
    return _with_rich_parts_and_reply(body, part, msg_id, event_id)


def _with_rich_parts_and_reply(body: dict[str, Any], part: OutgoingPart, msg_id: str | None,
                               event_id: str | None) -> dict[str, Any]:
    """``body`` with the part's markdown / keyboard, and what it answers: ``msg_id``, else
    ``event_id`` (a passive reply), else neither (an active message)."""
    if part.markdown is not None:
        body["markdown"] = part.markdown
    if part.keyboard is not None:
        body["keyboard"] = part.keyboard
    if msg_id is not None:
        body["msg_id"] = msg_id
    elif event_id is not None:
        body["event_id"] = event_id
    return body


# --- guild channels and guild DMs (``/channels/{id}/messages``, ``/dms/{guild}/messages``) ---


def check_channel_parts(parts: Sequence[OutgoingPart]) -> None:
    """Refuse what a channel or guild DM cannot take, before anything is sent: there is no
    ``/files`` upload there, an image goes in the message by its URL (``image``); voice,
    video and inline (base64) data have no such form."""
    for part in parts:
        media = part.media
        if media is None:
            continue
        if media.file_type != FILE_IMAGE:
            raise BadInputError("message", {FILE_VIDEO: "video", FILE_RECORD: "record"}.get(
                media.file_type, "file"), "guild channels and DMs take images only")
        if media.url is None:
            raise BadInputError("message", "image", "guild channels and DMs take an image by "
                                "its http(s) URL (base64:// data cannot be sent there)")


def channel_message_body(part: OutgoingPart, *, msg_id: str | None, event_id: str | None,
                         msg_seq: int, quote: str | None = None) -> dict[str, Any]:
    """The JSON body of a channel or guild DM message: text in ``content``, an image by
    its URL in ``image`` (:func:`check_channel_parts` first), markdown and keyboard as in
    groups; ``msg_id`` makes it a passive reply. ``quote``: the platform id of a message
    of the same chat shown quoted above it, as ``message_reference`` (botgo's
    ``MessageReference``) with ``ignore_get_message_error``, so a quote the platform can no
    longer show (the message recalled, too old) costs the quote, never the message."""
    body: dict[str, Any] = {"content": part.content.strip() if part.media else part.content,
                            "msg_seq": msg_seq}
    if quote is not None:
        body["message_reference"] = {"message_id": quote, "ignore_get_message_error": True}
    if part.msg_type == MSG_MARKDOWN:
        body["msg_type"] = MSG_MARKDOWN
    if part.media is not None:
        check_channel_parts([part])
        body["image"] = part.media.url
    return _with_rich_parts_and_reply(body, part, msg_id, event_id)
