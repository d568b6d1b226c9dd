"""Mentions in content: the forms the platform writes, and property tests that cutting a
content loses nothing and that what the daemon sends for an ``at`` reads back as the same
user (the round trip at → platform → at)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap.qq.mentions import (
    EveryoneMention,
    Piece,
    UserMention,
    guild_user_mention,
    join_pieces,
    member_mention,
    mentioned_users,
    split_mentions,
)

MEMBER = "0F1E2D3C4B5A69788796A5B4C3D2E1F0"
OTHER = "73A48B12B0D76B961B4349B5599FA43C"


def test_each_form_of_a_user_mention() -> None:
    for markup in (f"<@{MEMBER}>", f"<@!{MEMBER}>", f'<qqbot-at-user id="{MEMBER}" />',
                   f'<qqbot-at-user id="{MEMBER}"/>'):
        assert split_mentions(f"hi {markup} there") == [
            "hi ", UserMention(MEMBER, markup), " there"], markup


def test_each_form_of_everyone() -> None:
    for markup in ("<@all>", "<@!all>", "<qqbot-at-everyone />", "<qqbot-at-everyone/>"):
        assert split_mentions(f"{markup} news") == [EveryoneMention(markup), " news"]
    # @everyone as text is a mention only where the message says everyone was mentioned
    assert split_mentions("@everyone news") == ["@everyone news"]
    assert split_mentions("@everyone news", everyone_text=True) == [
        EveryoneMention("@everyone"), " news"]
    assert split_mentions("@everyoneelse", everyone_text=True) == ["@everyoneelse"]


def test_what_is_no_mention_stays_text() -> None:
    for text in ("<@>", "<@ 123>", "<@a b>", "a <b> c", "&lt;@123&gt;", "<qqbot-at-user />",
                 "<qqbot-at-user id=123 />", "<@" + "1" * 129 + ">", "@123"):
        assert split_mentions(text) == [text], text


def test_a_channel_message_mentioning_two_users() -> None:
    content = "<@!1> ping <@!144115218677563300> and <@!144115218677563301>"
    assert split_mentions(content) == [
        UserMention("1", "<@!1>"), " ping ",
        UserMention("144115218677563300", "<@!144115218677563300>"), " and ",
        UserMention("144115218677563301", "<@!144115218677563301>")]
    assert mentioned_users(content + " <@144115218677563300>") == [
        "1", "144115218677563300", "144115218677563301"]


# --- properties ------------------------------------------------------------------------------

_IDS = st.text(st.sampled_from("0123456789ABCDEFabcdef_-"), min_size=1, max_size=40)
_MARKUP = st.one_of(
    _IDS.map(lambda user: f"<@{user}>"), _IDS.map(lambda user: f"<@!{user}>"),
    _IDS.map(member_mention), _IDS.map(guild_user_mention),
    st.sampled_from(["<@all>", "<qqbot-at-everyone />", "@everyone"]))
#: Text made to look like markup: pieces of it, and any character.
_TEXTISH = st.lists(st.one_of(st.sampled_from(["<", ">", "@", "!", "/", " ", "=", '"', "all",
                                               "<@", "qqbot-at-user id=", "everyone"]),
                              st.characters()), max_size=30).map("".join)


@given(st.lists(st.one_of(_MARKUP, _TEXTISH), max_size=12), st.booleans())
def test_cutting_a_content_loses_nothing(parts: list[str], everyone_text: bool) -> None:
    content = "".join(parts)
    pieces = split_mentions(content, everyone_text=everyone_text)
    assert join_pieces(pieces) == content
    assert all(piece != "" for piece in pieces)
    # text pieces are maximal: no two in a row
    assert not any(isinstance(a, str) and isinstance(b, str)
                   for a, b in zip(pieces, pieces[1:], strict=False))
    for piece in pieces:  # a mention is one piece whole; its text alone reads as itself
        if not isinstance(piece, str):
            assert split_mentions(piece.markup, everyone_text=True) == [piece]


_SEGMENTS = st.lists(st.one_of(
    st.text(st.characters(blacklist_characters="<>@&"), min_size=1, max_size=20),
    _IDS.map(lambda user: UserMention(user, member_mention(user)))), max_size=10)


def _merged(pieces: list[Piece]) -> list[Piece]:
    """Adjacent text pieces as one (as :func:`split_mentions` gives them)."""
    merged: list[Piece] = []
    for piece in pieces:
        if isinstance(piece, str) and merged and isinstance(merged[-1], str):
            merged[-1] += piece
        else:
            merged.append(piece)
    return merged


@given(_SEGMENTS)
def test_an_at_sent_to_a_group_reads_back_as_the_same_member(pieces: list[Piece]) -> None:
    """Text and ats of members as the daemon sends them (``member_mention``), and the
    platform gives back in a received content, come back as the same text and members."""
    sent = "".join(piece if isinstance(piece, str) else member_mention(piece.user)
                   for piece in pieces)
    assert split_mentions(sent) == _merged(pieces)


@given(st.lists(st.one_of(
    st.text(st.characters(blacklist_characters="<>@&"), min_size=1, max_size=20),
    st.integers(1, 2**63).map(lambda user: UserMention(str(user), guild_user_mention(str(user))))),
    max_size=10))
def test_an_at_sent_to_a_channel_reads_back_as_the_same_user(pieces: list[Piece]) -> None:
    """Guild users (numeric ids) as the daemon mentions them in a channel (``<@id>``)."""
    sent = "".join(piece if isinstance(piece, str) else guild_user_mention(piece.user)
                   for piece in pieces)
    assert split_mentions(sent) == _merged(pieces)
    assert mentioned_users(sent) == list(dict.fromkeys(
        piece.user for piece in pieces if isinstance(piece, UserMention)))
