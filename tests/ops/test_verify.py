"""verify: a sound store passes; each kind of damage, written straight into a copy with
py-lmdb, is found and named (by ``verify_store`` and by ``gensokyo-idmap verify``)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cbor2
import lmdb
import pytest
from click.testing import CliRunner

from gensokyo_idmap.cli import main
from gensokyo_idmap.identity import OpenId, RUin
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.ops.lmdb_files import verify_store
from gensokyo_idmap.ops.verify import GraphSnapshot, check_graph
from gensokyo_idmap.store.lmdb.codec import encode_u64
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore

from ..conftest import run

APP = "102000001"
Tables = dict[str, Any]


def key(n: int) -> str:
    return OpenId(APP, f"{n:032X}").key


@pytest.fixture(scope="module")
def sound_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store made by the graph itself: identities, an rUIN, last_seen, a rebind alias."""
    path = tmp_path_factory.mktemp("sound") / "openid-map.db"
    store = LmdbIdentityStore(path)
    graph = IdentityGraph(store)

    async def fill() -> None:
        for n in range(1, 9):  # vUINs 1..8
            await graph.resolve([OpenId(APP, f"{n:032X}")], scene=f"group:G{n}")
        await graph.bind(RUin("QQ", 0, "2870338968"), 3)
        await graph.rebind(1, 2)  # 1 becomes an alias of 2
        await graph.bind(OpenId(APP, f"{4:032X}"), 5)  # 4 loses its only key: alias of 5

    try:
        run(fill())
    finally:
        store.close()
    return path


@pytest.fixture
def copy(sound_store: Path, tmp_path: Path) -> Path:
    target = tmp_path / "openid-map.db"
    shutil.copyfile(sound_store, target)
    return target


def damage(path: Path, fn: Callable[[lmdb.Transaction, Tables], None]) -> None:
    """Write into the store behind the graph's back."""
    env = lmdb.open(str(path), subdir=False, max_dbs=10)
    try:
        with env.begin(write=True) as txn:
            tables = {name: env.open_db(name.encode(), txn=txn,
                                        dupsort=name in ("vuin_to_identity", "seen_by_scene"))
                      for name in ("meta", "identity_to_vuin", "vuin_to_identity", "vuin_alias",
                                   "last_seen", "seen_by_scene")}
            fn(txn, tables)
    finally:
        env.close()


def kinds(path: Path) -> set[str]:
    return {v.kind for v in verify_store(path).violations}


def test_sound_store_passes(sound_store: Path, copy: Path) -> None:
    report = verify_store(copy)
    assert report.ok, report.lines()
    assert report.counts == {"identities": 9, "vuins": 6, "aliases": 2, "last_seen": 7}
    assert report.lines()[0].startswith("ok: ")


def put(table: str, k: bytes, v: bytes) -> Callable[[lmdb.Transaction, Tables], None]:
    return lambda txn, t: txn.put(k, v, db=t[table])


def delete(table: str, k: bytes, v: bytes | None = None
           ) -> Callable[[lmdb.Transaction, Tables], None]:
    def fn(txn: lmdb.Transaction, t: Tables) -> None:
        assert txn.delete(k, v, db=t[table]) if v is not None else txn.delete(k, db=t[table])
    return fn


def both(*fns: Callable[[lmdb.Transaction, Tables], None]
         ) -> Callable[[lmdb.Transaction, Tables], None]:
    def fn(txn: lmdb.Transaction, t: Tables) -> None:
        for f in fns:
            f(txn, t)
    return fn


DAMAGE = {
    "forward_without_reverse": put("identity_to_vuin", key(99).encode(), encode_u64(6)),
    "forward_without_reverse ": delete("vuin_to_identity", encode_u64(6), key(6).encode()),
    "reverse_without_forward": put("vuin_to_identity", encode_u64(6), b"raw:ghost"),
    # one identity in two sets: vUIN 7 also lists the key of vUIN 8
    "reverse_without_forward ": put("vuin_to_identity", encode_u64(7), key(8).encode()),
    "alias_loop": both(put("vuin_alias", encode_u64(20), encode_u64(21)),
                       put("vuin_alias", encode_u64(21), encode_u64(20)),
                       put("meta", b"vuin_counter", cbor2.dumps(30))),
    "alias_loop ": both(put("vuin_alias", encode_u64(1), encode_u64(1))),
    "alias_dead_end": both(put("vuin_alias", encode_u64(20), encode_u64(21)),
                           put("meta", b"vuin_counter", cbor2.dumps(30))),
    "alias_with_identities": put("vuin_alias", encode_u64(7), encode_u64(8)),
    "counter": put("meta", b"vuin_counter", cbor2.dumps(-1)),
    "counter ": put("meta", b"vuin_counter", cbor2.dumps("8")),
    "last_seen_foreign": put("last_seen", encode_u64(7) + b"group:G7",
                             cbor2.dumps([key(8), 1_700_000_000.0])),
    "bad_last_seen": put("last_seen", encode_u64(7) + b"group:G9", b"\xff\xff"),
    "schema_version": put("meta", b"schema_version", cbor2.dumps(99)),
    "scene_index_missing": delete("seen_by_scene", b"group:G7", encode_u64(7)),
    "scene_index_stray": put("seen_by_scene", b"group:G7", encode_u64(8)),
    "bad_vuin": put("identity_to_vuin", key(6).encode(), b"short"),
    "bad_key": both(put("identity_to_vuin", b"not-a-typed-key", encode_u64(6)),
                    put("vuin_to_identity", encode_u64(6), b"not-a-typed-key")),
}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_damage_is_found(copy: Path, kind: str) -> None:
    assert verify_store(copy).ok
    damage(copy, DAMAGE[kind])
    report = verify_store(copy)
    assert not report.ok
    assert kind.strip() in kinds(copy), report.lines()
    assert any(kind.strip() in line for line in report.lines()[1:])


