"""Names and roles of chat members: the platform's words → OneBot's ``sender``, and the
latest of each member per chat, kept in memory and bounded."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap.bridge import members
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


def test_a_member_is_kept_a_window_after_their_last_message_and_two_at_most(
        clock: FakeClock) -> None:
    """The rule, on the table's own clock (no chore: :meth:`record` sweeps when due): a
    member who spoke is known for a window at least; one silent for two windows is gone."""
    profiles = MemberProfiles(seconds=300.0, clock=clock)
    profiles.record(100, 7, group_profile("Reimu", "admin"))
    profiles.record(100, 8, group_profile("Marisa", None))
    for _ in range(7):  # Reimu speaks every 100 s for 700 s; Marisa is silent
        clock.advance(100.0)
        profiles.record(100, 7, group_profile("Reimu", "admin"))
        if clock.now - 1_700_000_000.0 <= 300.0:
            assert profiles.get(100, 8).nickname == "Marisa"  # within her window
        profiles.record(101, 9, group_profile("Sanae", None))  # traffic: sweeps when due
    assert profiles.get(100, 8) is UNKNOWN  # silent for 700 s: more than two windows
    assert profiles.get(100, 7) == MemberProfile("Reimu", "", "admin")
    clock.advance(299.0)
    assert profiles.get(100, 7).role == "admin"  # 299 s after her last message: asked
    clock.advance(600.0)  # about, so kept as if she spoke; two windows after that
    profiles.forget()  # the chore
    assert profiles.get(100, 7) is UNKNOWN
    assert len(profiles) == 0


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), PROFILES | st.none(),
                          st.sampled_from([0.0, 40.0, 200.0])), max_size=40))
def test_it_answers_the_latest_profile_within_the_window_and_nothing_after_two(
        steps: list[tuple[int, int, MemberProfile | None, float]]) -> None:
    """Against a model (the last profile and when each pair last spoke or was asked
    about): whatever the order of records, renewals, sweeps and drops of the front, a pair
    is answered with its latest profile within a window (300 s) of its last use, and is
    unknown two windows after it."""
    clock = FakeClock()
    profiles = MemberProfiles(seconds=300.0, clock=clock)
    latest: dict[tuple[int, int], tuple[MemberProfile, float]] = {}
    for chat, vuin, profile, wait in steps:
        clock.advance(wait)
        if wait == 200.0:
            profiles.forget()
        pair = (chat + 100, vuin + 1)
        if profile is not None:
            profiles.record(*pair, profile)
            if profile != UNKNOWN or pair in latest:
                latest[pair] = (profile, clock.now)
        else:
            got = profiles.get(*pair)
            kept, since = latest.get(pair, (UNKNOWN, float("-inf")))
            if clock.now - since <= 300.0:
                assert got == kept
                latest[pair] = (kept, clock.now)
            elif clock.now - since > 600.0:
                assert got is UNKNOWN
            elif got != UNKNOWN:
                assert got == kept
                latest[pair] = (kept, clock.now)


def test_a_flood_of_members_gives_its_memory_back_once_they_lapse(clock: FakeClock) -> None:
    """No object per entry, and the arrays shrink with the log (class doc): after a flood
    of 50,000 named members the table holds what the traffic after it needs."""
    profiles = MemberProfiles(seconds=300.0, clock=clock)
    empty = profiles.footprint()
    for n in range(50_000):
        profiles.record(10**6 + n, 10**7 + n, group_profile(f"member {n}", None))
    assert len(profiles) == 50_000
    assert profiles.footprint() > 50_000 * 40
    clock.advance(500.0)
    for n in range(10):
        profiles.record(1, 10 + n, group_profile(f"quiet {n}", "owner"))
    profiles.forget()
    assert len(profiles) == 10
    assert profiles.footprint() < empty + 4096
    assert profiles.get(10**6 + 7, 10**7 + 7) is UNKNOWN
    assert profiles.get(1, 13) == MemberProfile("quiet 3", "", "owner")


def test_two_pairs_of_one_hash_never_answer_for_each_other(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The log knows a pair by its hash; the chat and member kept beside it are checked."""
    monkeypatch.setattr(members, "_pair", lambda chat, vuin: 0)  # every pair one hash
    profiles = MemberProfiles()
    profiles.record(100, 7, group_profile("Reimu", "owner"))
    assert profiles.get(101, 7) is UNKNOWN  # not Reimu's role
    profiles.record(101, 7, group_profile("Marisa", None))  # takes the hash's entry
    assert profiles.get(100, 7) is UNKNOWN
    assert profiles.get(101, 7) == MemberProfile("Marisa", "", "member")


def test_any_name_a_payload_can_carry_is_given_back() -> None:
    """JSON can make a lone surrogate (``"\\ud800"``): kept and given back as it came."""
    profiles = MemberProfiles()
    for vuin, name in enumerate(["\ud800", "Ré\x00imu", "🌸" * 40, ""], start=1):
        profiles.record(100, vuin, guild_profile(name, "卡片\udfff", ["2"]))
        assert profiles.get(100, vuin) == MemberProfile(name or "卡片\udfff", "卡片\udfff",
                                                        "admin")
