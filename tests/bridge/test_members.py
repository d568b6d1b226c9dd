"""Names and roles of chat members: the platform's words → OneBot's ``sender``, and the
latest of each member per chat, kept in memory and bounded."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap.bridge.members import (
    KEPT_SECONDS,
    UNKNOWN,
    MemberProfile,
    MemberProfiles,
    Role,
    group_profile,
    guild_profile,
    guild_role,
)

from ..conftest import FakeClock


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
    assert profiles.get(100, 7) is UNKNOWN
    profiles.record(100, 7, group_profile("Reimu", "admin"))
    profiles.record(101, 7, group_profile("Reimu", None))
    assert profiles.get(100, 7).role == "admin"
    assert profiles.get(101, 7).role == "member"  # per chat
    profiles.record(100, 7, group_profile("Reimu H.", "member"))
    assert profiles.get(100, 7) == MemberProfile("Reimu H.", "", "member")
    assert profiles.get(100, 8) is UNKNOWN
    assert profiles.get(7, 100) is UNKNOWN  # chat and member are not interchangeable


def test_a_message_naming_nobody_forgets_what_an_earlier_one_said() -> None:
    profiles = MemberProfiles()
    profiles.record(100, 7, UNKNOWN)  # nothing known, nothing said: nothing kept
    assert len(profiles) == 0
    profiles.record(100, 7, group_profile("Reimu", "admin"))
    profiles.record(100, 7, group_profile("", None))  # an older payload now
    assert profiles.get(100, 7) == UNKNOWN


@given(st.text(max_size=8), st.text(max_size=8), st.sampled_from(["owner", "admin", "member"]),
       st.integers(1, 2**63 - 1), st.integers(1, 2**63 - 1))
def test_any_profile_is_given_back_as_recorded(nickname: str, card: str, role: Role,
                                               chat: int, vuin: int) -> None:
    """A member's name alone is kept as the name (module doc): what comes back is equal."""
    profiles = MemberProfiles()
    profiles.record(chat, vuin, MemberProfile(nickname, card, role))
    assert profiles.get(chat, vuin) == MemberProfile(nickname, card, role)


PROFILES = st.builds(MemberProfile, st.sampled_from(["", "Reimu", "Marisa"]),
                     st.sampled_from(["", "R"]), st.sampled_from(["owner", "admin", "member"]))


@given(st.lists(PROFILES, max_size=8))
def test_what_is_given_back_is_the_last_profile_recorded(recorded: list[MemberProfile]) -> None:
    profiles = MemberProfiles()
    for profile in recorded:
        profiles.record(100, 7, profile)
    assert profiles.get(100, 7) == (recorded[-1] if recorded else UNKNOWN)


def test_a_profile_is_kept_for_a_group_reply_window_after_the_member_last_spoke(
        clock: FakeClock) -> None:
    """The rule: a framework acts on a member while it can answer their message; after
    two windows without a word from them, the chore has forgotten them."""
    profiles = MemberProfiles(clock=clock)
    profiles.record(100, 7, group_profile("Reimu", "admin"))
    profiles.record(100, 8, group_profile("Marisa", "member"))
    clock.advance(KEPT_SECONDS - 1)
    profiles.forget()
    assert profiles.get(100, 7).role == "admin"  # within the window: kept, and renewed
    clock.advance(2)
    profiles.forget()  # a window since the start: the generations turn over
    assert profiles.get(100, 7).role == "admin"  # asked about in the last window: kept
    clock.advance(KEPT_SECONDS)
    profiles.forget()
    assert profiles.get(100, 7).role == "admin"
    assert profiles.get(100, 8) is UNKNOWN  # silent for two windows: forgotten
    for _ in range(2):  # the chore, once a window has passed each time: all forgotten
        clock.advance(KEPT_SECONDS)
        profiles.forget()
    assert len(profiles) == 0


def test_never_more_profiles_than_the_bound(clock: FakeClock) -> None:
    profiles = MemberProfiles(kept=100, clock=clock)
    for vuin in range(1, 1000):
        profiles.record(vuin, vuin, group_profile(f"u{vuin}", None))
        assert len(profiles) <= 100
    assert profiles.get(999, 999).nickname == "u999"  # the newest are the ones kept
