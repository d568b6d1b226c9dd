"""Opening an LMDB file without giving it a chance to kill the process.

* A file is checked with plain reads (:mod:`.check`) before LMDB maps it; while another
  process keeps committing to it, the check runs again under a read transaction of this
  process, which keeps the snapshot's pages from being reused meanwhile.
* A new store is created under a temporary name and linked into place only once it is
  whole: a file at a store's name is never a half-made one, so an empty or short file there
  is damage, never an interrupted first start.
* The lock file gets real disk blocks before LMDB maps it: LMDB writes its reader table
  through a shared map, and a write into a hole of a file on a full disk is a SIGBUS.
* A map grows only after an address-space probe of the new size succeeded: LMDB unmaps the
  old map before mapping the new one, and a failed mmap leaves it with none (the next read
  would be a SIGSEGV).
"""

from __future__ import annotations

import dataclasses
import errno
import mmap
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import lmdb

from gensokyo_idmap.errors import StoreError
from gensokyo_idmap.store.lmdb.check import (
    DamagedStoreError,
    LmdbMeta,
    check_meta,
    check_tree,
    open_to_read,
    read_metas,
)
from gensokyo_idmap.store.lmdb.stores_record import held_before

__all__ = ["begin_read", "check_before_map", "check_pinned", "create_whole", "fsync_path",
           "lock_path", "missing",
           "prepare_lock_file", "probe_address_space", "refused"]

#: Checks before giving up on a quiet moment and checking under a read transaction.
_ATTEMPTS: Final = 3
#: LMDB's lock file with the default 126 reader slots (64-bit): 125 * 64 + 192 bytes.
_LOCK_FILE_SIZE: Final = 8192


def lock_path(db: Path) -> Path:
    return db.with_name(db.name + "-lock")


def _recovery_text(recovery: str, path: Path) -> str:
    return recovery.format(path=path, dir=path.parent)


def refused(exc: StoreError, path: Path, recovery: str | None) -> StoreError:
    """The error of a damaged store file, with what to do for a store that is refused
    (``recovery``, with ``{path}`` and ``{dir}`` to fill in; None: a disposable one)."""
    if recovery is None:
        return exc
    return DamagedStoreError(f"{exc.message}. It is refused and left as it is; nothing was "
                             f"written. To recover: {_recovery_text(recovery, path)}")


def missing(path: Path, recovery: str | None) -> StoreError | None:
    """The error for a store ``path`` that is missing although its data dir held it."""
    if recovery is None:
        return None
    why = held_before(path)
    if why is None:
        return None
    return StoreError(f"{path} is missing, but this data dir held it ({why}). It is not "
                      f"created afresh; nothing was written. To recover: "
                      f"{_recovery_text(recovery, path)}")


def _metas(fd: int, name: str) -> tuple[LmdbMeta, LmdbMeta]:
    """Both meta pages as they are now (the file size left out: a commit grows the file
    before it writes its meta page)."""
    return tuple(dataclasses.replace(m, file_size=0)  # type: ignore[return-value]
                 for m in read_metas(fd, os.fstat(fd).st_size, name))


def _walk(fd: int, meta: LmdbMeta, name: str) -> StoreError | None:
    """Check the tree of ``meta`` (as of now, with the file's size); the damage found."""
    meta = dataclasses.replace(meta, file_size=os.fstat(fd).st_size)
    try:
        check_meta(meta, name)
        check_tree(fd, meta, name)
    except DamagedStoreError as exc:
        return exc
    return None


def check_before_map(path: Path) -> bool:
    """Check ``path`` with plain reads; False when it kept changing meanwhile (a writer is
    busy: check again with :func:`check_pinned` once it is open).

    A walk stands when both meta pages read the same after it as before: no commit finished
    meanwhile (none was half-written when they were read), and a commit in progress writes
    only pages the newest snapshot does not use.
    Raises :class:`~gensokyo_idmap.store.lmdb.check.DamagedStoreError`.
    """
    name = str(path)
    fd = open_to_read(path)
    try:
        for _ in range(_ATTEMPTS):
            metas = _metas(fd, name)
            damage = _walk(fd, max(metas, key=lambda m: m.txnid), name)
            if _metas(fd, name) == metas:
                if damage is not None:
                    raise damage
                return True
        return False
    finally:
        os.close(fd)


