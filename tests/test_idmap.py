"""The identity graph rules (DESIGN §3–§4) on every backend: a real LMDB file, and a
PostgreSQL schema of the test's own."""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from gensokyo_idmap.errors import BadInputError, NotFoundError, NoUsableIdentityError
from gensokyo_idmap.identity import OpenId, RawId, RUin, UnionId
from gensokyo_idmap.idmap import IdentityGraph, _apply_resolution, openid_of_app
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore

from .conftest import APP_ID, FakeClock, run
from . import store_backends
from .store_backends import StoreFactory

# the fixtures, one run per backend
open_store = store_backends.open_store
identity_store = store_backends.identity_store

AnyStore = Any  # the store of any backend (the fixtures above open one per backend)

ALICE = OpenId(APP_ID, "A11CE000000000000000000000000000")
BOB = OpenId(APP_ID, "B0B00000000000000000000000000000")
CAROL = OpenId(APP_ID, "CA201000000000000000000000000000")
ALICE_QQ = RUin("QQ", 0, "2870338968")
OTHER_APP_ALICE = OpenId("102999999", "A11CE999999999999999999999999999")
GROUP_SCENE = f"QQ:{APP_ID}:group:G1"
C2C_SCENE = f"QQ:{APP_ID}:c2c"


def counts(store: AnyStore):  # type: ignore[no-untyped-def]
    with store.read() as view:
        return view.counts()


# --- resolve ------------------------------------------------------------------------------


def test_new_identity_gets_the_next_vuin_and_keeps_it(graph: IdentityGraph) -> None:
    first = run(graph.resolve([ALICE]))
    second = run(graph.resolve([BOB]))
    again = run(graph.resolve([ALICE]))
    assert (first.vuin, first.created) == (1, True)
    assert (second.vuin, second.created) == (2, True)
    assert (again.vuin, again.created) == (1, False)
    assert graph.lookup(ALICE) == 1 and graph.lookup(BOB) == 2


def test_known_identity_in_known_scene_writes_nothing(
    graph: IdentityGraph, identity_store: AnyStore
) -> None:
    run(graph.resolve([ALICE], scene=GROUP_SCENE))
    before = identity_store.commit_stats
    for _ in range(5):
        assert run(graph.resolve([ALICE], scene=GROUP_SCENE)).vuin == 1
    assert identity_store.commit_stats == before


def test_new_scene_records_last_seen_once(
    graph: IdentityGraph, identity_store: AnyStore, clock: FakeClock
) -> None:
    run(graph.resolve([ALICE], scene=GROUP_SCENE))
    clock.advance(60)
    run(graph.resolve([ALICE], scene=C2C_SCENE))
    view = graph.show(1)
    assert dict(view.last_seen)[C2C_SCENE].identity == ALICE.key
    assert dict(view.last_seen)[C2C_SCENE].since == clock.now
    assert dict(view.last_seen)[GROUP_SCENE].since == clock.now - 60
    before = identity_store.commit_stats
    clock.advance(60)
    run(graph.resolve([ALICE], scene=C2C_SCENE))
    assert identity_store.commit_stats == before  # unchanged last_seen is not rewritten


def test_scene_identity_change_is_recorded(graph: IdentityGraph) -> None:
    run(graph.resolve([ALICE, ALICE_QQ], scene=GROUP_SCENE))
    run(graph.resolve([ALICE, ALICE_QQ], scene=GROUP_SCENE, scene_identity=ALICE_QQ))
    assert dict(graph.show(1).last_seen)[GROUP_SCENE].identity == ALICE_QQ.key


def test_keys_seen_together_join_the_known_one(graph: IdentityGraph) -> None:
    run(graph.resolve([ALICE]))
    result = run(graph.resolve([ALICE_QQ, ALICE]))
    assert (result.vuin, result.created, result.added) == (1, False, (ALICE_QQ.key,))
    assert graph.show(1).identities == tuple(sorted([ALICE.key, ALICE_QQ.key]))


def test_keys_of_two_vuins_seen_together_are_not_merged(graph: IdentityGraph) -> None:
    run(graph.resolve([ALICE]))
    run(graph.resolve([BOB]))
    with capture_logs() as logs:
        result = run(IdentityGraph(graph.store).resolve([ALICE, BOB, CAROL]))
    assert result.vuin == 1
    assert result.conflicts == ((BOB.key, 2),)
    assert graph.lookup(BOB) == 2 and graph.lookup(CAROL) == 1
    assert any(e["event"] == "[idmap] identity conflict" and e["key"] == BOB.key for e in logs)