def test_alias_loop_is_reported_once(copy: Path) -> None:
    damage(copy, DAMAGE["alias_loop"])
    loops = [v for v in verify_store(copy).violations if v.kind == "alias_loop"]
    assert len(loops) == 1 and "20 → 21 → 20" in loops[0].message, loops


def test_several_faults_are_all_listed(copy: Path) -> None:
    damage(copy, both(DAMAGE["forward_without_reverse"], DAMAGE["counter"],
                      DAMAGE["last_seen_foreign"]))
    assert {"forward_without_reverse", "counter", "last_seen_foreign"} <= kinds(copy)


def test_numbers_above_the_counter_are_sound(tmp_path: Path) -> None:
    """README's `identity rebind 2 2870338968`, and a bind to a number far above the counter:
    allocation skips every number in use, so the store is sound (it was reported as a
    ``counter`` fault, exit 1), and the next new identity still gets a free number."""
    path = tmp_path / "openid-map.db"
    store = LmdbIdentityStore(path)
    graph = IdentityGraph(store)
    try:
        for n in (1, 2, 3):
            run(graph.resolve([OpenId(APP, f"{n:032X}")]))
        run(graph.rebind(2, 2870338968))
        run(graph.bind(RUin("QQ", 0, "2870338968"), 9_000_000_000))
        run(graph.rebind(9_000_000_000, 4))  # 4: right above the counter (3)
    finally:
        store.close()
    report = verify_store(path)
    assert report.ok, report.lines()
    result = cli("--data-dir", str(tmp_path), "verify")
    assert result.exit_code == 0 and result.stdout.startswith("ok: "), result.output
    store = LmdbIdentityStore(path)
    try:
        fresh = run(IdentityGraph(store).resolve([OpenId(APP, f"{9:032X}")]))
    finally:
        store.close()
    assert fresh.vuin == 5  # 4 is taken (an alias would be too): skipped
    assert verify_store(path).ok


def test_missing_tables_and_missing_schema(tmp_path: Path) -> None:
    path = tmp_path / "bare.db"
    env = lmdb.open(str(path), subdir=False, max_dbs=4)
    with env.begin(write=True) as txn:
        db = env.open_db(b"identity_to_vuin", txn=txn)
        txn.put(key(1).encode(), encode_u64(1), db=db)
    env.close()
    found = kinds(path)
    assert {"table_missing", "schema_version", "forward_without_reverse"} <= found


def test_pure_checker_on_a_snapshot() -> None:
    good = GraphSnapshot(meta={b"schema_version": cbor2.dumps(1),
                               b"vuin_counter": cbor2.dumps(2)},
                         forward=[(key(1).encode(), encode_u64(2))],
                         reverse=[(encode_u64(2), key(1).encode())],
                         aliases=[(encode_u64(1), encode_u64(2))], last_seen=[])
    assert check_graph(good, frozenset({1})) == []
    assert [v.kind for v in check_graph(good, frozenset({2}))] == ["schema_version"]


def cli(*args: str) -> Any:
    runner = CliRunner(env={"GSK_IDMAP__DATA_DIR": None, "GSK_BOT__APP_ID": None})
    return runner.invoke(main, list(args), catch_exceptions=False)


def test_cli_verify_exit_codes_and_json(copy: Path) -> None:
    result = cli("--data-dir", str(copy.parent), "verify")
    assert result.exit_code == 0 and result.stdout.startswith("ok: "), result.output
    damage(copy, both(DAMAGE["reverse_without_forward"], DAMAGE["alias_loop"]))
    result = cli("--data-dir", str(copy.parent), "verify")
    assert result.exit_code == 1
    assert "reverse_without_forward: vUIN 6's set lists raw:ghost" in result.stdout
    assert "alias_loop" in result.stdout
    result = cli("--json", "verify", str(copy))  # a file given directly (a backup, say)
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["ok"] is False
    assert data["violation_counts"] == {"reverse_without_forward": 1, "alias_loop": 1}


def test_cli_verify_without_a_store(tmp_path: Path) -> None:
    result = cli("--data-dir", str(tmp_path / "none"), "verify")
    assert result.exit_code == 1
    assert "no store at" in result.stderr
    assert not (tmp_path / "none").exists()  # verify writes nothing