def begin_read(env: lmdb.Environment) -> lmdb.Transaction[bytes]:
    """A read transaction of an env this thread alone uses; a map another process grew is
    adopted first."""
    try:
        return env.begin()
    except lmdb.MapResizedError:
        env.set_mapsize(0)
        return env.begin()


def check_pinned(env: lmdb.Environment, path: Path) -> None:
    """Check the snapshot a read transaction of ``env`` holds (its pages stay put)."""
    name = str(path)
    fd = open_to_read(path)
    try:
        for _ in range(_ATTEMPTS * 10):
            with begin_read(env) as txn:
                wanted = txn.id()
                metas = _metas(fd, name)
                mine = [meta for meta in metas if meta.txnid == wanted]
                if not mine:
                    continue  # two commits since it began: its meta page is overwritten
                damage = _walk(fd, mine[0], name)
                if damage is None:
                    return
                if [m for m in _metas(fd, name) if m.txnid == wanted] == mine:
                    raise damage  # the meta page was not being rewritten meanwhile
        raise StoreError(f"{path} changes too fast to be checked; try again")
    finally:
        os.close(fd)


def create_whole(path: Path, options: dict[str, Any],
                 initialise: Callable[[lmdb.Environment], None]) -> None:
    """Create the store ``path`` under a temporary name and link it into place when whole.

    A store someone else created meanwhile wins (a link never replaces a file).
    """
    scratch = path.with_name(f".{path.name}.new-{os.getpid()}")
    scratch.unlink(missing_ok=True)
    try:
        env = lmdb.open(str(scratch), **{**options, "lock": False, "create": True})
        try:
            initialise(env)
            env.sync(True)
        finally:
            env.close()
        fsync_path(scratch)
        try:
            os.link(scratch, path)
        except FileExistsError:
            pass
        fsync_path(path.parent)
    except (lmdb.Error, OSError) as exc:
        raise StoreError(f"cannot create {path}: {exc}") from exc
    finally:
        scratch.unlink(missing_ok=True)


def fsync_path(path: Path) -> None:
    """fsync a file or a directory by name."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def prepare_lock_file(db: Path) -> None:
    """Give the lock file of ``db`` real blocks, never changing a byte LMDB wrote.

    A missing one is made with LMDB's own size, so LMDB neither resizes it nor leaves a hole;
    a shorter one (no process has it open: LMDB would have sized it) is brought to that size;
    an existing one is allocated where it has holes. Out of space: a clear error now (and no
    lock file left behind), not a SIGBUS when LMDB writes its reader table.
    """
    lock = lock_path(db)
    created = False
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        created = True
    except FileExistsError:
        try:
            fd = os.open(lock, os.O_RDWR)
        except OSError:
            return  # LMDB will say what is wrong with it
    except OSError as exc:
        raise StoreError(f"cannot create {lock}: {exc.strerror}") from None
    try:
        os.posix_fallocate(fd, 0, max(os.fstat(fd).st_size, _LOCK_FILE_SIZE))
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL):
            return  # a file system without fallocate: nothing to be done here
        if created:
            lock.unlink(missing_ok=True)
        raise StoreError(f"cannot allocate {lock}: {exc.strerror}") from None
    finally:
        os.close(fd)


def probe_address_space(size: int) -> None:
    """Raise unless a map of ``size`` bytes can be made now (reserved, then given back)."""
    flags = mmap.MAP_PRIVATE | getattr(mmap, "MAP_ANONYMOUS", 0x20) | 0x4000  # MAP_NORESERVE
    try:
        probe = mmap.mmap(-1, size, flags=flags, prot=0)  # PROT_NONE: address space only
    except (OSError, OverflowError, ValueError) as exc:
        raise StoreError(f"the map cannot grow to {size} bytes: {exc}") from None
    probe.close()