def test_concurrent_resolves_of_one_new_key_agree(graph: IdentityGraph) -> None:
    async def many() -> set[int]:
        results = await asyncio.gather(*(graph.resolve([ALICE]) for _ in range(50)))
        return {r.vuin for r in results}

    assert run(many()) == {1}
    assert graph.show(1).identities == (ALICE.key,)


def test_a_missed_resolve_reads_its_keys_in_the_write(graph: IdentityGraph,
                                                      identity_store: AnyStore) -> None:
    """``missed=True`` (known() just said None) goes straight to the write; whatever
    happened meanwhile, the write's own reads give the same answers as a plain resolve."""
    assert graph.known([ALICE], GROUP_SCENE) is None
    created = run(graph.resolve([ALICE], scene=GROUP_SCENE, missed=True))
    assert (created.vuin, created.created, created.added) == (1, True, (ALICE.key,))
    # created meanwhile by someone else: found, nothing allocated
    again = run(graph.resolve([ALICE], scene=GROUP_SCENE, missed=True))
    assert (again.vuin, again.created, again.added) == (1, False, ())
    # a known person in a new scene: last_seen written there
    elsewhere = run(graph.resolve([ALICE], scene=C2C_SCENE, missed=True))
    assert (elsewhere.vuin, elsewhere.created) == (1, False)
    assert graph.known([ALICE], C2C_SCENE) == 1
    assert counts(identity_store).identities == 1


def test_a_missed_resolve_does_not_ask_the_store_again(tmp_path: Path) -> None:
    """The inbound bridge asks known() for everyone of a batch, then resolves the misses:
    a new person costs one probe, not two."""
    class CountingProbes(LmdbIdentityStore):
        probes = 0

        def probe(self, key: str, scene: str | None) -> tuple[int | None, bool]:
            self.probes += 1
            return super().probe(key, scene)

    store = CountingProbes(tmp_path / "openid-map.db")
    try:
        graph = IdentityGraph(store)
        assert graph.known([ALICE], GROUP_SCENE) is None
        assert run(graph.resolve([ALICE], scene=GROUP_SCENE, missed=True)).created
        assert store.probes == 1
        assert run(graph.resolve([BOB], scene=GROUP_SCENE)).created  # not missed: asked
        assert store.probes == 2
    finally:
        store.close()


def test_allocation_skips_numbers_in_use(graph: IdentityGraph) -> None:
    run(graph.bind(CAROL, 2))  # an operator picked number 2 for Carol
    assert run(graph.resolve([ALICE])).vuin == 1
    assert run(graph.resolve([BOB])).vuin == 3


def test_allocation_skips_a_number_bound_in_the_same_batch(
        graph: IdentityGraph, identity_store: AnyStore) -> None:
    """A bind to the next free number and new identities share one transaction (written
    in one loop turn: resolve's own writes, submitted where resolve submits them, since on
    PostgreSQL resolve first waits a turn for its lookup): the allocations see the bind,
    whatever a backend remembers of the numbers."""
    async def create(key: OpenId) -> int:
        return (await identity_store.write(partial(
            _apply_resolution, keys=[key.key], scene=None, scene_key=key.key, now=0.0))).vuin

    async def together() -> tuple[int, ...]:
        bound, *created = await asyncio.gather(graph.bind(CAROL, 1), create(ALICE),
                                               create(BOB))
        return (bound.vuin, *created)

    batches = identity_store.commit_stats[0]
    assert run(together()) == (1, 2, 3)
    assert identity_store.commit_stats[0] == batches + 1


def test_create_and_hit_are_logged(identity_store: AnyStore) -> None:
    with capture_logs() as logs:
        graph = IdentityGraph(identity_store)
        run(graph.resolve([ALICE]))
        run(graph.resolve([ALICE]))
    assert {"event": "[idmap] identity create", "key": ALICE.key, "vuin": 1,
            "log_level": "info"} in logs
    assert {"event": "[idmap] identity hit", "key": ALICE.key, "vuin": 1,
            "log_level": "debug"} in logs


@pytest.mark.parametrize(
    ("keys", "scene", "field"),
    [([], None, "keys"), ([ALICE], "", "scene"), ([ALICE], "x" * 401, "scene")],
)
def test_bad_resolve_input_writes_nothing(
    graph: IdentityGraph, identity_store: AnyStore, keys, scene, field  # type: ignore[no-untyped-def]
) -> None:
    before = counts(identity_store)
    with pytest.raises(BadInputError) as err:
        run(graph.resolve(keys, scene=scene))
    assert err.value.field == field
    assert counts(identity_store) == before


