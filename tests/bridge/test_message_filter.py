"""The message filter alone (pure): what is compared, white and black prefixes, remove_at."""

from __future__ import annotations

import pytest

from gensokyo_idmap.bridge.message_filter import MessageFilter
from gensokyo_idmap.onebot.message import Segment, parse_cq

SELF = 10001


def message(cq: str) -> list[Segment]:
    return parse_cq(cq)


@pytest.mark.parametrize(("cq", "text"), [
    ("[CQ:at,qq=10001] /help me", "/help me"),
    ("[CQ:at,qq=10001]   查询 x", "查询 x"),
    ("  help", "help"),
    ("[CQ:at,qq=42] help", "help"),  # someone else's mention is not text
    ("[CQ:image,file=a.png]help", "help"),
    ("[CQ:image,file=a.png]", ""),
])
def test_the_text_compared_leaves_out_the_leading_at_bot_and_spaces(cq: str,
                                                                      text: str) -> None:
    assert MessageFilter(SELF).text(message(cq)) == text


@pytest.mark.parametrize(("cq", "forwarded"), [
    ("[CQ:at,qq=10001] help me", True),
    ("[CQ:at,qq=10001] /help me", True),  # one leading slash is ignored
    ("[CQ:at,qq=10001] /status", True),  # "/status" itself is a white prefix
    ("[CQ:at,qq=10001] status", False),  # …which does not match without the slash
    ("[CQ:at,qq=10001] hello", False),
    ("[CQ:at,qq=10001] //help", False),  # only one slash
    ("[CQ:image,file=a.png]", False),  # no text: no white prefix can match
])
def test_white_prefixes_forward_only_what_starts_with_one(cq: str, forwarded: bool) -> None:
    only = MessageFilter(SELF, white_prefixes=("help", "/status"))
    assert only.forwards(message(cq)) is forwarded
    assert (only.apply(message(cq)) is not None) is forwarded


def test_black_prefixes_hold_back_what_starts_with_one_and_both_must_pass() -> None:
    black = MessageFilter(SELF, black_prefixes=("查询",))
    assert not black.forwards(message("[CQ:at,qq=10001] /查询 天气"))
    assert not black.forwards(message("查询"))
    assert black.forwards(message("[CQ:at,qq=10001] 帮助 查询"))
    assert black.forwards(message("[CQ:image,file=a.png]"))
    both = MessageFilter(SELF, white_prefixes=("help",), black_prefixes=("help admin",))
    assert both.forwards(message("/help me"))
    assert not both.forwards(message("/help admin"))
    assert not MessageFilter(SELF).active and black.active
    assert MessageFilter(SELF, remove_at=True).active


def test_remove_at_drops_only_the_leading_at_bot_and_its_spaces() -> None:
    strip = MessageFilter(SELF, remove_at=True)
    assert strip.apply(message("[CQ:at,qq=10001] /help me")) == [Segment.text("/help me")]
    assert strip.apply(message("[CQ:at,qq=10001] [CQ:image,file=a.png]")) == [
        Segment("image", (("file", "a.png"),))]
    kept = message("hi [CQ:at,qq=10001]")  # not leading: stays
    assert strip.apply(kept) == kept
    other = message("[CQ:at,qq=42] hi")  # someone else: stays
    assert strip.apply(other) == other
    assert MessageFilter(SELF).apply(message("[CQ:at,qq=10001] x")) == message(
        "[CQ:at,qq=10001] x")  # without remove_at nothing changes
