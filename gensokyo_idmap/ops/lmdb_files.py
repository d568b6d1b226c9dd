"""File work on the stores for the operator commands: read-only snapshots, online backups,
moving files aside, and telling whether another process (the daemon) has a store open.

A read-only handle never writes the data file and never upgrades a schema, so ``verify`` and
``backup`` are safe next to a running daemon. LMDB allows one handle per file and process:
call these while this process has no other handle on the same file.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import lmdb

from gensokyo_idmap.data_dir import IDENTITY_DB, OUTBOX_DB
from gensokyo_idmap.errors import BadInputError, NotFoundError, StoreError
from gensokyo_idmap.ops.verify import GraphSnapshot, VerifyReport, check_graph
from gensokyo_idmap.redaction import redact_url
from gensokyo_idmap.store.lmdb.check import DamagedStoreError
from gensokyo_idmap.store.lmdb.identity import RECOVERY as IDENTITY_RECOVERY
from gensokyo_idmap.store.lmdb.identity import SCHEMA_VERSION, UPGRADES
from gensokyo_idmap.store.lmdb.identity import TABLES as IDENTITY_TABLES
from gensokyo_idmap.store.lmdb.opening import (
    begin_read,
    check_before_map,
    check_pinned,
    fsync_path,
    lock_path,
    missing,
    prepare_lock_file,
    refused,
)
from gensokyo_idmap.store.lmdb.outbox import RECOVERY as OUTBOX_RECOVERY
from gensokyo_idmap.store.lmdb.outbox import sink_of_key

__all__ = ["KNOWN_SCHEMA_VERSIONS", "BackupResult", "backup_store", "check_dest",
           "held_by_another_process", "lock_path",
           "move_aside", "open_readonly", "owed_per_sink", "read_snapshot", "verify_store"]

#: Versions a store may carry: the current one, and older ones an open would upgrade.
KNOWN_SCHEMA_VERSIONS: Final = frozenset({SCHEMA_VERSION, *UPGRADES})
_GRAPH_TABLES: Final = ("meta", "identity_to_vuin", "vuin_to_identity", "vuin_alias",
                        "last_seen")


#: How to get each store back when it is refused (by file name; see the store modules).
_RECOVERY: Final = {IDENTITY_DB: IDENTITY_RECOVERY, OUTBOX_DB: OUTBOX_RECOVERY}


@contextlib.contextmanager
def open_readonly(path: Path) -> Iterator[lmdb.Environment]:
    """A read-only handle on an existing store (readers registered in its lock file, so a
    writer elsewhere never reuses the pages this handle reads), checked before it is mapped
    (a damaged file is an error, never a signal)."""
    recovery = _RECOVERY.get(path.name)
    if not path.is_file():
        raise missing(path, recovery) or NotFoundError(f"no store at {path}")
    try:
        checked = check_before_map(path)
    except DamagedStoreError as exc:
        raise refused(exc, path, recovery) from None
    prepare_lock_file(path)
    try:
        env = lmdb.open(str(path), subdir=False, readonly=True, lock=True, create=False,
                        max_dbs=len(IDENTITY_TABLES) + 2, readahead=False)
    except lmdb.Error as exc:
        raise StoreError(f"cannot open {path}: {exc}") from exc
    try:
        if not checked:
            try:
                check_pinned(env, path)
            except DamagedStoreError as exc:
                raise refused(exc, path, recovery) from None
            env.set_mapsize(0)  # the writer may have grown the file while it was checked
        yield env
    finally:
        env.close()


def owed_per_sink(path: Path) -> dict[str, int]:
    """Entries per sink of an outbox.db (no file: none owed; nothing is created). For
    ``stats``: what frameworks that were away have still to receive."""
    if not path.is_file():
        error = missing(path, OUTBOX_RECOVERY)
        if error is not None:
            raise error
        return {}
    with open_readonly(path) as env, begin_read(env) as txn:
        try:
            table = env.open_db(b"outbox", txn=txn, create=False)
        except lmdb.NotFoundError:
            return {}
        owed: dict[str, int] = {}
        for key in txn.cursor(table).iternext(keys=True, values=False):
            sink = redact_url(sink_of_key(bytes(key)))  # named by its URL: no password shown
            owed[sink] = owed.get(sink, 0) + 1
        return owed


def read_snapshot(env: lmdb.Environment) -> GraphSnapshot:
    """The graph tables' raw entries, all from one read transaction."""
    dupsort = {t.name.decode(): t.dupsort for t in IDENTITY_TABLES}
    with begin_read(env) as txn:
        entries: dict[str, list[tuple[bytes, bytes]]] = {}
        missing: list[str] = []
        for name in _GRAPH_TABLES:
            try:
                db = env.open_db(name.encode(), txn=txn, create=False, dupsort=dupsort[name])
            except lmdb.NotFoundError:
                missing.append(name)
                entries[name] = []
                continue
            entries[name] = [(bytes(k), bytes(v)) for k, v in txn.cursor(db)]
        try:  # the scene index: a store of schema_version 2 on has it (0 and 1 did not)
            index = env.open_db(b"seen_by_scene", txn=txn, create=False, dupsort=True)
        except lmdb.NotFoundError:
            scene_index = None
        else:
            scene_index = [(bytes(k), bytes(v)) for k, v in txn.cursor(index)]
    return GraphSnapshot(
        meta=dict(entries["meta"]), forward=entries["identity_to_vuin"],
        reverse=entries["vuin_to_identity"], aliases=entries["vuin_alias"],
        last_seen=entries["last_seen"], missing_tables=tuple(missing),
        scene_index=scene_index)


