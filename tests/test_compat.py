"""compat.LegacyIdmap: the Go daemon's function names over the identity graph.

A row is a vUIN, a bare 32-hex id an OpenID of the configured AppID, any other id ``raw:``. Every test runs on a
real openid-map.db under tmp_path (the ``graph`` fixture of conftest.py).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gensokyo_idmap.compat import LegacyIdmap
from gensokyo_idmap.errors import BadInputError, NotFoundError, StoreError
from gensokyo_idmap.identity import OpenId, RawId, RUin, UnionId
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.runtime.msgid import MsgIdMap
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore

from .conftest import FakeClock

APP_ID = "102000001"  # the AppID of conftest.py
OPENID_A = "9F3A0C55E1B24D7A8C6E0F1D2B3A4C5D"
OPENID_B = "0A1B2C3D4E5F60718293A4B5C6D7E8F9"
GROUP = "C0FFEE00112233445566778899AABBCC"
QQ = "2870338968"
QQ_B32 = "GI4DOMBTGM4DSNRY"


@pytest.fixture
def legacy(graph: IdentityGraph) -> LegacyIdmap:
    return LegacyIdmap(graph, APP_ID)


def store_id(legacy: LegacyIdmap, value: str) -> int:
    return asyncio.run(legacy.StoreIDv2(value))


# --------------------------------------------------------------------------- StoreIDv2


def test_store_id_v2_is_resolve_of_the_openid(legacy: LegacyIdmap, graph: IdentityGraph) -> None:
    vuin = store_id(legacy, OPENID_A)
    assert vuin == 1  # first vUIN of an empty store
    resolution = asyncio.run(graph.resolve([OpenId(APP_ID, OPENID_A)]))
    assert resolution.vuin == vuin
    assert resolution.created is False
    assert graph.lookup(OpenId(APP_ID, OPENID_A)) == vuin


def test_store_id_v2_resolve_first_then_store(legacy: LegacyIdmap, graph: IdentityGraph) -> None:
    first = asyncio.run(graph.resolve([OpenId(APP_ID, OPENID_B)]))
    assert first.created is True
    assert store_id(legacy, OPENID_B) == first.vuin


@pytest.mark.parametrize("legacy_id", ["634512876234", "9F3A0C55E1B24D7A8C6E0F1D2B3A4C5",
                                       "user_7", "144115218677563300"])
def test_an_id_that_is_not_32_hex_is_the_raw_id_the_migration_made(
        legacy: LegacyIdmap, graph: IdentityGraph, legacy_id: str) -> None:
    """A channel, guild or guild-user id (digits), or any id not shaped as the platform's
    OpenIDs, is the ``raw:`` key the migration and the inbound path give it, so /getid
    answers the number a migrated channel already has (it gave a second one before)."""
    migrated = asyncio.run(graph.resolve([RawId(legacy_id)])).vuin
    assert store_id(legacy, legacy_id) == migrated
    assert graph.lookup(OpenId(APP_ID, legacy_id)) is None


def test_store_id_v2_is_stable_and_distinct(legacy: LegacyIdmap) -> None:
    a = store_id(legacy, OPENID_A)
    b = store_id(legacy, OPENID_B)
    assert a != b
    assert [store_id(legacy, OPENID_A) for _ in range(3)] == [a, a, a]
    assert store_id(legacy, OPENID_B) == b


def test_store_id_v2_keeps_case(legacy: LegacyIdmap) -> None:
    upper = store_id(legacy, "AbCdEf")
    lower = store_id(legacy, "abcdef")
    assert upper != lower
    assert legacy.RetrieveRowByIDv2(upper) == "AbCdEf"
    assert legacy.RetrieveRowByIDv2(lower) == "abcdef"


def test_store_id_v2_strips_surrounding_whitespace(legacy: LegacyIdmap) -> None:
    vuin = store_id(legacy, f"  {OPENID_A}\n")
    assert store_id(legacy, OPENID_A) == vuin
    assert legacy.RetrieveRowByIDv2(vuin) == OPENID_A


def test_store_id_v2_stable_across_reopen(identity_db_path: Path) -> None:
    store = LmdbIdentityStore(identity_db_path)
    try:
        legacy = LegacyIdmap(IdentityGraph(store), APP_ID)
        a = store_id(legacy, OPENID_A)
        b = store_id(legacy, OPENID_B)
    finally:
        store.close()

    reopened = LmdbIdentityStore(identity_db_path)
    try:
        graph = IdentityGraph(reopened)
        legacy = LegacyIdmap(graph, APP_ID)
        assert store_id(legacy, OPENID_B) == b
        assert store_id(legacy, OPENID_A) == a
        assert legacy.RetrieveRowByIDv2(a) == OPENID_A
        assert graph.lookup(OpenId(APP_ID, OPENID_A)) == a
        # nothing new was allocated by the calls after reopening
        assert store_id(legacy, "fresh") == max(a, b) + 1
        with reopened.read() as view:
            assert view.counts().identities == 3
    finally:
        reopened.close()


def test_store_id_v2_other_app_ids_are_other_people(graph: IdentityGraph) -> None:
    ours = LegacyIdmap(graph, APP_ID)
    theirs = LegacyIdmap(graph, "102000002")
    a = store_id(ours, OPENID_A)
    b = store_id(theirs, OPENID_A)
    assert a != b
    assert graph.lookup(OpenId("102000002", OPENID_A)) == b


def test_store_id_v2_takes_ruin_text_as_ruin(legacy: LegacyIdmap, graph: IdentityGraph) -> None:
    vuin = store_id(legacy, f"rUIN-QQ-0-{QQ}")
    assert graph.lookup(RUin("QQ", 0, QQ)) == vuin
    assert graph.lookup(OpenId(APP_ID, f"rUIN-QQ-0-{QQ}")) is None
    # the Base32 form, any case, names the same rUIN
    assert store_id(legacy, f"rUIN-QQ-0-{QQ_B32}") == vuin
    assert store_id(legacy, f"ruin-QQ-0-{QQ_B32.lower()}") == vuin
    # read back as the external rUIN text (Base32 id)
    assert legacy.RetrieveRowByIDv2(vuin) == f"rUIN-QQ-0-{QQ_B32}"


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (f"openid:QQ:102000002:{OPENID_A}", OpenId("102000002", OPENID_A)),
        (f"openid:QQ:{APP_ID}:{OPENID_B}", OpenId(APP_ID, OPENID_B)),
        ("union:QQ:7C1D9E2F", UnionId("7C1D9E2F")),
        ("ruin:OAuth_Github:0:583231", RUin("OAuth_Github", 0, "583231")),
        ("raw:ABC", RawId("ABC")),
    ],
)
def test_store_id_v2_takes_typed_keys_as_such(
    legacy: LegacyIdmap, graph: IdentityGraph, text: str, key: OpenId | UnionId | RUin | RawId
) -> None:
    vuin = store_id(legacy, text)
    assert graph.lookup(key) == vuin
    with graph.store.read() as view:
        assert view.identities_of(vuin) == [key.key]


def test_typed_key_of_our_app_is_the_bare_openid(legacy: LegacyIdmap) -> None:
    vuin = store_id(legacy, f"openid:QQ:{APP_ID}:{OPENID_A}")
    assert store_id(legacy, OPENID_A) == vuin
    assert legacy.RetrieveRowByIDv2(vuin) == OPENID_A


def test_retrieve_returns_typed_key_of_foreign_identities(legacy: LegacyIdmap) -> None:
    other = store_id(legacy, f"openid:QQ:102000002:{OPENID_A}")
    assert legacy.RetrieveRowByIDv2(other) == f"openid:QQ:102000002:{OPENID_A}"
    union = store_id(legacy, "union:QQ:7C1D")
    assert legacy.RetrieveRowByIDv2(union) == "union:QQ:7C1D"
    raw = store_id(legacy, "raw:legacy-thing")
    assert legacy.RetrieveRowByIDv2(raw) == "legacy-thing"


@pytest.mark.parametrize("value", ["a:b", "名字", "x.y@z"])
def test_non_openid_shaped_ids_become_raw_keys(
    legacy: LegacyIdmap, graph: IdentityGraph, value: str
) -> None:
    vuin = store_id(legacy, value)
    assert graph.lookup(RawId(value)) == vuin
    assert legacy.RetrieveRowByIDv2(vuin) == value
    assert store_id(legacy, value) == vuin


def test_id_not_openid_shaped_becomes_a_raw_key(legacy: LegacyIdmap, graph: IdentityGraph) -> None:
    vuin = store_id(legacy, "guild.123/4")
    with graph.store.read() as view:
        assert view.identities_of(vuin) == ["raw:guild.123/4"]
    assert legacy.RetrieveRowByIDv2(vuin) == "guild.123/4"


def test_id_with_inner_spaces_is_refused(legacy: LegacyIdmap, identity_store: LmdbIdentityStore) -> None:
    # identity keys never hold whitespace (the text forms stay unambiguous)
    with pytest.raises(BadInputError) as err:
        store_id(legacy, "John Smith")
    assert err.value.field == "id" and "John Smith" in err.value.message
    with identity_store.read() as view:
        assert view.counts().identities == 0


@pytest.mark.parametrize("value", ["", "   "])
def test_store_id_v2_refuses_empty(legacy: LegacyIdmap, identity_store: LmdbIdentityStore,
                                   value: str) -> None:
    with pytest.raises(BadInputError) as err:
        store_id(legacy, value)
    assert err.value.field == "id"
    with identity_store.read() as view:
        assert view.counts().identities == 0


# --------------------------------------------------------------------------- RetrieveRowByIDv2


def test_retrieve_row_returns_the_bare_openid(legacy: LegacyIdmap) -> None:
    a = store_id(legacy, OPENID_A)
    b = store_id(legacy, OPENID_B)
    assert legacy.RetrieveRowByIDv2(a) == OPENID_A
    assert legacy.RetrieveRowByIDv2(b) == OPENID_B
    assert legacy.RetrieveRowByIDv2(str(a)) == OPENID_A
    assert legacy.RetrieveRowByIDv2(f" {b} ") == OPENID_B
    result = legacy.RetrieveRowByIDv2(str(b))
    assert type(result) is str


def test_retrieve_row_prefers_an_openid_of_our_app(legacy: LegacyIdmap,
                                                    graph: IdentityGraph) -> None:
    # "openid:QQ:1:…" sorts before "openid:QQ:102000001:…"; ours must still win
    vuin = asyncio.run(graph.resolve([OpenId("1", OPENID_B), OpenId(APP_ID, OPENID_A)])).vuin
    assert legacy.RetrieveRowByIDv2(vuin) == OPENID_A


def test_retrieve_row_unknown_is_not_found(legacy: LegacyIdmap) -> None:
    store_id(legacy, OPENID_A)
    with pytest.raises(NotFoundError) as err:
        legacy.RetrieveRowByIDv2("999")
    assert "999" in err.value.message
    with pytest.raises(NotFoundError):
        legacy.RetrieveRowByIDv2(2)


@pytest.mark.parametrize("rowid", ["abc", "0", "-1", "1.5", "", str(2**63), 0, -3])
def test_retrieve_row_bad_input(legacy: LegacyIdmap, rowid: str | int) -> None:
    store_id(legacy, OPENID_A)
    with pytest.raises(BadInputError) as err:
        legacy.RetrieveRowByIDv2(rowid)
    assert err.value.field == "rowid"
    assert err.value.value == rowid


# --------------------------------------------------------------------------- UpdateVirtualValuev2


def test_update_virtual_value_moves_to_a_fresh_row(legacy: LegacyIdmap,
                                                    graph: IdentityGraph) -> None:
    old = store_id(legacy, OPENID_A)
    asyncio.run(legacy.UpdateVirtualValuev2(str(old), "5000"))
    assert store_id(legacy, OPENID_A) == 5000
    assert graph.lookup(OpenId(APP_ID, OPENID_A)) == 5000
    assert legacy.RetrieveRowByIDv2(5000) == OPENID_A
    # the old row still resolves to the same person
    assert legacy.RetrieveRowByIDv2(old) == OPENID_A
    assert graph.canonical(old) == 5000
    # and is never handed to someone new
    newcomer = store_id(legacy, OPENID_B)
    assert newcomer not in (old, 5000)


def test_update_virtual_value_merges_into_a_used_row(legacy: LegacyIdmap,
                                                     graph: IdentityGraph) -> None:
    a = store_id(legacy, OPENID_A)
    b = store_id(legacy, OPENID_B)
    asyncio.run(legacy.UpdateVirtualValuev2(a, b))
    assert store_id(legacy, OPENID_A) == b
    assert store_id(legacy, OPENID_B) == b
    with graph.store.read() as view:
        assert sorted(view.identities_of(b)) == sorted(
            [OpenId(APP_ID, OPENID_A).key, OpenId(APP_ID, OPENID_B).key]
        )
        assert view.identities_of(a) == []
    assert legacy.RetrieveRowByIDv2(a) in (OPENID_A, OPENID_B)


def test_update_virtual_value_survives_reopen(identity_db_path: Path) -> None:
    with LmdbIdentityStore(identity_db_path) as store:
        legacy = LegacyIdmap(IdentityGraph(store), APP_ID)
        old = store_id(legacy, OPENID_A)
        asyncio.run(legacy.UpdateVirtualValuev2(old, 777))
    with LmdbIdentityStore(identity_db_path) as store:
        legacy = LegacyIdmap(IdentityGraph(store), APP_ID)
        assert store_id(legacy, OPENID_A) == 777
        assert legacy.RetrieveRowByIDv2(old) == OPENID_A


def test_update_virtual_value_unknown_old_is_not_found(legacy: LegacyIdmap) -> None:
    store_id(legacy, OPENID_A)
    with pytest.raises(NotFoundError):
        asyncio.run(legacy.UpdateVirtualValuev2(42, 1))
    assert store_id(legacy, OPENID_A) == 1


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [("abc", "5", "oldRowValue"), ("0", "5", "oldRowValue"), ("1", "x", "newRowValue"),
     ("1", "0", "newRowValue")],
)
def test_update_virtual_value_bad_input(legacy: LegacyIdmap, identity_store: LmdbIdentityStore,
                                        old: str, new: str, field: str) -> None:
    store_id(legacy, OPENID_A)
    with identity_store.read() as view:
        before = view.counts()
    with pytest.raises(BadInputError) as err:
        asyncio.run(legacy.UpdateVirtualValuev2(old, new))
    assert err.value.field == field
    with identity_store.read() as view:
        assert view.counts() == before
    assert legacy.RetrieveRowByIDv2(1) == OPENID_A


# --------------------------------------------------------------------------- Pro variants


def test_store_id_v2_pro_is_two_plain_identities(legacy: LegacyIdmap,
                                                 graph: IdentityGraph) -> None:
    row, sub = asyncio.run(legacy.StoreIDv2Pro(GROUP, OPENID_A))
    assert row != sub
    assert store_id(legacy, GROUP) == row
    assert store_id(legacy, OPENID_A) == sub
    assert graph.lookup(OpenId(APP_ID, GROUP)) == row
    assert graph.lookup(OpenId(APP_ID, OPENID_A)) == sub
    # no composite key was written
    with graph.store.read() as view:
        keys = sorted(key for key, _ in view.iter_identities())
    assert keys == sorted([OpenId(APP_ID, GROUP).key, OpenId(APP_ID, OPENID_A).key])


def test_store_id_v2_pro_reuses_known_ids(legacy: LegacyIdmap) -> None:
    user = store_id(legacy, OPENID_A)
    group = store_id(legacy, GROUP)
    assert asyncio.run(legacy.StoreIDv2Pro(GROUP, OPENID_A)) == (group, user)
    # the same member in another group keeps its vUIN
    other_group, same_user = asyncio.run(legacy.StoreIDv2Pro("G2", OPENID_A))
    assert same_user == user
    assert other_group not in (group, user)


def test_retrieve_row_pro_inverts_store_pro(legacy: LegacyIdmap) -> None:
    row, sub = asyncio.run(legacy.StoreIDv2Pro(GROUP, OPENID_B))
    assert legacy.RetrieveRowByIDv2Pro(row, sub) == (GROUP, OPENID_B)
    assert legacy.RetrieveRowByIDv2Pro(str(row), str(sub)) == (GROUP, OPENID_B)


def test_retrieve_row_pro_errors(legacy: LegacyIdmap) -> None:
    row, _ = asyncio.run(legacy.StoreIDv2Pro(GROUP, OPENID_B))
    with pytest.raises(NotFoundError):
        legacy.RetrieveRowByIDv2Pro(row, 99)
    with pytest.raises(BadInputError):
        legacy.RetrieveRowByIDv2Pro("abc", row)


def test_store_id_v2_pro_bad_subid_writes_nothing(legacy: LegacyIdmap,
                                                  identity_store: LmdbIdentityStore) -> None:
    # errors.BadInputError: "nothing was read or written for it"
    with pytest.raises(BadInputError) as err:
        asyncio.run(legacy.StoreIDv2Pro(GROUP, "  "))
    assert err.value.field == "subid"
    with identity_store.read() as view:
        assert view.counts().identities == 0


# --------------------------------------------------------------------------- StoreCachev2


@pytest.fixture
def legacy_with_cache(graph: IdentityGraph, msgid_store: LmdbMsgIdStore,
                      clock: FakeClock) -> LegacyIdmap:
    return LegacyIdmap(graph, APP_ID, MsgIdMap(msgid_store, clock=clock, ttl_seconds=60))


def test_store_cache_v2_round_trip(legacy_with_cache: LegacyIdmap) -> None:
    first = asyncio.run(legacy_with_cache.StoreCachev2("ROBOT1.0_msg-a"))
    second = asyncio.run(legacy_with_cache.StoreCachev2("ROBOT1.0_msg-b"))
    again = asyncio.run(legacy_with_cache.StoreCachev2("ROBOT1.0_msg-a"))
    assert (first, second, again) == (1, 2, 1)
    assert legacy_with_cache.RetrieveRowByCachev2(first) == "ROBOT1.0_msg-a"
    assert legacy_with_cache.RetrieveRowByCachev2("2") == "ROBOT1.0_msg-b"
    record = legacy_with_cache._msgids().lookup(first)
    assert record is not None and record.app_id == APP_ID


def test_retrieve_row_by_cache_v2_unknown_expired_and_bad(
    legacy_with_cache: LegacyIdmap, clock: FakeClock
) -> None:
    vid = asyncio.run(legacy_with_cache.StoreCachev2("ROBOT1.0_msg-a"))
    with pytest.raises(NotFoundError, match="virtual message id 9"):
        legacy_with_cache.RetrieveRowByCachev2(9)
    clock.advance(61)
    with pytest.raises(NotFoundError, match=f"virtual message id {vid}"):
        legacy_with_cache.RetrieveRowByCachev2(vid)
    with pytest.raises(BadInputError) as err:
        legacy_with_cache.RetrieveRowByCachev2("abc")
    assert err.value.field == "rowid"


def test_cache_names_need_the_msgid_map(legacy: LegacyIdmap) -> None:
    with pytest.raises(StoreError, match="no message-id store"):
        asyncio.run(legacy.StoreCachev2("ROBOT1.0_msg-a"))
