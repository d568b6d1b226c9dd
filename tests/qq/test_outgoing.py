"""The platform's outgoing message bodies (qq/outgoing.py): the upload and the message body."""

from __future__ import annotations

import pytest

from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.qq.outgoing import Media, OutgoingPart, message_body


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
