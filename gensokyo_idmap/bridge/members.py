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
commit for what the next message says again. So after a restart, or for a member not seen
for a day or two, a member's profile is unknown (empty names, ``member``) until they speak.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Literal

from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.recent_cache import RecentCache

__all__ = ["GUILD_ADMIN_ROLE", "GUILD_CHANNEL_ADMIN_ROLE", "GUILD_OWNER_ROLE", "UNKNOWN",
           "MemberProfile", "MemberProfiles", "Role", "group_profile", "guild_profile",
           "guild_role", "profiles_of"]

Role = Literal["owner", "admin", "member"]

#: The platform's default guild role ids (module doc).
GUILD_ADMIN_ROLE: Final = "2"
GUILD_OWNER_ROLE: Final = "4"
GUILD_CHANNEL_ADMIN_ROLE: Final = "5"
#: Members kept (member and chat pairs, a few hundred bytes each), and for how long after
#: they last spoke at least (at most twice that; less when more than the count speak).
_KEPT: Final = 131_072
_KEPT_SECONDS: Final = 86_400.0


@dataclass(frozen=True, slots=True)
class MemberProfile:
    """A member as OneBot's ``sender`` shows them."""

    nickname: str = ""
    card: str = ""
    role: Role = "member"


#: What is known of a member the platform has named nothing of.
UNKNOWN: Final = MemberProfile()


@lru_cache(maxsize=4096)
def group_profile(username: str, member_role: str | None) -> MemberProfile:
    """A group message's author: ``author.username`` as the nickname (groups have no card
    the platform shows a bot), ``author.member_role`` as the role (absent: ``member``).
    Kept for the names that come back (the inbound path asks for every group message)."""
    role: Role = "owner" if member_role == "owner" else (
        "admin" if member_role == "admin" else "member")
    return MemberProfile(username, "", role)


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
    """The latest profile of each member of each chat (by its ``last_seen`` scene), in
    memory, bounded: the ones not seen for a day or more are forgotten first."""

    def __init__(self) -> None:
        self._kept: RecentCache[tuple[str, int], MemberProfile] = RecentCache(
            _KEPT, _KEPT_SECONDS)

    def record(self, scene: str, vuin: int, profile: MemberProfile) -> None:
        """``vuin``'s profile in ``scene`` is ``profile`` now (nothing is written when that is
        what is kept, nor for a member named by nothing but who was not known either)."""
        key = (scene, vuin)
        if (self._kept.young.get(key) or self._kept.get(key) or UNKNOWN) != profile:
            self._kept.put(key, profile)

    def get(self, scene: str, vuin: int) -> MemberProfile:
        """``vuin``'s latest profile in ``scene``, :data:`UNKNOWN` when none is kept."""
        return self._kept.get((scene, vuin)) or UNKNOWN


_PROFILES: weakref.WeakKeyDictionary[IdentityGraph, MemberProfiles] = (
    weakref.WeakKeyDictionary())


def profiles_of(graph: IdentityGraph) -> MemberProfiles:
    """The one profile table of ``graph``'s daemon (shared by the inbound bridge, which
    records, and the actions, which answer from it; as the guild directory is)."""
    found = _PROFILES.get(graph)
    if found is None:
        found = _PROFILES[graph] = MemberProfiles()
    return found