def test_scene_identity_must_be_one_of_the_keys(graph: IdentityGraph) -> None:
    with pytest.raises(BadInputError, match="scene_identity"):
        run(graph.resolve([ALICE], scene=GROUP_SCENE, scene_identity=BOB))
    assert graph.lookup(ALICE) is None


# --- bind / rebind ------------------------------------------------------------------------


def test_bind_appends_and_skips_when_already_there(identity_store: AnyStore) -> None:
    with capture_logs() as logs:
        graph = IdentityGraph(identity_store)
        run(graph.resolve([ALICE]))
        moved = run(graph.bind(ALICE_QQ, 1))
        skipped = run(graph.bind(ALICE_QQ, 1))
    assert (moved.outcome, moved.previous, moved.vuin) == ("moved", None, 1)
    assert skipped.outcome == "skipped"
    assert graph.show(1).identities == tuple(sorted([ALICE.key, ALICE_QQ.key]))
    events = [e["event"] for e in logs]
    assert "[idmap] bind moved" in events and "[idmap] bind skipped" in events


def test_bind_moves_one_identity_and_leaves_the_rest(graph: IdentityGraph) -> None:
    run(graph.resolve([ALICE, ALICE_QQ], scene=GROUP_SCENE, scene_identity=ALICE_QQ))
    run(graph.resolve([BOB]))
    result = run(graph.bind(ALICE_QQ, 2))
    assert (result.previous, result.vuin, result.aliased) == (1, 2, None)
    assert graph.show(1).identities == (ALICE.key,)
    assert graph.show(1).last_seen == ()  # the moved identity no longer speaks for vUIN 1
    assert graph.show(2).identities == tuple(sorted([BOB.key, ALICE_QQ.key]))


def test_bind_of_the_last_identity_leaves_an_alias(graph: IdentityGraph) -> None:
    run(graph.resolve([ALICE]))
    run(graph.resolve([BOB]))
    result = run(graph.bind(ALICE, 2))
    assert result.aliased == 1
    assert graph.canonical(1) == 2
    assert graph.show(1).requested == 1 and graph.show(1).vuin == 2
    assert run(graph.resolve([CAROL])).vuin == 3  # 1 is never handed to anyone else


def test_bind_to_an_alias_lands_on_its_target(graph: IdentityGraph) -> None:
    run(graph.resolve([ALICE]))
    run(graph.rebind(1, 50))
    assert run(graph.bind(ALICE_QQ, 1)).vuin == 50
    assert graph.lookup(ALICE_QQ) == 50


def test_bind_refuses_bad_vuin_and_logs_failed(identity_store: AnyStore) -> None:
    with capture_logs() as logs:
        graph = IdentityGraph(identity_store)
        with pytest.raises(BadInputError, match="vuin"):
            run(graph.bind(ALICE, 0))
    assert graph.lookup(ALICE) is None
    failed = [e for e in logs if e["event"] == "[idmap] bind failed"]
    assert failed and "vUIN must be" in failed[0]["reason"]


def test_rebind_moves_the_whole_set_and_keeps_the_old_number(graph: IdentityGraph) -> None:
    run(graph.resolve([ALICE, ALICE_QQ], scene=GROUP_SCENE))
    result = run(graph.rebind(1, 2870338968))
    assert result.outcome == "moved" and set(result.moved) == {ALICE.key, ALICE_QQ.key}
    assert graph.lookup(ALICE) == graph.lookup(ALICE_QQ) == 2870338968
    view = graph.show(1)
    assert view.vuin == 2870338968 and view.aliases == (1,)
    assert dict(view.last_seen)[GROUP_SCENE].identity == ALICE.key
    assert graph.pick_identity(1, usable=openid_of_app(APP_ID)) == ALICE


def test_rebind_chains_stay_one_hop(graph: IdentityGraph, identity_store: AnyStore) -> None:
    run(graph.resolve([ALICE]))
    run(graph.rebind(1, 10))
    run(graph.rebind(10, 20))
    with identity_store.read() as view:
        assert dict(view.iter_aliases()) == {1: 20, 10: 20}
    assert graph.show(20).aliases == (1, 10)


def test_rebind_into_own_alias_is_skipped(graph: IdentityGraph) -> None:
    run(graph.resolve([ALICE]))
    run(graph.rebind(1, 10))
    assert run(graph.rebind(10, 1)).outcome == "skipped"
    assert graph.lookup(ALICE) == 10