def verify_store(path: Path) -> VerifyReport:
    """Open ``path`` read-only and check every graph invariant (``ops.verify``)."""
    try:
        with open_readonly(path) as env:
            snapshot = read_snapshot(env)
    except lmdb.Error as exc:
        raise StoreError(f"cannot read {path}: {exc}") from exc
    violations = check_graph(snapshot, KNOWN_SCHEMA_VERSIONS)
    counts = {"identities": len(snapshot.forward),
              "vuins": len({k for k, _ in snapshot.reverse}),
              "aliases": len(snapshot.aliases), "last_seen": len(snapshot.last_seen)}
    return VerifyReport(str(path), tuple(violations), counts)


@dataclass(frozen=True, slots=True)
class BackupResult:
    """What ``backup`` did. ``written`` is False when the copy failed verify: then DEST was
    left as it was (absent, or the older file ``--force`` would have replaced)."""

    source: str
    dest: str
    bytes: int
    source_bytes: int
    verify: VerifyReport
    written: bool = True

    def to_json(self) -> dict[str, object]:
        return {"source": self.source, "dest": self.dest, "written": self.written,
                "bytes": self.bytes, "source_bytes": self.source_bytes,
                "verify": self.verify.to_json()}


def _kind(mode: int) -> str | None:
    """What a file of ``mode`` is, unless it is a regular file (None)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    return "a socket" if stat.S_ISSOCK(mode) else "not a regular file"


def _check_dest(dest: Path, target: Path, force: bool) -> None:
    """DEST may be absent, or a regular file (through a symlink too) that --force replaces.

    Anything else is refused, --force included: renaming over a device, a FIFO or a
    directory would destroy it (``backup --force /dev/null`` once replaced the device).
    """
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise BadInputError("DEST", str(dest), f"cannot look at it: {exc.strerror}") from None
    kind = _kind(mode)
    if kind is not None:
        via = f" (through the symlink to {target})" if target != dest else ""
        raise BadInputError("DEST", str(dest), f"is {kind}{via}, not a regular file; give a "
                            "file name")
    if not force:
        raise BadInputError("DEST", str(dest), "exists already (--force replaces it)")


def check_dest(dest: Path, force: bool) -> Path:
    """The file a backup to ``dest`` writes (a symlink's target), once ``dest`` may be
    written: absent, or a regular file with ``force``, in a directory that exists."""
    target = Path(os.path.realpath(dest))
    _check_dest(dest, target, force)
    if not target.parent.is_dir():
        raise BadInputError("DEST", str(dest), f"directory {target.parent} does not exist")
    return target


def backup_store(source: Path, dest: Path, *, force: bool = False) -> BackupResult:
    """A consistent, compacted copy of ``source`` at ``dest``, taken while writers go on.

    LMDB copies one read snapshot (no writer waits for it); the copy is written beside the
    file ``dest`` names (a symlink's target) under a temporary name, fsynced and verified.
    Only a copy that passes verify is renamed into place: a backup that would not restore
    cleanly must not stand where a good one is expected (nor replace one). Whatever fails,
    the temporary file is removed.
    """
    target = check_dest(dest, force)
    if target in (source.resolve(), lock_path(source).resolve()):
        raise BadInputError("DEST", str(dest), "is the store itself")
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    try:
        with open_readonly(source) as env:
            env.copy(str(partial), compact=True)
        fsync_path(partial)
        verify = verify_store(partial)
        copied = partial.stat().st_size
        lock_path(partial).unlink(missing_ok=True)
        if verify.ok:
            _check_dest(dest, target, force)  # nothing else took the name meanwhile
            os.replace(partial, target)
            fsync_path(target.parent)
    except lmdb.Error as exc:
        raise StoreError(f"backup of {source} failed: {exc}") from exc
    except OSError as exc:
        raise StoreError(f"backup of {source} to {dest} failed: {exc.strerror}") from exc
    finally:
        partial.unlink(missing_ok=True)
        lock_path(partial).unlink(missing_ok=True)
    shown = dest if verify.ok else source  # what the findings are about
    report = VerifyReport(str(shown), verify.violations, verify.counts)
    return BackupResult(str(source), str(dest), copied, source.stat().st_size, report,
                        written=verify.ok)


def held_by_another_process(db: Path) -> bool:
    """Whether some other process has the LMDB file ``db`` open (the daemon, a CLI call).

    Every process with the env open holds a shared fcntl lock on byte 0 of its lock file
    (LMDB's liveness lock); an exclusive probe of that byte fails while one does. The probe
    never waits. Call it only while this process has no handle on ``db`` itself: closing the
    probe's descriptor would drop this process's own fcntl locks on the file.
    """
    lock = lock_path(db)
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            return True
        raise
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)
        return False
    finally:
        os.close(fd)


def move_aside(path: Path, label: str, clock: Callable[[], float] = time.time) -> Path:
    """Rename ``path`` to ``<name>.<label>-<UTC time>`` (never over an existing file)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(clock()))
    aside = path.with_name(f"{path.name}.{label}-{stamp}")
    suffix = 1
    while aside.exists():
        aside = path.with_name(f"{path.name}.{label}-{stamp}-{suffix}")
        suffix += 1
    os.replace(path, aside)
    return aside
