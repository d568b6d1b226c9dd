"""Property test of the identity-graph invariants on every backend: a real LMDB file and a
PostgreSQL schema of its own.

A hypothesis state machine runs random resolve / bind / rebind / pick / reopen steps on a
real store and checks after every step:

- ``identity_to_vuin`` and ``vuin_to_identity`` are exact inverses;
- every identity ever stored stays reachable;
- no vUIN names two people: a model union-find joins identities exactly when the operator or
  the platform says they are one person (seen together, bind, rebind), and every identity
  set in the store must lie inside one such class;
- a fresh allocation never returns a number anybody was ever shown, and every number ever
  shown still resolves (through aliases) to an identity set of the same person.
"""

from __future__ import annotations

import asyncio
import tempfile
from contextlib import ExitStack
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from gensokyo_idmap.errors import NotFoundError
from gensokyo_idmap.identity import IdentityKey, OpenId, RUin
from gensokyo_idmap.idmap import IdentityGraph, follow_alias, openid_of_app

from .store_backends import store_factory

APP = "102"
KEYS: list[IdentityKey] = [OpenId(APP, f"U{i}") for i in range(8)] + [
    RUin("QQ", 0, str(2870338960 + i)) for i in range(4)
]
SCENES = ["QQ:102:group:G1", "QQ:102:c2c", None]


class UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, item: str) -> str:
        self.parent.setdefault(item, item)
        while self.parent[item] != item:
            self.parent[item] = self.parent[self.parent[item]]
            item = self.parent[item]
        return item

    def union(self, a: str, b: str) -> None:
        self.parent[self.find(a)] = self.find(b)


class IdentityGraphMachine(RuleBasedStateMachine):
    BACKEND = "lmdb"

    def __init__(self) -> None:
        super().__init__()
        self.cleanup = ExitStack()
        self.dir = Path(self.cleanup.enter_context(
            tempfile.TemporaryDirectory(prefix="idmap-stateful-")))
        self.open_store = self.cleanup.enter_context(store_factory(self.BACKEND, self.dir))
        self.store = self._open()
        self.graph = IdentityGraph(self.store)
        self.people = UnionFind()
        self.stored: set[str] = set()
        self.shown: dict[int, str] = {}  # every vUIN ever handed out -> a key it named

    def _open(self):  # type: ignore[no-untyped-def]
        # LMDB starts small so the machine also crosses map growth
        return self.open_store(map_size=64 * 1024) if self.BACKEND == "lmdb" else self.open_store()

    def teardown(self) -> None:
        try:
            self.store.close()
        finally:
            self.cleanup.close()

    def _vuin_of(self, key: str) -> int:
        with self.store.read() as view:
            found = view.vuin_of(key)
        assert found is not None, f"{key} became unreachable"
        return found

    @rule(
        picks=st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True),
        scene=st.sampled_from(SCENES),
    )
    def resolve(self, picks: list[IdentityKey], scene: str | None) -> None:
        result = asyncio.run(self.graph.resolve(picks, scene=scene))
        if result.created:
            assert result.vuin not in self.shown, f"vUIN {result.vuin} handed out twice"
        conflicted = {key for key, _ in result.conflicts}
        together = [key.key for key in picks if key.key not in conflicted]
        for key in together:  # seen together and now on one vUIN: one person
            assert self._vuin_of(key) == result.vuin
            self.people.union(key, together[0])
            self.stored.add(key)
        self.shown.setdefault(result.vuin, together[0])

    @rule(key=st.sampled_from(KEYS), number=st.integers(min_value=1, max_value=24))
    def bind(self, key: IdentityKey, number: int) -> None:
        with self.store.read() as view:
            final = follow_alias(view, number)
            others = view.identities_of(final)
        result = asyncio.run(self.graph.bind(key, number))
        assert result.vuin == final
        assert self._vuin_of(key.key) == final
        if others:
            self.people.union(key.key, others[0])
        self.stored.add(key.key)
        self.shown.setdefault(final, key.key)
        if result.aliased is not None:
            self.shown.setdefault(result.aliased, key.key)

    @precondition(lambda self: bool(self.shown))
    @rule(data=st.data(), new=st.integers(min_value=1, max_value=24))
    def rebind(self, data: st.DataObject, new: int) -> None:
        old = data.draw(st.sampled_from(sorted(self.shown)))
        with self.store.read() as view:
            source = follow_alias(view, old)
            moving = view.identities_of(source)
            target = follow_alias(view, new)
            staying = view.identities_of(target)
        try:
            result = asyncio.run(self.graph.rebind(old, new))
        except NotFoundError:
            assert not moving
            return
        if source == target:
            assert result.outcome == "skipped"
            return
        assert set(result.moved) == set(moving)
        for key in moving:
            assert self._vuin_of(key) == target
        if staying:
            self.people.union(moving[0], staying[0])
        self.shown.setdefault(target, moving[0])

    @precondition(lambda self: bool(self.shown))
    @rule(data=st.data(), scene=st.sampled_from(SCENES))
    def pick(self, data: st.DataObject, scene: str | None) -> None:
        vuin = data.draw(st.sampled_from(sorted(self.shown)))
        with self.store.read() as view:
            final = follow_alias(view, vuin)
            identities = view.identities_of(final)
        try:
            key = self.graph.pick_identity(vuin, scene=scene, usable=openid_of_app(APP))
        except NotFoundError:
            assert not any(k.startswith("openid:") for k in identities)
            return
        assert key.key in identities
        assert isinstance(key, OpenId) and key.app_id == APP

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = self._open()
        self.graph = IdentityGraph(self.store)

    @invariant()
    def tables_are_exact_inverses(self) -> None:
        with self.store.read() as view:
            forward = set(view.iter_identities())
            reverse = {(key, vuin) for vuin, key in view.iter_vuin_sets()}
        assert forward == reverse

    @invariant()
    def every_identity_stays_reachable(self) -> None:
        with self.store.read() as view:
            forward = dict(view.iter_identities())
        assert self.stored <= forward.keys()

    @invariant()
    def no_vuin_names_two_people(self) -> None:
        with self.store.read() as view:
            sets: dict[int, set[str]] = {}
            for vuin, key in view.iter_vuin_sets():
                sets.setdefault(vuin, set()).add(key)
            for vuin, keys in sets.items():
                classes = {self.people.find(k) for k in keys}
                assert len(classes) == 1, f"vUIN {vuin} names {keys}"
            for vuin, key in self.shown.items():
                final = follow_alias(view, vuin)
                holders = sets.get(final, set())
                if holders:
                    assert self.people.find(next(iter(holders))) == self.people.find(key), (
                        f"vUIN {vuin} was shown for {key} but now resolves to {holders}"
                    )
                else:
                    # an empty number must not be handed out again: it was shown to someone
                    assert vuin in self.shown


class PostgresIdentityGraphMachine(IdentityGraphMachine):
    BACKEND = "postgres"


IdentityGraphMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestIdentityGraph = IdentityGraphMachine.TestCase
# fewer runs: each makes a schema and a connection pool (the same rules, another engine)
PostgresIdentityGraphMachine.TestCase.settings = settings(
    IdentityGraphMachine.TestCase.settings, max_examples=30)
TestIdentityGraphOnPostgres = PostgresIdentityGraphMachine.TestCase
