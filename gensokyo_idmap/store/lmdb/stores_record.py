"""``stores.json``: the data dir's durable record of the stores it has held.

A store that must never start again from nothing (openid-map.db: a new graph would hand
vUIN 1 to a second person; outbox.db: events owed to frameworks) cannot tell "brand new" from
"deleted" or "emptied" by looking at itself. This file can: a store's name is written into it,
atomically (written aside, fsynced, renamed, the directory fsynced), when the store is first
created or first opened by a version that keeps this record (an upgrade). From then on a
missing store is refused instead of re-created.

Its lock file (``<name>-lock``, which LMDB leaves beside the store) counts as the same
evidence, for data dirs from before this record existed. An unreadable record counts as
having recorded every precious store: the safe side.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

from gensokyo_idmap.data_dir import IDENTITY_DB, OUTBOX_DB, STORES_RECORD
from gensokyo_idmap.errors import StoreError

__all__ = ["PRECIOUS_STORES", "STORES_FILE", "held_before", "record_store"]

STORES_FILE: Final = STORES_RECORD
#: The stores that are refused rather than re-created once the data dir has held them.
PRECIOUS_STORES: Final = (IDENTITY_DB, OUTBOX_DB)
_NOTE: Final = ("gensokyo-idmap: the stores this data dir has held. A store named here that "
                "is missing is refused, never re-created. Do not edit.")


def _recorded(data_dir: Path) -> frozenset[str] | None:
    """The names recorded; None when the file exists but cannot be read as the record."""
    try:
        text = (data_dir / STORES_FILE).read_text(encoding="utf-8")
    except FileNotFoundError:
        return frozenset()
    except (OSError, UnicodeDecodeError):
        return None
    try:
        stores = json.loads(text)["stores"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(stores, dict):
        return None
    return frozenset(str(name) for name in stores)


def held_before(path: Path) -> str | None:
    """Why we know the data dir held the store ``path`` (which is missing now), or None."""
    recorded = _recorded(path.parent)
    if recorded is None:
        return f"{path.parent / STORES_FILE} is unreadable, so it may have recorded it"
    if path.name in recorded:
        return f"{path.parent / STORES_FILE} records it"
    lock = path.with_name(path.name + "-lock")
    if lock.exists():
        return f"its lock file {lock.name} is still there"
    return None


@contextlib.contextmanager
def _dir_locked(data_dir: Path) -> Iterator[int]:
    """The data dir, open and exclusively flocked: one process updates the record at a time."""
    fd = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # drops the flock


def _write_atomically(data_dir: Path, dir_fd: int, doc: dict[str, Any]) -> None:
    target = data_dir / STORES_FILE
    scratch = data_dir / f".{STORES_FILE}.{os.getpid()}.tmp"
    try:
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(scratch, target)
        os.fsync(dir_fd)
    except OSError:
        scratch.unlink(missing_ok=True)
        raise


def record_store(path: Path, clock: Callable[[], float] = time.time) -> None:
    """Record that the data dir holds the store ``path`` (once; later calls read only)."""
    data_dir = path.parent
    if path.name in (_recorded(data_dir) or frozenset()):
        return
    try:
        with _dir_locked(data_dir) as dir_fd:
            recorded = _recorded(data_dir)
            if recorded is not None and path.name in recorded:
                return  # another process recorded it meanwhile
            # an unreadable record is replaced by one naming every precious store: the
            # safe reading of what it said
            names = set(PRECIOUS_STORES) if recorded is None else set(recorded)
            names.add(path.name)
            previous = _load(data_dir) if recorded is not None else {}
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock()))
            stores = {name: previous.get(name) or {"first_seen": stamp} for name in names}
            _write_atomically(data_dir, dir_fd, {"note": _NOTE, "stores": stores})
    except OSError as exc:
        raise StoreError(f"cannot record {path.name} in {data_dir / STORES_FILE}: "
                         f"{exc.strerror}") from None


def _load(data_dir: Path) -> dict[str, Any]:
    try:
        stores = json.loads((data_dir / STORES_FILE).read_text(encoding="utf-8"))["stores"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {str(k): v for k, v in stores.items()} if isinstance(stores, dict) else {}
