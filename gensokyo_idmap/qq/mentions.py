"""Mentions in a message's ``content``, as the platform writes them (pure: no I/O).

The platform puts a mention into the text of a message, as markup, and lists whom it names
beside the text (``mentions[]``, read by :mod:`gensokyo_idmap.qq.events`). The forms seen
in received content (docs/wire-mapping.md, "Mentions", says where each was seen):

- ``<@id>`` and ``<@!id>``: a user: in a group, ``id`` is the member's OpenID; in a guild
  channel, the guild user id. ``<@all>`` / ``<@!all>`` is everyone.
- ``<qqbot-at-user id="id" />``: a user, the form the platform's text-chain documentation
  gives for sending, which SDKs also read in what they receive.
- ``<qqbot-at-everyone />``: everyone, likewise.
- ``@everyone``: everyone, as plain text (a channel's ``mention_everyone`` message, and what
  SDKs send): it is markup only where the message says everyone was mentioned, so
  :func:`split_mentions` takes it only when asked to.

:func:`split_mentions` cuts a content into text and mentions without losing a character
(:func:`join_pieces` gives the content back); :func:`member_mention` and
:func:`guild_user_mention` write what the daemon sends for an ``at`` segment, which
:func:`split_mentions` reads back as the same user.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, TypeAlias

__all__ = [
    "EveryoneMention",
    "Piece",
    "UserMention",
    "guild_user_mention",
    "join_pieces",
    "member_mention",
    "mentioned_users",
    "split_mentions",
]

#: The ids markup may name: OpenIDs and guild user ids (the characters an OpenID may hold,
#: at most its length).
_ID: Final = r"[0-9A-Za-z_\-]{1,128}"
#: The id of ``<@all>``: everyone, not a user.
_ALL: Final = "all"
_MARKUP: Final = re.compile(
    rf"<@!?(?P<at>{_ID})>"
    rf"|<qqbot-at-user\s+id=\"(?P<user>{_ID})\"\s*/>"
    r"|(?P<everyone><qqbot-at-everyone\s*/>)")
#: The same, and ``@everyone`` as text (not followed by what could continue a word).
_MARKUP_OR_TEXT: Final = re.compile(
    _MARKUP.pattern + r"|(?P<text_everyone>@everyone(?![0-9A-Za-z_]))")


@dataclass(frozen=True, slots=True)
class UserMention:
    """A mention of one user: ``user`` the id it names, ``markup`` the text as written."""

    user: str
    markup: str


@dataclass(frozen=True, slots=True)
class EveryoneMention:
    """A mention of everyone, ``markup`` the text as written."""

    markup: str


#: What a content is cut into: text, and the mentions between.
Piece: TypeAlias = str | UserMention | EveryoneMention


def split_mentions(content: str, *, everyone_text: bool = False) -> list[Piece]:
    """``content`` as text and mentions, in order; the text between two mentions is one
    piece (never empty). ``everyone_text``: ``@everyone`` as text is a mention of everyone
    too (the message says everyone was mentioned)."""
    pattern = _MARKUP_OR_TEXT if everyone_text else _MARKUP
    pieces: list[Piece] = []
    at = 0
    for found in pattern.finditer(content):
        if found.start() > at:
            pieces.append(content[at:found.start()])
        user = found.group("at") or found.group("user")
        if user is None or (found.group("at") == _ALL):
            pieces.append(EveryoneMention(found.group()))
        else:
            pieces.append(UserMention(user, found.group()))
        at = found.end()
    if at < len(content):
        pieces.append(content[at:])
    return pieces


def join_pieces(pieces: Iterable[Piece]) -> str:
    """The content :func:`split_mentions` cut into ``pieces``, character for character."""
    return "".join(piece if isinstance(piece, str) else piece.markup for piece in pieces)


def mentioned_users(content: str) -> list[str]:
    """The users ``content`` mentions, each once, in the order they first appear."""
    return list(dict.fromkeys(piece.user for piece in split_mentions(content)
                              if isinstance(piece, UserMention)))


def member_mention(openid: str) -> str:
    """How a send mentions a group member: ``<qqbot-at-user id="<member openid>" />``."""
    return f'<qqbot-at-user id="{openid}" />'


def guild_user_mention(user: str) -> str:
    """How a send mentions a guild user in a channel: ``<@<guild user id>>``."""
    return f"<@{user}>"
