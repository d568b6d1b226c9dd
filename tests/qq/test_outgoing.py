"""The platform's outgoing message bodies (qq/outgoing.py): the upload and the message body,
and the body of a guild channel or DM message."""

from __future__ import annotations

import pytest

from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.qq.outgoing import (
    FILE_IMAGE,
    FILE_RECORD,
    FILE_VIDEO,
    MSG_MARKDOWN,
    MSG_MEDIA,
    MSG_TEXT,
    Media,
    OutgoingPart,
    channel_message_body,
    check_channel_parts,
    message_body,
)


def test_upload_body_by_url_and_by_data() -> None:
    assert Media(1, url="https://x").upload_body() == {
        "file_type": 1, "srv_send_msg": False, "url": "https://x"}
    assert Media(3, file_data="QUJD").upload_body() == {
        "file_type": 3, "srv_send_msg": False, "file_data": "QUJD"}


# --- message_body -------------------------------------------------------------------------


def test_text_body_prefers_msg_id_over_event_id() -> None:
    body = message_body(OutgoingPart(0, content="hi"), msg_id="m1", event_id="e1", msg_seq=2)
    assert body == {"msg_type": 0, "content": "hi", "msg_seq": 2, "msg_id": "m1"}


def test_body_with_event_id_only() -> None:
    body = message_body(OutgoingPart(0, content="hi"), msg_id=None, event_id="e1", msg_seq=1)
    assert body == {"msg_type": 0, "content": "hi", "msg_seq": 1, "event_id": "e1"}


def test_body_without_reference_has_neither_key() -> None:
    body = message_body(OutgoingPart(0, content="hi"), msg_id=None, event_id=None, msg_seq=1)
    assert "msg_id" not in body and "event_id" not in body
    assert body == {"msg_type": 0, "content": "hi", "msg_seq": 1}


def test_media_body_carries_file_info() -> None:
    part = OutgoingPart(7, content="cap", media=Media(1, url="https://x"))
    body = message_body(part, msg_id="m", event_id=None, msg_seq=3, file_info="FI")
    assert body == {"msg_type": 7, "content": "cap", "msg_seq": 3,
                    "media": {"file_info": "FI"}, "msg_id": "m"}


def test_media_body_without_file_info_is_refused() -> None:
    part = OutgoingPart(7, content=" ", media=Media(1, url="https://x"))
    with pytest.raises(BadInputError) as err:
        message_body(part, msg_id="m", event_id=None, msg_seq=1)
    assert err.value.field == "media"


def test_markdown_body_carries_markdown_and_keyboard() -> None:
    part = OutgoingPart(2, markdown={"content": "md"}, keyboard={"id": "kb"})
    body = message_body(part, msg_id=None, event_id="ev", msg_seq=4)
    assert body == {"msg_type": 2, "content": "", "msg_seq": 4,
                    "markdown": {"content": "md"}, "keyboard": {"id": "kb"},
                    "event_id": "ev"}
    assert "media" not in body


def test_text_body_ignores_file_info() -> None:
    body = message_body(OutgoingPart(0, content="t"), msg_id="m", event_id=None, msg_seq=1,
                        file_info="FI")
    assert "media" not in body


# --- guild channels and DMs ----------------------------------------------------------------


def test_channel_text_body_is_content_with_the_reply() -> None:
    part = OutgoingPart(MSG_TEXT, content="pong")
    assert channel_message_body(part, msg_id="m1", event_id=None, msg_seq=2) == {
        "content": "pong", "msg_seq": 2, "msg_id": "m1"}
    assert channel_message_body(part, msg_id=None, event_id=None, msg_seq=1) == {
        "content": "pong", "msg_seq": 1}  # an active message: channels allow a few a day


def test_channel_image_goes_by_url_in_the_message() -> None:
    part = OutgoingPart(MSG_MEDIA, content=" ", media=Media(FILE_IMAGE,
                                                            url="https://e.com/a.png"))
    assert channel_message_body(part, msg_id="m1", event_id=None, msg_seq=1) == {
        "content": "", "image": "https://e.com/a.png", "msg_seq": 1, "msg_id": "m1"}


def test_channel_markdown_keeps_its_type_and_keyboard() -> None:
    part = OutgoingPart(MSG_MARKDOWN, markdown={"content": "# hi"}, keyboard={"id": "k"})
    assert channel_message_body(part, msg_id=None, event_id="e1", msg_seq=1) == {
        "content": "", "msg_type": MSG_MARKDOWN, "markdown": {"content": "# hi"},
        "keyboard": {"id": "k"}, "msg_seq": 1, "event_id": "e1"}


@pytest.mark.parametrize(("media", "said"), [
    (Media(FILE_RECORD, url="https://e.com/a.silk"), "images only"),
    (Media(FILE_VIDEO, url="https://e.com/a.mp4"), "images only"),
    (Media(FILE_IMAGE, file_data="aGk="), "http(s) URL")])
def test_what_channels_cannot_take_is_refused_whole(media: Media, said: str) -> None:
    parts = [OutgoingPart(MSG_TEXT, content="first"), OutgoingPart(MSG_MEDIA, media=media)]
    with pytest.raises(BadInputError) as err:
        check_channel_parts(parts)
    assert said in err.value.message
