"""A precious store is never created afresh once its data dir held it (stores.json).

openid-map.db and outbox.db: missing after use (recorded, or its lock file left behind),
emptied, of another kind: refused with the file's name and what to do, nothing written
(cut-short and damaged files, which killed the process with a signal before, are in
tests/faults, run in child processes). A brand-new data dir still starts from nothing; a
data dir from before the record gets it on first open; migration and recovery create the
file on purpose (``recreate``). msgid-map.db keeps its self-healing.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from gensokyo_idmap.errors import StoreError
from gensokyo_idmap.store.lmdb.env import LmdbEnv
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore, open_msgid_store
from gensokyo_idmap.store.lmdb.outbox import LmdbOutboxStore
STORES_FILE = "stores.json"  # (a literal: the tests run against code that lacks it, too)

Opener = Callable[..., LmdbEnv]  # type: ignore[type-arg]
PRECIOUS: dict[str, Opener] = {"openid-map.db": LmdbIdentityStore,
                               "outbox.db": LmdbOutboxStore}
RECOVERY_WORDS = {"openid-map.db": "recover identities", "outbox.db": "recover outbox"}


def _listing(data_dir: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in data_dir.iterdir()}


def _used(data_dir: Path, name: str) -> None:
    with PRECIOUS[name](data_dir / name) as store:
        if name == "openid-map.db":
            store.write_sync(lambda view: view.set_vuin("raw:A", 1))
        else:
            store.write_sync(lambda view: view.add("sink", b"owed"))


def _recorded(data_dir: Path) -> set[str]:
    return set(json.loads((data_dir / STORES_FILE).read_text())["stores"])


@pytest.mark.parametrize("name", PRECIOUS)
def test_a_new_data_dir_starts_from_nothing_and_records_the_store(tmp_path: Path,
                                                                   name: str) -> None:
    data_dir = tmp_path / "data"
    PRECIOUS[name](data_dir / name).close()
    assert _recorded(data_dir) == {name}
    assert sorted(p.name for p in data_dir.iterdir()) == sorted(
        [name, f"{name}-lock", STORES_FILE])  # nothing half-made or temporary left


def _delete(path: Path) -> None:
    path.unlink()


def _delete_with_lock(path: Path) -> None:
    path.unlink()
    path.with_name(path.name + "-lock").unlink()


def _empty(path: Path) -> None:
    os.truncate(path, 0)


@pytest.mark.parametrize("name", PRECIOUS)
@pytest.mark.parametrize("damage", [_delete, _delete_with_lock, _empty],
                         ids=["deleted", "deleted-with-lock", "emptied"])
def test_a_store_that_was_there_is_refused_and_nothing_written(
        tmp_path: Path, name: str, damage: Callable[[Path], None]) -> None:
    data_dir = tmp_path / "data"
    _used(data_dir, name)
    damage(data_dir / name)
    before = _listing(data_dir)
    with pytest.raises(StoreError) as caught:
        PRECIOUS[name](data_dir / name)
    message = caught.value.message
    assert str(data_dir / name) in message
    assert "nothing was written" in message
    assert RECOVERY_WORDS[name] in message
    assert _listing(data_dir) == before


@pytest.mark.parametrize("name", PRECIOUS)
def test_the_lock_file_left_behind_counts_for_data_dirs_from_before_the_record(
        tmp_path: Path, name: str) -> None:
    data_dir = tmp_path / "data"
    _used(data_dir, name)
    (data_dir / STORES_FILE).unlink()  # as a data dir of an older version had none
    (data_dir / name).unlink()
    with pytest.raises(StoreError, match=f"its lock file {name}-lock is still there"):
        PRECIOUS[name](data_dir / name)
    assert not (data_dir / STORES_FILE).exists()


@pytest.mark.parametrize("name", PRECIOUS)
def test_an_older_data_dir_gets_the_record_on_first_open(tmp_path: Path, name: str) -> None:
    data_dir = tmp_path / "data"
    _used(data_dir, name)
    (data_dir / STORES_FILE).unlink()
    PRECIOUS[name](data_dir / name).close()
    assert _recorded(data_dir) == {name}
    (data_dir / name).unlink()
    (data_dir / f"{name}-lock").unlink()
    with pytest.raises(StoreError, match=f"{STORES_FILE} records it"):
        PRECIOUS[name](data_dir / name)


def test_an_unreadable_record_counts_as_recording_every_precious_store(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / STORES_FILE).write_text("{not json", encoding="utf-8")
    with pytest.raises(StoreError, match="is unreadable"):
        LmdbOutboxStore(data_dir / "outbox.db")
    assert not (data_dir / "outbox.db").exists()


def test_recreate_makes_the_store_on_purpose_and_keeps_both_names(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    _used(data_dir, "openid-map.db")
    _used(data_dir, "outbox.db")
    (data_dir / "openid-map.db").unlink()
    with LmdbIdentityStore(data_dir / "openid-map.db", recreate=True) as store:
        with store.read() as view:
            assert view.vuin_of("raw:A") is None
    assert _recorded(data_dir) == {"openid-map.db", "outbox.db"}


@pytest.mark.parametrize(("name", "other"), [("openid-map.db", "msgid-map.db"),
                                             ("outbox.db", "openid-map.db")])
def test_a_whole_lmdb_file_of_another_kind_is_refused(tmp_path: Path, name: str,
                                                      other: str) -> None:
    data_dir = tmp_path / "data"
    if other == "msgid-map.db":
        LmdbMsgIdStore(data_dir / other).close()
    else:
        _used(data_dir, other)
    shutil.copyfile(data_dir / other, data_dir / name)
    with pytest.raises(StoreError, match=f"but not a {name}"):
        PRECIOUS[name](data_dir / name)


def test_an_emptied_msgid_map_is_moved_aside_like_a_damaged_one(tmp_path: Path) -> None:
    """LMDB takes an empty file for a new one; the check does not (the old file is kept)."""
    path = tmp_path / "data" / "msgid-map.db"
    LmdbMsgIdStore(path).close()
    _empty(path)
    with open_msgid_store(path) as store, store.read() as view:
        assert view.msg_counter() == 0
    aside = [p for p in path.parent.iterdir() if p.name.startswith("msgid-map.db.corrupt")]
    assert len(aside) == 1 and aside[0].stat().st_size == 0
    assert not (path.parent / STORES_FILE).exists()  # disposable: never recorded
