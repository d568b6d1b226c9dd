"""A message's content as OneBot segments: its text, and an ``at`` for each mention (pure).

The platform writes mentions into the text as markup (:mod:`gensokyo_idmap.qq.mentions`);
a framework wants an ``at`` segment naming the person by the number it knows them by. The
bridge resolves everyone a message mentions before it builds the message, so each markup
finds its number in ``ats`` (the markup's id → a vUIN, or ``self_id`` for the bot). A
mention of everyone is ``[CQ:at,qq=all]``, as go-cqhttp sent one. Markup whose id has no
number stays text, as written.
"""

from __future__ import annotations

import html
from collections.abc import Mapping

from gensokyo_idmap.onebot.message import Segment
from gensokyo_idmap.qq.mentions import UserMention, split_mentions

__all__ = ["at_segment", "content_segments", "is_at"]


def at_segment(qq: int | str) -> Segment:
    """``[CQ:at,qq=<qq>]`` (a number, or ``all``)."""
    return Segment("at", (("qq", str(qq)),))


def is_at(segment: Segment, qq: int | str) -> bool:
    """Whether ``segment`` is an ``at`` of ``qq``."""
    return segment.type == "at" and dict(segment.data).get("qq") == str(qq)


def content_segments(content: str, ats: Mapping[str, int], *, everyone: bool = False,
                     unescape: bool = False) -> list[Segment]:
    """``content`` as text and ``at`` segments: a user's markup whose id ``ats`` holds is
    an ``at`` of that number, everyone's markup an ``at`` of ``all`` (``@everyone`` as
    plain text too when ``everyone``: the message says everyone was mentioned); the text
    around them (and markup nobody has a number for) is one ``text`` segment each run,
    with ``&lt;`` ``&gt;`` ``&amp;`` undone when ``unescape`` (the channels' content)."""
    segments: list[Segment] = []
    text: list[str] = []

    def flush() -> None:
        if text:
            joined = "".join(text)
            segments.append(Segment.text(html.unescape(joined) if unescape else joined))
            text.clear()

    for piece in split_mentions(content, everyone_text=everyone):
        if isinstance(piece, str):
            text.append(piece)
        elif isinstance(piece, UserMention):
            qq = ats.get(piece.user)
            if qq is None:
                text.append(piece.markup)
                continue
            flush()
            segments.append(at_segment(qq))
        else:
            flush()
            segments.append(at_segment("all"))
    flush()
    return segments
