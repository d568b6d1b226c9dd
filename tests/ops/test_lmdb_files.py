"""backup DEST: an online copy of openid-map.db taken while another process keeps writing;
the copy opens, passes verify and holds every vUIN shown before the backup began (and
verify of the live store passes beside the writer too)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from click.testing import CliRunner, Result

from gensokyo_idmap.cli import main
from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.ops.lmdb_files import open_readonly, verify_store
from gensokyo_idmap.store.lmdb.codec import decode_u64
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore

from ..conftest import run

CHILD = Path(__file__).resolve().parents[1] / "crash" / "durability_child.py"
SCRIPT = Path(sys.executable).parent / "gensokyo-idmap"
APP = "102000001"


def cli(*args: str) -> Result:
    runner = CliRunner(env={"GSK_IDMAP__DATA_DIR": None, "GSK_BOT__APP_ID": None})
    return runner.invoke(main, list(args), catch_exceptions=False)


def forward(path: Path) -> dict[str, int]:
    with open_readonly(path) as env, env.begin() as txn:
        db = env.open_db(b"identity_to_vuin", txn=txn, create=False)
        return {bytes(k).decode(): decode_u64(bytes(v)) for k, v in txn.cursor(db)}


class Writer:
    """tests/crash/durability_child.py resolving new OpenIDs; every printed line is durable."""

    def __init__(self, db: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(db), "0", "1000000", "--batch", "8"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.shown: list[tuple[str, int]] = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            key, vuin = line.split()
            with self.lock:
                self.shown.append((key, int(vuin)))

    def snapshot(self) -> list[tuple[str, int]]:
        with self.lock:
            return list(self.shown)

    def wait_for(self, count: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while len(self.snapshot()) < count:
            assert self.proc.poll() is None, "the writer died"
            assert time.monotonic() < deadline, f"fewer than {count} writes in {timeout} s"
            time.sleep(0.01)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.reader.join(timeout=10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


def test_backup_while_another_process_writes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    db = data / "openid-map.db"
    writer = Writer(db)
    try:
        writer.wait_for(200)
        backups: list[tuple[Path, list[tuple[str, int]]]] = []
        for n in range(3):
            before = writer.snapshot()  # shown (durable) before this backup started
            dest = tmp_path / f"backup-{n}.db"
            done = subprocess.run([str(SCRIPT), "--data-dir", str(data), "--json", "backup",
                                   str(dest)], capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            result = json.loads(done.stdout)
            assert result["verify"]["ok"] is True
            assert result["bytes"] < result["source_bytes"]  # compacted: no free pages
            backups.append((dest, before))
            live = subprocess.run([str(SCRIPT), "--data-dir", str(data), "verify"],
                                  capture_output=True, text=True, timeout=60)
            assert live.returncode == 0, live.stdout  # read-only: fine beside the writer
            assert writer.proc.poll() is None  # the writer never stopped for it
            writer.wait_for(len(writer.snapshot()) + 100)  # and went on writing after it
    finally:
        writer.stop()
    for dest, before in backups:
        report = verify_store(dest)
        assert report.ok, report.lines()
        copied = forward(dest)
        missing = [(k, v) for k, v in before if copied.get(k) != v]
        assert missing == [], missing[:5]
        assert len(copied) >= len(before)
    assert len(forward(backups[-1][0])) > len(backups[0][1])
    # the copy is a working store: it opens and resolves what it holds
    key, vuin = backups[-1][1][-1]
    store = LmdbIdentityStore(backups[-1][0])
    try:
        with store.read() as view:
            assert view.vuin_of(key) == vuin
    finally:
        store.close()


def small_store(data: Path) -> None:
    store = LmdbIdentityStore(data / "openid-map.db")
    try:
        graph = IdentityGraph(store)
        for n in range(10):
            run(graph.resolve([OpenId(APP, f"{n:032X}")], scene="group:G"))
    finally:
        store.close()


def test_backup_refuses_to_overwrite(tmp_path: Path) -> None:
    data = tmp_path / "data"
    small_store(data)
    dest = tmp_path / "b.db"
    dest.write_bytes(b"an older backup")
    result = cli("--data-dir", str(data), "backup", str(dest))
    assert result.exit_code == 2 and "exists already" in result.stderr
    assert dest.read_bytes() == b"an older backup"
    result = cli("--data-dir", str(data), "backup", str(dest), "--force")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"backup {dest}: ")
    assert ", verified: 10 identities" in result.stdout and result.stdout.count(str(dest)) == 1
    assert verify_store(dest).ok and len(forward(dest)) == 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.db", "b.db-lock", "data"]


def test_backup_bad_destinations_write_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    small_store(data)
    for dest, why in ((tmp_path, "is a directory"),
                      (tmp_path / "no" / "such" / "b.db", "does not exist"),
                      (data / "openid-map.db", "exists already")):
        result = cli("--data-dir", str(data), "backup", str(dest))
        assert result.exit_code == 2, (dest, result.output)
        assert why in result.stderr
    result = cli("--data-dir", str(data), "backup", str(data / "openid-map.db"), "--force")
    assert result.exit_code == 2 and "the store itself" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_backup_without_a_store(tmp_path: Path) -> None:
    result = cli("--data-dir", str(tmp_path / "none"), "backup", str(tmp_path / "b.db"))
    assert result.exit_code == 1 and "no store at" in result.stderr
    assert not (tmp_path / "b.db").exists()


def test_backup_after_a_rebind_above_the_counter(tmp_path: Path) -> None:
    """README's own `identity rebind 2 2870338968` leaves a sound store: its backup is
    written and passes verify (it was refused as a counter fault, exit 1)."""
    data = tmp_path / "data"
    small_store(data)
    store = LmdbIdentityStore(data / "openid-map.db")
    try:
        run(IdentityGraph(store).rebind(2, 2870338968))
    finally:
        store.close()
    dest = tmp_path / "b.db"
    result = cli("--data-dir", str(data), "--json", "backup", str(dest))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["written"] is True
    assert forward(dest)[f"openid:QQ:{APP}:{1:032X}"] == 2870338968  # was vUIN 2


def test_a_backup_failing_verify_leaves_no_dest(tmp_path: Path) -> None:
    """A copy that fails verify is not renamed to DEST: no DEST appears, an existing one is
    not replaced (--force included), and no temporary file stays behind."""
    import lmdb

    from gensokyo_idmap.store.lmdb.codec import encode_u64

    data = tmp_path / "data"
    small_store(data)
    env = lmdb.open(str(data / "openid-map.db"), subdir=False, max_dbs=10)
    try:
        with env.begin(write=True) as txn:  # damage behind the graph's back: an alias loop
            aliases = env.open_db(b"vuin_alias", txn=txn)
            txn.put(encode_u64(20), encode_u64(21), db=aliases)
            txn.put(encode_u64(21), encode_u64(20), db=aliases)
    finally:
        env.close()
    backups = tmp_path / "backups"
    backups.mkdir()
    dest = backups / "b.db"
    result = cli("--data-dir", str(data), "backup", str(dest))
    assert result.exit_code == 1, result.output
    assert result.stdout.startswith(f"no backup written: the copy of {data / 'openid-map.db'} "
                                    "fails verify")
    assert "alias_loop" in result.stdout
    assert list(backups.iterdir()) == []
    dest.write_bytes(b"an older, good backup")
    result = cli("--data-dir", str(data), "--json", "backup", "--force", str(dest))
    assert result.exit_code == 1, result.output
    out = json.loads(result.stdout)
    assert out["written"] is False and out["verify"]["ok"] is False
    assert dest.read_bytes() == b"an older, good backup"
    assert [p.name for p in backups.iterdir()] == ["b.db"]


def test_backup_refuses_a_dest_that_is_not_a_regular_file(tmp_path: Path) -> None:
    """A FIFO, a directory, a device (through a symlink to /dev/null) or a symlink to a
    directory or a FIFO is refused, --force included, and left exactly as it was."""
    import os
    import stat

    data = tmp_path / "data"
    small_store(data)
    out = tmp_path / "out"
    out.mkdir()
    fifo = out / "fifo"
    os.mkfifo(fifo)
    directory = out / "dir"
    directory.mkdir()
    links = {"to-dev-null": Path("/dev/null"), "to-dir": directory, "to-fifo": fifo}
    for name, target in links.items():
        (out / name).symlink_to(target)
    before = {p.name: os.lstat(p) for p in out.iterdir()}
    device = os.stat("/dev/null")
    cases = {fifo: "is a FIFO", directory: "is a directory",
             out / "to-dev-null": "is a device (through the symlink to /dev/null)",
             out / "to-dir": "is a directory (through the symlink", out / "to-fifo": "is a FIFO"}
    for dest, why in cases.items():
        for force in ((), ("--force",)):
            result = cli("--data-dir", str(data), "backup", *force, str(dest))
            assert result.exit_code == 2, (dest, force, result.output)
            assert why in result.stderr and "not a regular file" in result.stderr, result.stderr
    after = {p.name: os.lstat(p) for p in out.iterdir()}
    assert after.keys() == before.keys()  # nothing left behind, nothing replaced
    for name, st in before.items():
        assert (after[name].st_mode, after[name].st_ino) == (st.st_mode, st.st_ino), name
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert os.stat("/dev/null").st_ino == device.st_ino


def test_backup_through_a_symlink_replaces_the_file_it_names(tmp_path: Path) -> None:
    """A symlink to a regular file: the copy is written beside that file and renamed over
    it; the link stays a link."""
    data = tmp_path / "data"
    small_store(data)
    real = tmp_path / "real"
    real.mkdir()
    (real / "b.db").write_bytes(b"an older backup")
    link = tmp_path / "latest.db"
    link.symlink_to(real / "b.db")
    result = cli("--data-dir", str(data), "backup", "--force", str(link))
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and link.resolve() == real / "b.db"
    assert verify_store(real / "b.db").ok and len(forward(real / "b.db")) == 10
    assert sorted(p.name for p in real.iterdir()) == ["b.db", "b.db-lock"]  # verify's lock