def test_rebind_of_unknown_vuin_fails_and_changes_nothing(
    identity_store: AnyStore,
) -> None:
    with capture_logs() as logs:
        graph = IdentityGraph(identity_store)
        run(graph.resolve([ALICE]))
        before = counts(identity_store)
        with pytest.raises(NotFoundError, match="vUIN 7"):
            run(graph.rebind(7, 1))
    assert counts(identity_store) == before
    assert any(e["event"] == "[idmap] bind failed" for e in logs)


# --- reverse path -------------------------------------------------------------------------


def test_explicit_identity_wins(graph: IdentityGraph) -> None:
    run(graph.resolve([ALICE]))
    assert graph.pick_identity(1, GROUP_SCENE, explicit=ALICE_QQ) == ALICE_QQ


def test_last_seen_of_the_scene_beats_set_order(graph: IdentityGraph) -> None:
    second = OpenId(APP_ID, "00000000000000000000000000000001")  # sorts first in the set
    run(graph.resolve([ALICE, second], scene=GROUP_SCENE))
    usable = openid_of_app(APP_ID)
    assert graph.pick_identity(1, GROUP_SCENE, usable=usable) == ALICE
    assert graph.pick_identity(1, C2C_SCENE, usable=usable) == second


def test_last_seen_not_usable_falls_back_to_a_usable_one(graph: IdentityGraph) -> None:
    run(graph.resolve([ALICE_QQ, ALICE], scene=GROUP_SCENE))  # last seen: the rUIN
    assert graph.pick_identity(1, GROUP_SCENE, usable=openid_of_app(APP_ID)) == ALICE


def test_no_usable_identity_is_a_typed_error_without_the_set(graph: IdentityGraph) -> None:
    run(graph.resolve([OTHER_APP_ALICE, ALICE_QQ, UnionId("U1"), RawId("legacy")]))
    with pytest.raises(NoUsableIdentityError) as err:
        graph.pick_identity(1, GROUP_SCENE, usable=openid_of_app(APP_ID))
    message = err.value.message
    assert "vUIN 1" in message and APP_ID in message
    assert OTHER_APP_ALICE.openid not in message and ALICE_QQ.id not in message
    # the AppID the person is known to (another bot of the daemon can reach them)
    assert message.endswith(f"; its OpenIDs are of AppID {OTHER_APP_ALICE.app_id}")


def test_unknown_vuin_is_not_found(graph: IdentityGraph) -> None:
    with pytest.raises(NotFoundError, match="vUIN 42"):
        graph.pick_identity(42)
    with pytest.raises(NotFoundError):
        graph.show(42)
    assert graph.canonical(42) is None


def test_graph_survives_reopen(open_store: StoreFactory, clock: FakeClock) -> None:
    store = open_store()
    graph = IdentityGraph(store, clock=clock)
    run(graph.resolve([ALICE, ALICE_QQ], scene=GROUP_SCENE))
    run(graph.rebind(1, 99))
    store.close()
    store = open_store()
    try:
        graph = IdentityGraph(store, clock=clock)
        assert graph.lookup(ALICE) == 99
        assert graph.canonical(1) == 99
        assert run(graph.resolve([BOB])).vuin == 2
    finally:
        store.close()


def test_seen_counts_counts_each_groups_members_in_one_walk(graph: IdentityGraph) -> None:
    """Members last seen in each group scene, the group's own OpenID not among them, in
    agreement with what seen_in_scenes finds for one scene (both backends)."""
    scenes = f"QQ:{APP_ID}:group:"
    g1, g12 = OpenId(APP_ID, "G1"), OpenId(APP_ID, "G12")  # one scene a prefix of the other
    run(graph.resolve([g1], scene=scenes + "G1"))
    run(graph.resolve([g12], scene=scenes + "G12"))
    for person, scene in [(ALICE, "G1"), (BOB, "G1"), (ALICE, "G12"), (CAROL, "G12")]:
        run(graph.resolve([person], scene=scenes + scene))
    run(graph.resolve([CAROL], scene=C2C_SCENE))  # not a group scene: not counted
    run(graph.resolve([OTHER_APP_ALICE], scene=scenes + "G1"))  # another AppID's key
    key_prefix = f"openid:QQ:{APP_ID}:"
    counts = graph.seen_counts(key_prefix, scenes)
    assert counts == {scenes + "G1": 2, scenes + "G12": 2}
    for name in ("G1", "G12"):
        one = [key for key, _, _ in graph.seen_in_scenes(key_prefix, lambda _: scenes + name,
                                                         100) if key != f"{key_prefix}{name}"]
        assert len(one) == counts[scenes + name]
