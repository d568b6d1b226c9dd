"""Names and roles of chat members: the platform's words → OneBot's ``sender``, and the
latest of each member per chat, kept in memory and bounded."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap.bridge.members import (
    UNKNOWN,
    MemberProfile,
    MemberProfiles,
    group_profile,
    guild_profile,
    guild_role,
)


def test_a_group_author_is_named_by_username_and_member_role() -> None:
    assert group_profile("Reimu", "owner") == MemberProfile("Reimu", "", "owner")
    assert group_profile("Reimu", "admin").role == "admin"
    assert group_profile("Reimu", "member").role == "member"
    assert group_profile("", None) == UNKNOWN  # an older payload names nobody


def test_guild_roles_owner_and_guild_admin_only() -> None:
    assert guild_role(["1", "4"]) == "owner"  # the guild's creator
    assert guild_role(["2"]) == "admin"  # a guild admin
    assert guild_role(["2", "4"]) == "owner"  # the higher of the two
    # a channel admin: the message does not say of which channel, so no admin anywhere
    assert guild_role(["5"]) == "member"
    assert guild_role(["1"]) == guild_role([]) == guild_role(["11", "10001"]) == "member"


def test_a_channel_author_is_named_by_username_with_the_nick_as_card() -> None:
    assert guild_profile("alice", "Al", ["1", "2"]) == MemberProfile("alice", "Al", "admin")
    assert guild_profile("", "Al", []) == MemberProfile("Al", "Al", "member")
    assert guild_profile("alice", "", []) == MemberProfile("alice", "", "member")


@given(st.lists(st.text(max_size=6), max_size=6))
def test_only_the_owner_and_admin_roles_grant_anything(roles: list[str]) -> None:
    role = guild_role(roles)
    expected = "owner" if "4" in roles else "admin" if "2" in roles else "member"
    assert role == expected


def test_profiles_keep_the_latest_per_chat() -> None:
    profiles = MemberProfiles()
    assert profiles.get("QQ:1:group:G", 7) is UNKNOWN
    profiles.record("QQ:1:group:G", 7, group_profile("Reimu", "admin"))
    profiles.record("QQ:1:group:H", 7, group_profile("Reimu", None))
    assert profiles.get("QQ:1:group:G", 7).role == "admin"
    assert profiles.get("QQ:1:group:H", 7).role == "member"  # per chat
    profiles.record("QQ:1:group:G", 7, group_profile("Reimu H.", "member"))
    assert profiles.get("QQ:1:group:G", 7) == MemberProfile("Reimu H.", "", "member")
    assert profiles.get("QQ:1:group:G", 8) is UNKNOWN


def test_a_message_naming_nobody_forgets_what_an_earlier_one_said() -> None:
    profiles = MemberProfiles()
    profiles.record("QQ:1:group:G", 7, UNKNOWN)  # nothing known, nothing said: nothing kept
    assert len(profiles._kept) == 0
    profiles.record("QQ:1:group:G", 7, group_profile("Reimu", "admin"))
    profiles.record("QQ:1:group:G", 7, group_profile("", None))  # an older payload now
    assert profiles.get("QQ:1:group:G", 7) == UNKNOWN
