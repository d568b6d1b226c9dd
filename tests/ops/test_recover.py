"""recover msgid / recover identities --from-legacy on real files: what moves aside, what is
refused (nothing written), and that a failed re-migration puts the old store back."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gensokyo_idmap.cli import main
from gensokyo_idmap.errors import StoreError
from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.runtime.msgid import MsgContext, MsgIdMap
from gensokyo_idmap.ops.lmdb_files import open_readonly, verify_store
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore
from gensokyo_idmap.store.lmdb.outbox import LmdbOutboxStore
from migrate.legacy import MARKER, migrate_legacy

from ..conftest import run, time_limit

LEGACY = Path(__file__).resolve().parents[1] / "fixtures" / "legacy"
APP = "102076543"  # settings.appid of the legacy fixtures


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    return path


def cli(data_dir: Path, *args: str, app_id: str | None = APP) -> Result:
    runner = CliRunner(env={"GSK_IDMAP__DATA_DIR": None, "GSK_BOT__APP_ID": None})
    head = ["--data-dir", str(data_dir)] + (["--app-id", app_id] if app_id else [])
    return runner.invoke(main, [*head, *args], catch_exceptions=False)


def listing(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def forward_table(path: Path) -> dict[bytes, bytes]:
    with open_readonly(path) as env, env.begin() as txn:
        db = env.open_db(b"identity_to_vuin", txn=txn, create=False)
        return {bytes(k): bytes(v) for k, v in txn.cursor(db)}


class Holder:
    """Another process with a store open (as the daemon would have)."""

    def __init__(self, path: Path, cls: str) -> None:
        module = {"LmdbMsgIdStore": "gensokyo_idmap.runtime.lmdb",
                  "LmdbIdentityStore": "gensokyo_idmap.store.lmdb.identity"}[cls]
        self.proc = subprocess.Popen(
            [sys.executable, "-c",
             f"import sys; from {module} import {cls}; "
             f"s = {cls}(sys.argv[1]); print('ready', flush=True); sys.stdin.read(); s.close()",
             str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        with time_limit(20, "the holder opening the store"):
            assert self.proc.stdout.readline() == "ready\n"

    def release(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.stdout.close()
        assert self.proc.wait(timeout=10) == 0


# --- recover msgid -------------------------------------------------------------------------


def fill_msgids(path: Path) -> int:
    store = LmdbMsgIdStore(path)
    try:
        msgids = MsgIdMap(store)
        context = MsgContext("1", "group", "G")
        ids = [msgids.store_real_sync(f"ROBOT1.0_m{n}", context) for n in range(5)]
    finally:
        store.close()
    return max(ids)


def test_recover_msgid_moves_the_old_file_aside(data_dir: Path) -> None:
    path = data_dir / "msgid-map.db"
    top = fill_msgids(path)
    old = path.read_bytes()
    result = cli(data_dir, "--json", "recover", "msgid")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    moved = Path(data["moved_to"])
    assert moved.parent == data_dir and moved.name.startswith("msgid-map.db.reset-")
    assert moved.read_bytes() == old  # kept, not deleted
    assert data["counter"] == top
    store = LmdbMsgIdStore(path)
    try:
        msgids = MsgIdMap(store)
        assert msgids.counts().live_or_unswept == 0
        assert msgids.lookup(1) is None
        # the counter went on: a number a framework still holds is not handed out again soon
        assert msgids.store_real_sync("ROBOT1.0_new", MsgContext("1", "group", "G")) == top + 1
    finally:
        store.close()
    human = cli(data_dir, "recover", "msgid")
    assert human.exit_code == 0 and "msgid-map.db reset" in human.stdout
    assert "the old file is" in human.stdout


def test_recover_msgid_without_a_file_creates_one(data_dir: Path) -> None:
    result = cli(data_dir, "recover", "msgid")
    assert result.exit_code == 0, result.output
    assert (data_dir / "msgid-map.db").is_file()


def test_recover_msgid_corrupt_file(data_dir: Path) -> None:
    (data_dir / "msgid-map.db").write_bytes(b"\x00garbage" * 1000)
    result = cli(data_dir, "--json", "recover", "msgid")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["counter"] == 0
    assert Path(json.loads(result.stdout)["moved_to"]).read_bytes() == b"\x00garbage" * 1000


def test_recover_msgid_refused_while_the_daemon_has_it_open(data_dir: Path) -> None:
    path = data_dir / "msgid-map.db"
    fill_msgids(path)
    holder = Holder(path, "LmdbMsgIdStore")
    try:
        before = listing(data_dir)
        result = cli(data_dir, "recover", "msgid")
        assert result.exit_code == 1
        assert "open in another process" in result.stderr
        assert listing(data_dir) == before
    finally:
        holder.release()
    assert cli(data_dir, "recover", "msgid").exit_code == 0


# --- recover identities --from-legacy ------------------------------------------------------


def reference_migration(tmp_path: Path, legacy: Path) -> dict[bytes, bytes]:
    ref = tmp_path / "ref"
    store = LmdbIdentityStore(ref / "openid-map.db")
    try:
        migrate_legacy(legacy, store, None, APP)
    finally:
        store.close()
    return forward_table(ref / "openid-map.db")


def current_store(data_dir: Path) -> bytes:
    """An openid-map.db with identities of its own (the one being replaced)."""
    store = LmdbIdentityStore(data_dir / "openid-map.db")
    try:
        run(IdentityGraph(store).resolve([OpenId(APP, "F" * 32)]))
    finally:
        store.close()
    return (data_dir / "openid-map.db").read_bytes()


@pytest.mark.parametrize("fixture", ["small-counter", "small-hash"])
def test_recover_identities_from_legacy(tmp_path: Path, data_dir: Path, fixture: str) -> None:
    legacy = data_dir / "idmap.db"
    shutil.copyfile(LEGACY / f"{fixture}.db", legacy)
    old = current_store(data_dir)
    result = cli(data_dir, "--json", "recover", "identities", "--from-legacy")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    moved = Path(data["moved_to"])
    assert moved.name.startswith("openid-map.db.before-recover-") and moved.read_bytes() == old
    assert data["migration"]["status"] == "migrated"
    assert verify_store(data_dir / "openid-map.db").ok
    assert forward_table(data_dir / "openid-map.db") == reference_migration(tmp_path, legacy)
    assert legacy.read_bytes() == (LEGACY / f"{fixture}.db").read_bytes()  # never changed
    store = LmdbIdentityStore(data_dir / "openid-map.db")
    try:
        with store.read() as view:
            assert view.get_meta(MARKER) is not None
            assert view.vuin_of(OpenId(APP, "F" * 32).key) is None  # the old store's own
    finally:
        store.close()


def test_recover_identities_with_a_path_and_no_current_store(tmp_path: Path,
                                                             data_dir: Path) -> None:
    legacy = tmp_path / "elsewhere.db"
    shutil.copyfile(LEGACY / "small-counter.db", legacy)
    result = cli(data_dir, "recover", "identities", "--from-legacy", str(legacy))
    assert result.exit_code == 0, result.output
    assert f"re-migrated from {legacy}" in result.stdout
    assert "status        migrated" in result.stdout
    assert verify_store(data_dir / "openid-map.db").ok


@pytest.mark.parametrize("args", [
    ("recover", "identities"),                                   # no --from-legacy
    ("recover", "identities", "--from-legacy"),                  # no data/idmap.db
    ("recover", "identities", "--from-legacy", "/nonexistent/idmap.db"),
])
def test_recover_identities_refuses_without_the_legacy_file(data_dir: Path,
                                                            args: tuple[str, ...]) -> None:
    current_store(data_dir)
    before = listing(data_dir)
    result = cli(data_dir, *args)
    assert result.exit_code == 2, result.output
    assert "--from-legacy" in result.stderr
    assert listing(data_dir) == before


def test_recover_identities_needs_the_app_id(data_dir: Path) -> None:
    shutil.copyfile(LEGACY / "small-counter.db", data_dir / "idmap.db")
    current_store(data_dir)
    before = listing(data_dir)
    result = cli(data_dir, "recover", "identities", "--from-legacy", app_id=None)
    assert result.exit_code == 2 and "--app-id" in result.stderr
    assert listing(data_dir) == before


def test_failed_recovery_puts_the_old_store_back(data_dir: Path) -> None:
    shutil.copyfile(LEGACY / "corrupt.db", data_dir / "idmap.db")
    old = current_store(data_dir)
    result = cli(data_dir, "recover", "identities", "--from-legacy")
    assert result.exit_code == 1, result.output
    assert (data_dir / "openid-map.db").read_bytes() == old
    assert not [p for p in data_dir.iterdir() if "before-recover" in p.name]


def test_recover_identities_refused_while_the_daemon_has_it_open(data_dir: Path) -> None:
    shutil.copyfile(LEGACY / "small-counter.db", data_dir / "idmap.db")
    current_store(data_dir)
    holder = Holder(data_dir / "openid-map.db", "LmdbIdentityStore")
    try:
        before = listing(data_dir)
        result = cli(data_dir, "recover", "identities", "--from-legacy")
        assert result.exit_code == 1 and "stop it first" in result.stderr
        assert listing(data_dir) == before
    finally:
        holder.release()


# --- recover outbox ------------------------------------------------------------------------


def owing_outbox(data_dir: Path) -> None:
    with LmdbOutboxStore(data_dir / "outbox.db") as store:
        store.write_sync(lambda view: [view.add("ws://framework/", b"{}") for _ in range(3)])


@pytest.mark.parametrize("damage", ["deleted", "emptied"])
def test_recover_outbox_replaces_a_refused_one(data_dir: Path, damage: str) -> None:
    owing_outbox(data_dir)
    path = data_dir / "outbox.db"
    if damage == "deleted":
        path.unlink()
    else:
        os.truncate(path, 0)
    old = path.read_bytes() if path.exists() else None
    with pytest.raises(StoreError, match="recover outbox"):
        LmdbOutboxStore(path)  # refused: that is why the command exists
    result = cli(data_dir, "--json", "recover", "outbox")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    if old is None:
        assert data["moved_to"] is None and "missing" in data["reason"]
    else:
        assert Path(data["moved_to"]).read_bytes() == old  # kept, not deleted
    with LmdbOutboxStore(path) as store, store.read() as view:
        assert view.count() == 0


def test_recover_outbox_leaves_a_whole_one_alone(data_dir: Path) -> None:
    owing_outbox(data_dir)
    before = listing(data_dir)
    result = cli(data_dir, "recover", "outbox")
    assert result.exit_code == 1
    assert "is whole (3 events owed): nothing to recover" in result.stderr
    after = listing(data_dir)  # (reading it registered a reader in its lock file)
    assert after.keys() == before.keys() and after["outbox.db"] == before["outbox.db"]
