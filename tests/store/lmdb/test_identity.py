"""openid-map.db on LMDB: tables, schema versions, growth, the file itself (what every backend
must do is in test_identity_contract.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import lmdb
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap.errors import NotFoundError, SchemaVersionError, StoreError
from gensokyo_idmap.idmap import allocate_vuin
from gensokyo_idmap.store.base import IdentityWriter, LastSeen
from gensokyo_idmap.store.lmdb.codec import decode_value, encode_u64, encode_value
from gensokyo_idmap.store.lmdb.identity import TABLES as STORE_TABLES
from gensokyo_idmap.store.lmdb.identity import (
    SCHEMA_VERSION,
    LmdbIdentityStore,
    LmdbView,
    _last_seen_value,
)

TABLES = {b"meta", b"identity_to_vuin", b"vuin_to_identity", b"last_seen", b"vuin_alias",
          b"seen_by_scene", b"config", b"UserInfo"}


def raw_env(path: Path) -> lmdb.Environment:
    return lmdb.open(str(path), subdir=False, max_dbs=16)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_new_store_has_every_table_and_the_schema_version(identity_db_path: Path) -> None:
    LmdbIdentityStore(identity_db_path).close()
    env = raw_env(identity_db_path)
    try:
        with env.begin() as txn:
            names = {key for key, _ in txn.cursor()}
            assert TABLES <= names
            meta = env.open_db(b"meta", txn=txn, create=False)
            assert decode_value(txn.get(b"schema_version", db=meta)) == SCHEMA_VERSION
            dup = env.open_db(b"vuin_to_identity", txn=txn, create=False)
            assert dup.flags()["dupsort"] is True
    finally:
        env.close()


def test_vuins_are_8_byte_big_endian_keys(identity_db_path: Path) -> None:
    store = LmdbIdentityStore(identity_db_path)
    store.write_sync(lambda w: (w.set_vuin("raw:x", 258), w.add_identity(258, "raw:x")))
    store.close()
    env = raw_env(identity_db_path)
    try:
        with env.begin() as txn:
            forward = env.open_db(b"identity_to_vuin", txn=txn, create=False)
            reverse = env.open_db(b"vuin_to_identity", txn=txn, create=False)
            assert txn.get(b"raw:x", db=forward) == b"\x00" * 6 + b"\x01\x02"
            assert txn.get(encode_u64(258), db=reverse) == b"raw:x"
    finally:
        env.close()


@given(identity=st.text(max_size=300), since=st.floats() | st.integers(0, 2**40))
def test_a_last_seen_value_is_what_cbor2_writes(identity: str, since: float) -> None:
    """The writer builds the cbor of [identity, since] by hand for a finite float: the bytes
    must be cbor2's, whatever the text's length (the header grows at 24 and 256 bytes) and
    the number (NaN, infinities and integers take cbor2's own path)."""
    assert _last_seen_value(identity, since) == encode_value([identity, since])


def test_last_seen_reads_back_what_was_written(identity_db_path: Path) -> None:
    store = LmdbIdentityStore(identity_db_path)
    try:
        seen = LastSeen("openid:QQ:1:" + "U" * 40, 1_764_000_000.123456)
        store.write_sync(lambda w: w.set_last_seen(7, "QQ:1:group:G", seen))
        with store.read() as view:
            assert view.last_seen(7, "QQ:1:group:G") == seen
            assert view.last_seen_all(7) == [("QQ:1:group:G", seen)]
    finally:
        store.close()


def _entries(path: Path) -> dict[bytes, list[tuple[bytes, bytes]]]:
    env = raw_env(path)
    try:
        with env.begin() as txn:
            return {name: [(bytes(k), bytes(v)) for k, v in
                           txn.cursor(env.open_db(name, txn=txn, create=False))]
                    for name in (b"identity_to_vuin", b"vuin_to_identity", b"last_seen")}
    finally:
        env.close()


@pytest.mark.parametrize(("scene", "since"), [("QQ:1:group:G", 1_764_000_000.25),
                                              (None, 1.0), ("QQ:1:c2c:字", 7)])
def test_add_person_writes_what_the_three_writes_write(tmp_path: Path, scene: str | None,
                                                       since: float) -> None:
    """The LMDB view does a new person's writes at once; the bytes must be those of the
    protocol's own spelling (set_vuin, add_identity, set_last_seen)."""
    key = "openid:QQ:1:" + "U" * 40
    paths = tmp_path / "fast.db", tmp_path / "spelled.db"
    for path, add in zip(paths, (LmdbView.add_person, IdentityWriter.add_person), strict=True):
        store = LmdbIdentityStore(path)
        store.write_sync(lambda w, add=add: add(w, key, 258, scene, since))  # type: ignore[misc]
        store.close()
    fast, spelled = (_entries(path) for path in paths)
    assert fast == spelled
    assert len(fast[b"last_seen"]) == (scene is not None)


def test_allocation_skips_numbers_taken_after_it_looked(identity_db_path: Path) -> None:
    """The view reads where the unused numbers start once per transaction; every number
    its writes take afterwards (an identity, an alias, a new person, a bulk loader's raw
    put) must still be skipped by the next allocation in the same transaction."""
    store = LmdbIdentityStore(identity_db_path)

    def allocate_around_writes(view: LmdbView) -> list[int]:
        got = [allocate_vuin(view)]  # 1: empty tables, nothing to skip
        view.add_identity(2, "raw:bound")  # a bind to the next number
        view.set_alias(3, 1)  # an alias from the one after
        got.append(allocate_vuin(view))  # 4
        view.add_person("raw:person", 5, None, 0.0)
        got.append(allocate_vuin(view))  # 6
        txn, tables = view.bulk_handles()
        txn.put(encode_u64(7), b"raw:loaded", db=tables.vuin_to_identity)
        got.append(allocate_vuin(view))  # 8
        return got

    try:
        assert store.transact(allocate_around_writes, commit=False) == [1, 4, 6, 8]
    finally:
        store.close()


def test_add_person_refuses_a_long_scene_before_writing(identity_db_path: Path) -> None:
    """A refused write leaves the batch it shares untouched (the store's contract)."""
    store = LmdbIdentityStore(identity_db_path)

    def refused_then_read(view: LmdbView) -> tuple[int | None, bool]:
        with pytest.raises(ValueError, match="scene"):
            view.add_person("raw:new", 2, "s" * 401, 1.0)
        return view.vuin_of("raw:new"), view.has_identities(2)

    try:
        assert store.transact(refused_then_read, commit=False) == (None, False)
    finally:
        store.close()


def _set_schema(path: Path, version: int) -> None:
    env = raw_env(path)
    with env.begin(write=True) as txn:
        meta = env.open_db(b"meta", txn=txn)
        txn.put(b"schema_version", encode_value(version), db=meta)
    env.close()


def test_newer_schema_is_refused_and_the_file_is_untouched(identity_db_path: Path) -> None:
    LmdbIdentityStore(identity_db_path).close()
    _set_schema(identity_db_path, SCHEMA_VERSION + 1)
    before = sha(identity_db_path)
    with pytest.raises(SchemaVersionError) as err:
        LmdbIdentityStore(identity_db_path)
    assert f"schema_version {SCHEMA_VERSION + 1}" in err.value.message
    assert "newer gensokyo-idmap" in err.value.message
    assert sha(identity_db_path) == before


def test_unversioned_store_is_upgraded(identity_db_path: Path) -> None:
    env = raw_env(identity_db_path)
    with env.begin(write=True) as txn:
        forward = env.open_db(b"identity_to_vuin", txn=txn)
        txn.put(b"openid:QQ:1:AAA", encode_u64(7), db=forward)
        txn.put(b"openid:QQ:1:BBB", encode_u64(3), db=forward)
    env.close()
    store = LmdbIdentityStore(identity_db_path)
    try:
        with store.read() as view:
            assert view.identities_of(7) == ["openid:QQ:1:AAA"]
            assert view.identities_of(3) == ["openid:QQ:1:BBB"]
            assert view.vuin_counter() == 7
    finally:
        store.close()
    store = LmdbIdentityStore(identity_db_path)  # already upgraded: opens as is
    store.close()


def test_upgrade_steps_run_in_order(identity_db_path: Path) -> None:
    LmdbIdentityStore(identity_db_path).close()  # the current version
    ran: list[int] = []

    def step(version: int):  # type: ignore[no-untyped-def]
        def apply(view: LmdbView) -> None:
            ran.append(version)
            view.set_vuin_counter(view.vuin_counter() + 10 ** (version - SCHEMA_VERSION + 1))
        return apply

    now, later = SCHEMA_VERSION, SCHEMA_VERSION + 1
    upgrades = {now: step(now), later: step(later)}
    store = LmdbIdentityStore(identity_db_path, schema_version=now + 2, upgrades=upgrades)
    with store.read() as view:
        assert view.vuin_counter() == 110
    store.close()
    assert ran == [now, later]
    store = LmdbIdentityStore(identity_db_path, schema_version=now + 2, upgrades=upgrades)
    store.close()
    assert ran == [now, later]  # nothing to do the second time


def test_missing_upgrade_step_is_an_error(identity_db_path: Path) -> None:
    LmdbIdentityStore(identity_db_path).close()
    with pytest.raises(StoreError, match=f"no upgrade from schema_version {SCHEMA_VERSION}"):
        LmdbIdentityStore(identity_db_path, schema_version=SCHEMA_VERSION + 1, upgrades={})


def test_a_version_1_store_gets_its_scene_index(identity_db_path: Path) -> None:
    """schema_version 1 had no ``seen_by_scene``: the upgrade builds it from last_seen, so
    the chats seen before the upgrade are listed after it."""
    env = raw_env(identity_db_path)
    with env.begin(write=True) as txn:
        dbs = {t.name: env.open_db(t.name, txn=txn, dupsort=t.dupsort) for t in STORE_TABLES
               if t.name != b"seen_by_scene"}
        for vuin, key in ((1, b"raw:a"), (2, b"raw:b")):
            txn.put(key, encode_u64(vuin), db=dbs[b"identity_to_vuin"])
            txn.put(encode_u64(vuin), key, db=dbs[b"vuin_to_identity"])
        for vuin, scene in ((1, b"QQ:1:group:G"), (2, b"QQ:1:group:G"), (2, b"QQ:1:c2c:b")):
            txn.put(encode_u64(vuin) + scene, encode_value(["raw:x", 1.0]),
                    db=dbs[b"last_seen"])
        txn.put(b"schema_version", encode_value(1), db=dbs[b"meta"])
        txn.put(b"vuin_counter", encode_value(2), db=dbs[b"meta"])
    env.close()
    store = LmdbIdentityStore(identity_db_path)
    try:
        with store.read() as view:
            assert view.scenes_after("QQ:1:", None, 10) == [("QQ:1:c2c:b", 1),
                                                             ("QQ:1:group:G", 2)]
            assert [vuin for vuin, _ in view.seen_in("QQ:1:group:G", None, 10)] == [1, 2]
            assert view.get_meta("schema_version") == SCHEMA_VERSION
    finally:
        store.close()


def test_readonly_open_creates_nothing_and_never_upgrades(identity_db_path: Path) -> None:
    """readonly=True (the read-only CLI commands): a missing file is NotFoundError with
    nothing created; a file that needs an upgrade is refused, not upgraded; a current one
    reads, and a write through it fails without changing the file."""
    with pytest.raises(NotFoundError, match="no store at"):
        LmdbIdentityStore(identity_db_path, readonly=True)
    assert list(identity_db_path.parent.iterdir()) == []
    env = raw_env(identity_db_path)  # schema 0: no schema_version, identities present
    with env.begin(write=True) as txn:
        for name in TABLES:
            env.open_db(name, txn=txn, dupsort=name == b"vuin_to_identity")
        txn.put(b"openid:QQ:1:AAA", encode_u64(7),
                db=env.open_db(b"identity_to_vuin", txn=txn))
    env.close()
    before = sha(identity_db_path)
    with pytest.raises(StoreError, match="schema_version 0 and needs an upgrade"):
        LmdbIdentityStore(identity_db_path, readonly=True)
    assert sha(identity_db_path) == before
    LmdbIdentityStore(identity_db_path).close()  # a writer upgrades it
    before = sha(identity_db_path)
    store = LmdbIdentityStore(identity_db_path, readonly=True)
    try:
        with store.read() as view:
            assert view.identities_of(7) == ["openid:QQ:1:AAA"]
        with pytest.raises(StoreError):
            store.write_sync(lambda w: w.set_vuin("raw:x", 8))
    finally:
        store.close()
    assert sha(identity_db_path) == before


def test_map_grows_by_itself(identity_db_path: Path) -> None:
    store = LmdbIdentityStore(identity_db_path, map_size=64 * 1024)
    start = store.map_size

    def fill(batch: int):  # type: ignore[no-untyped-def]
        def apply(w: IdentityWriter) -> None:
            for i in range(500):
                key = f"raw:{batch}-{i}-" + "x" * 100
                w.set_vuin(key, batch * 1000 + i + 1)
                w.add_identity(batch * 1000 + i + 1, key)
        return apply

    for batch in range(10):
        store.write_sync(fill(batch))
    assert store.map_size > start
    store.close()
    store = LmdbIdentityStore(identity_db_path, map_size=64 * 1024)
    try:
        with store.read() as view:
            assert view.counts().identities == 5000
    finally:
        store.close()


def test_unopenable_path_is_a_store_error(tmp_path: Path) -> None:
    target = tmp_path / "not-a-db"
    target.write_bytes(b"this is not an lmdb file" * 1000)
    with pytest.raises(StoreError, match="not-a-db"):
        LmdbIdentityStore(target)


def _person(n: int) -> str:
    return f"openid:QQ:1:U{n:040d}"


def test_probe_holds_the_answers_of_the_newest_snapshot_only(identity_db_path: Path) -> None:
    """Answers read while nothing was committed are kept (one per person, the scene last
    asked about); the first probe after a commit drops them all, so what is held is what
    was asked since the last commit, not everyone a flood brought (issue 36.4)."""
    store = LmdbIdentityStore(identity_db_path)
    scene, other = "QQ:1:group:G", "QQ:1:group:H"

    def people(w: IdentityWriter) -> None:
        for n in range(1, 101):
            w.set_vuin(_person(n), n)
            w.set_last_seen(n, scene, LastSeen(_person(n), 1.0))

    try:
        store.write_sync(people)
        assert [store.probe(_person(n), scene) for n in range(1, 101)] == [
            (n, True) for n in range(1, 101)]
        assert len(store._answers[1]) == 100  # noqa: SLF001
        # one person asked about in two chats in turn: each answer is that chat's
        assert [store.probe(_person(1), s) for s in (other, scene, other, None)] == [
            (1, False), (1, True), (1, False), (1, False)]
        assert len(store._answers[1]) == 100  # noqa: SLF001 - still one entry for them
        store.write_sync(lambda w: w.set_vuin(_person(101), 101))
        assert store.probe(_person(1), scene) == (1, True)
        assert len(store._answers[1]) == 1  # noqa: SLF001
    finally:
        store.close()
