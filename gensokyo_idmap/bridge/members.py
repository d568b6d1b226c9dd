"""Who a chat member is, as the platform last named them: name, group card and role.

The platform names a message's author with the message, nowhere else (a bot has no member
list and no profile API for groups): a group message may carry ``author.username`` and
``author.member_role`` (``member`` / ``admin`` / ``owner``), a channel message
``author.username``, ``member.nick`` and ``member.roles`` (guild role ids). This module
turns those into OneBot's ``sender.nickname`` / ``sender.card`` / ``sender.role``
(:func:`group_profile`, :func:`guild_profile`), so a framework's admin checks (NoneBot's
``GROUP_ADMIN`` / ``GROUP_OWNER``, Koishi's ``onebot.group.admin``) hold where the platform
says who is admin, and keeps the latest of each member per chat (:class:`MemberProfiles`)
for ``get_group_member_info`` / ``get_group_member_list``.

Guild role ids: the platform's default roles are ``1`` everyone, ``2`` guild admin, ``4``
the guild's owner (its creator) and ``5`` channel admin (botgo's API tests name ``5``
``defaultRoleTypeChannelAdmin``; the platform's role documentation names the others).
``4`` is ``owner``, ``2`` is ``admin``. ``5`` stays ``member``: a message names the role,
not the channels its holder administers, so a channel admin of one channel would pass as
admin of every channel of the guild. Any other id (roles a guild made) is ``member``.

Kept in memory, not in the identity store: the name and role come back with every message
of the member, and a durable write per member and chat would cost the inbound path a
commit for what the next message says again. Kept for the reply window of a group
(:data:`KEPT_SECONDS`) after the member's last message, at least, and at most twice that:
a framework acts on a member (checks their role, answers them) while it can still answer
their message, and a chat the bot can no longer send to needs nobody's name. So after a
restart, or for a member who has not spoken since, a member's profile is unknown (empty
names, ``member``) until they speak again.

An entry is small and no object of its own (a flood of new groups costs one each, and
its entries must not keep the flood's memory after the window: :class:`MemberProfiles`).
"""

from __future__ import annotations

import sys
import time
import weakref
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.runtime.key_times import KeyTimes
from gensokyo_idmap.runtime.replies import REPLY_WINDOW_SECONDS
from gensokyo_idmap.tables import Named

__all__ = ["GUILD_ADMIN_ROLE", "GUILD_CHANNEL_ADMIN_ROLE", "GUILD_OWNER_ROLE", "KEPT",
           "KEPT_SECONDS", "UNKNOWN", "MemberProfile", "MemberProfiles", "Role", "group_profile",
           "group_role", "guild_profile", "guild_role", "profiles_of"]

Role = Literal["owner", "admin", "member"]

#: The platform's default guild role ids (module doc).
GUILD_ADMIN_ROLE: Final = "2"
GUILD_OWNER_ROLE: Final = "4"
GUILD_CHANNEL_ADMIN_ROLE: Final = "5"
#: Members kept (member and chat pairs, about 150 bytes each), and for how long after they
#: last spoke at least (at most twice that; less when more than the count speak): a
#: group's reply window (module doc).
KEPT: Final = 131_072
KEPT_SECONDS: Final = float(REPLY_WINDOW_SECONDS["group"])


@dataclass(frozen=True, slots=True)
class MemberProfile:
    """A member as OneBot's ``sender`` shows them."""

    nickname: str = ""
    card: str = ""
    role: Role = "member"


#: What is known of a member the platform has named nothing of.
UNKNOWN: Final = MemberProfile()


def group_role(member_role: str | None) -> Role:
    """``author.member_role`` as a OneBot role: ``owner``, ``admin``, else (absent or any
    other word) ``member``."""
    return "owner" if member_role == "owner" else (
        "admin" if member_role == "admin" else "member")


def group_profile(username: str, member_role: str | None) -> MemberProfile:
    """A group message's author: ``author.username`` as the nickname (groups have no card
    the platform shows a bot), ``author.member_role`` as the role (absent: ``member``).

    Made anew each time, not kept (a cache of the profiles made, keyed by name and role,
    kept the names of the members who spoke in the last minutes as objects of their own:
    after a flood, among the objects the flood left, see :class:`MemberProfiles`)."""
    return MemberProfile(username, "", group_role(member_role))


def guild_role(roles: Sequence[str]) -> Role:
    """The OneBot role of guild role ids: ``owner`` for the owner's role, ``admin`` for the
    guild admins', else ``member`` (channel admins included: module doc)."""
    if GUILD_OWNER_ROLE in roles:
        return "owner"
    return "admin" if GUILD_ADMIN_ROLE in roles else "member"


