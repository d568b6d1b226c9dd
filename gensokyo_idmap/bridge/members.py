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

An entry is small (a flood of new groups costs one each): its key is one number, the chat's
vUIN and the member's, and its value the member's name alone when that is all there is
(no card, role ``member``: most members), else the :class:`MemberProfile`.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.recent_cache import RecentCache
from gensokyo_idmap.runtime.replies import REPLY_WINDOW_SECONDS
from gensokyo_idmap.tables import Named

__all__ = ["GUILD_ADMIN_ROLE", "GUILD_CHANNEL_ADMIN_ROLE", "GUILD_OWNER_ROLE", "KEPT",
           "KEPT_SECONDS", "UNKNOWN", "MemberProfile", "MemberProfiles", "Role", "group_profile",
           "guild_profile", "guild_role", "profiles_of"]

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


#: (name, role) → the profile made of them, for the names that come back: the inbound path
#: asks for every group message (a cache that empties when they stop coming: an
#: ``lru_cache`` kept the last 4,096 names of a flood for ever, scattered over the memory
#: the flood took, which could then not be given back).
_MADE: Final[RecentCache[tuple[str, str | None], MemberProfile]] = RecentCache(4096)


def group_profile(username: str, member_role: str | None) -> MemberProfile:
    """A group message's author: ``author.username`` as the nickname (groups have no card
    the platform shows a bot), ``author.member_role`` as the role (absent: ``member``)."""
    key = (username, member_role)
    made = _MADE.young.get(key) or _MADE.get(key)
    if made is None:
        role: Role = "owner" if member_role == "owner" else (
            "admin" if member_role == "admin" else "member")
        made = MemberProfile(username, "", role)
        _MADE.offer(key, made)
    return made


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


class MemberProfiles:
    """The latest profile of each member of each chat (by the chat's vUIN: a group, or a
    guild channel), in memory, bounded: the ones not seen for a reply window or more are
    forgotten first (module doc)."""

    def __init__(self, kept: int = KEPT, seconds: float = KEPT_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        # (chat vUIN << 64 | member vUIN) → the name alone, or the profile (module doc)
        self._kept: RecentCache[int, str | MemberProfile] = RecentCache(kept, seconds, clock)

    def record(self, chat: int, vuin: int, profile: MemberProfile) -> None:
        """``vuin``'s profile in the chat of vUIN ``chat`` is ``profile`` now (nothing is
        written when that is what is kept, nor for a member named by nothing who was not
        known either)."""
        key = _key(chat, vuin)
        kept = self._kept.young.get(key) or self._kept.get(key)
        name_alone = profile.card == "" and profile.role == "member"
        if kept is None:
            if profile != UNKNOWN:
                self._kept.put(key, profile.nickname if name_alone else profile)
        elif kept != (profile.nickname if name_alone and isinstance(kept, str) else profile):
            self._kept.put(key, profile.nickname if name_alone and profile.nickname
                           else profile)

    def get(self, chat: int, vuin: int) -> MemberProfile:
        """``vuin``'s latest profile in the chat of vUIN ``chat``, :data:`UNKNOWN` when none
        is kept."""
        return self._profile(self._kept.get(_key(chat, vuin)))

    @staticmethod
    def _profile(kept: str | MemberProfile | None) -> MemberProfile:
        if kept is None:
            return UNKNOWN
        return MemberProfile(kept) if isinstance(kept, str) else kept

    def __len__(self) -> int:
        return len(self._kept)

    def memory_tables(self) -> list[Named]:
        """Its table, and the profiles :func:`group_profile` keeps made (shared)."""
        return [("member_profiles", self), ("author_profiles", _MADE)]

    def forget(self) -> None:
        """The memory chore's sweep (:mod:`gensokyo_idmap.tables`)."""
        self._kept.forget()

    def footprint(self) -> int:
        return self._kept.footprint()


def _key(chat: int, vuin: int) -> int:
    """One number for a member of a chat: vUINs are below 2**63."""
    return chat << 64 | vuin


_PROFILES: weakref.WeakKeyDictionary[IdentityGraph, MemberProfiles] = (
    weakref.WeakKeyDictionary())


def profiles_of(graph: IdentityGraph) -> MemberProfiles:
    """The one profile table of ``graph``'s daemon (shared by the inbound bridge, which
    records, and the actions, which answer from it; as the guild directory is)."""
    found = _PROFILES.get(graph)
    if found is None:
        found = _PROFILES[graph] = MemberProfiles()
    return found