def guild_profile(username: str, nick: str, roles: Sequence[str]) -> MemberProfile:
    """A channel message's author: ``author.username`` as the nickname (the guild nick when
    there is no user name), ``member.nick`` as the card, the role of ``member.roles``."""
    return MemberProfile(username or nick, nick, guild_role(roles))


_ROLES: Final[tuple[Role, ...]] = ("member", "admin", "owner")
_ROLE_CODES: Final[dict[str, int]] = {role: code for code, role in enumerate(_ROLES)}
#: How names are kept as bytes: any str a payload's JSON can make (lone surrogates too).
_ENCODING: Final = "utf-8"
_ERRORS: Final = "surrogatepass"


class MemberProfiles:
    """The latest profile of each member of each chat (by the chat's vUIN: a group, or a
    guild channel), in memory, bounded: the ones not seen for a reply window or more are
    forgotten first (module doc).

    No object per entry: a flood of new groups whose authors are named puts tens of
    thousands of entries here, and objects kept for a window after the flood's other
    objects are gone (a number for the member and chat, the name's string) held the
    flood's 1 MiB arenas of small objects (``bench/tables.py``: 11 more arenas than
    before a flood of 50,000 groups, after the windows). So the entries are a log of
    :class:`~gensokyo_idmap.runtime.key_times.KeyTimes` (a member and chat by the hash of
    the pair, with the time the entry was put), and beside it, entry for entry, arrays of
    the chat's and the member's vUINs (a lookup checks both: two pairs with one hash never
    answer for each other), the role, and where the names are in one ``bytearray`` (UTF-8,
    the nickname and then the card, whose length is kept). All of them are blocks of the C
    allocator that shrink as the log loses its front.

    Times: an entry is put again (at the end of the log) when its member speaks or is
    asked about and it is half a window old or more, or when their profile changed; it is
    dropped once it is one and a half windows old, by a sweep at most half a window after
    that (:meth:`record` when one is due, and the memory chore every minute). So a member
    is kept a window after their last message at least, and two at most.
    """

    __slots__ = ("_card_sizes", "_chats", "_clock", "_half", "_limit", "_log", "_roles",
                 "_starts", "_sweep_at", "_text", "_text_base", "_vuins")

    def __init__(self, kept: int = KEPT, seconds: float = KEPT_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if kept < 1 or seconds <= 0:
            raise ValueError("MemberProfiles needs kept >= 1 and seconds > 0")
        self._limit = kept
        self._half = seconds / 2
        self._clock = clock
        self._log = KeyTimes()  # (chat, member) → when put, oldest first
        # entry by entry from the log's first (its number self._log.first)
        self._chats = array("q")
        self._vuins = array("q")
        self._roles = array("b")  # an index into _ROLES
        self._starts = array("q")  # where its names begin in the text (counted from its
        self._card_sizes = array("l")  # first byte ever); the card's bytes, at the end
        self._text = bytearray()  # the names of every entry in the log, in its order
        self._text_base = 0  # where self._text[0] is, counted from the first byte ever
        self._sweep_at = float("inf")  # when record drops what lapsed next

    def record(self, chat: int, vuin: int, profile: MemberProfile) -> None:
        """``vuin``'s profile in the chat of vUIN ``chat`` is ``profile`` now (nothing is
        written when that is what is kept and it is not half a window old, nor for a
        member named by nothing who was not known either)."""
        now = self._clock()
        if now >= self._sweep_at:
            self._sweep(now)
        key = _pair(chat, vuin)
        at = self._at(key, chat, vuin)
        nickname = profile.nickname.encode(_ENCODING, _ERRORS)
        card = profile.card.encode(_ENCODING, _ERRORS)
        role = _ROLE_CODES[profile.role]
        if at >= 0:
            if self._holds(at, nickname, card, role):
                if now - self._log.time_of(self._log.first + at) >= self._half:
                    self._put(key, chat, vuin, nickname, card, role, now)
                return
            if profile == UNKNOWN:  # a payload naming nobody: nothing known any more
                self._log.discard(key)
                return
        elif profile == UNKNOWN:
            return
        self._put(key, chat, vuin, nickname, card, role, now)

    def get(self, chat: int, vuin: int) -> MemberProfile:
        """``vuin``'s latest profile in the chat of vUIN ``chat``, :data:`UNKNOWN` when none
        is kept (one asked about is kept as one who spoke)."""
        key = _pair(chat, vuin)
        at = self._at(key, chat, vuin)
        if at < 0:
            return UNKNOWN
        start, end = self._span(at)
        names = bytes(self._text[start:end])
        split = len(names) - self._card_sizes[at]
        nickname, card, role = names[:split], names[split:], self._roles[at]
        now = self._clock()
        if now - self._log.time_of(self._log.first + at) >= self._half:
            self._put(key, chat, vuin, nickname, card, role, now)
        return MemberProfile(nickname.decode(_ENCODING, _ERRORS),
                             card.decode(_ENCODING, _ERRORS), _ROLES[role])

    def _at(self, key: tuple[int, int], chat: int, vuin: int) -> int:
        """Where the entry of ``chat`` and ``vuin`` is in the arrays, -1 if none is kept
        (an entry of the same hash for another pair included)."""
        number = self._log.number(key)
        if number < 0:
            return -1
        at = number - self._log.first
        return at if self._chats[at] == chat and self._vuins[at] == vuin else -1

    def _span(self, at: int) -> tuple[int, int]:
        """Where the names of the entry at ``at`` are in the text: (start, end)."""
        start = self._starts[at] - self._text_base
        end = (self._starts[at + 1] - self._text_base if at + 1 < len(self._starts)
               else len(self._text))
        return start, end

    def _holds(self, at: int, nickname: bytes, card: bytes, role: int) -> bool:
        """Whether the entry at ``at`` is these names and role."""
        start, end = self._span(at)
        return (self._roles[at] == role and self._card_sizes[at] == len(card)
                and end - start == len(nickname) + len(card)
                and self._text.startswith(nickname, start)
                and self._text.startswith(card, end - len(card)))

    def _put(self, key: tuple[int, int], chat: int, vuin: int, nickname: bytes,
             card: bytes, role: int, now: float) -> None:
        """The entry at the end of the log (its earlier one, if any, moved on)."""
        if not self._log:
            self._sweep_at = now + 3 * self._half
        self._log.put(key, now)
        self._chats.append(chat)
        self._vuins.append(vuin)
        self._roles.append(role)
        self._starts.append(self._text_base + len(self._text))
        self._card_sizes.append(len(card))
        self._text += nickname
        self._text += card
        if len(self._log) > self._limit:  # the oldest eighth at once: a drop moves the rest
            self._drop(now - 3 * self._half, len(self._log) - self._limit + self._limit // 8)

    def _sweep(self, now: float) -> None:
        """Drop the entries a window and a half old; the next sweep when the oldest left
        is, but not within half a window (each moves the arrays)."""
        self._drop(now - 3 * self._half, 0)
        first = self._log.first_time()
        self._sweep_at = (float("inf") if first is None
                          else max(first + 3 * self._half, now + self._half))

    def _drop(self, cutoff: float, room: int) -> None:
        """The log's :meth:`~gensokyo_idmap.runtime.key_times.KeyTimes.drop_front`, and the
        same entries from the arrays and their names from the text."""
        before = self._log.first
        self._log.drop_front(cutoff, room)
        cut = self._log.first - before
        if cut:
            for column in (self._chats, self._vuins, self._roles, self._starts,
                           self._card_sizes):
                del column[:cut]
            end = self._starts[0] if self._starts else self._text_base + len(self._text)
            del self._text[:end - self._text_base]
            self._text_base = end

    def __len__(self) -> int:
        return len(self._log)

    def memory_tables(self) -> list[Named]:
        """Its table."""
        return [("member_profiles", self)]

    def forget(self) -> None:
        """The memory chore's sweep (:mod:`gensokyo_idmap.tables`)."""
        self._sweep(self._clock())

    def footprint(self) -> int:
        """Bytes held: the log and the arrays beside it."""
        return self._log.footprint() + sum(sys.getsizeof(part) for part in (
            self._chats, self._vuins, self._roles, self._starts, self._card_sizes,
            self._text))


def _pair(chat: int, vuin: int) -> tuple[int, int]:
    """What the log knows a member of a chat by (its hash): the pair, whose hash mixes
    both numbers (a number ``chat << 64 | vuin`` hashes modulo 2**61 - 1, so a member of
    one group and another of the next group, 8 vUINs apart, would share a hash)."""
    return chat, vuin


_PROFILES: weakref.WeakKeyDictionary[IdentityGraph, MemberProfiles] = (
    weakref.WeakKeyDictionary())


def profiles_of(graph: IdentityGraph) -> MemberProfiles:
    """The one profile table of ``graph``'s daemon (shared by the inbound bridge, which
    records, and the actions, which answer from it; as the guild directory is)."""
    found = _PROFILES.get(graph)
    if found is None:
        found = _PROFILES[graph] = MemberProfiles()
    return found
