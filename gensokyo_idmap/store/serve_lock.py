"""One daemon per data dir: ``serve`` holds an exclusive OS lock on ``<data_dir>/serve.lock``.

Two daemons on one data dir resume the same gateway session and knock each other off (every
event then arrived twice). LMDB lets both open the stores, so the guard is a lock of its own,
taken before any store is opened:

- ``flock(LOCK_EX | LOCK_NB)`` on ``serve.lock``, held by an open descriptor for the
  daemon's life. The kernel drops it when the process ends however it ends (``kill -9``
  included), so a stale lock cannot outlive its holder and nothing has to be cleaned up.
- The file holds the holder's pid as text, for the error the next ``serve`` gives. The file
  itself stays: deleting it would let a third process lock a fresh inode while a second
  still waits on the old one.
- Only ``serve`` takes it. CLI commands that read (``stats``, ``verify``, lookups) open the
  stores beside a running daemon as LMDB allows.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType
from typing import Final

from gensokyo_idmap.data_dir import SERVE_LOCK
from gensokyo_idmap.errors import DataDirInUseError, StoreError

__all__ = ["LOCK_NAME", "ServeLock"]

LOCK_NAME: Final = SERVE_LOCK


class ServeLock:
    """The data dir's serve lock: :meth:`acquire` or raise, :meth:`release` (or use as a
    context manager)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self.path = self.data_dir / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise :class:`DataDirInUseError` naming the data dir and the
        holder's pid (:class:`StoreError` when the data dir cannot hold a lock file)."""
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise StoreError(f"cannot open {self.path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise DataDirInUseError(
                f"data dir {self.data_dir} is in use by another gensokyo-idmap serve "
                f"(pid {holder or 'unknown'}, lock {self.path}): one daemon per data dir; "
                "stop that one first, or give this one another idmap.data_dir") from None
        except OSError as exc:
            os.close(fd)
            raise StoreError(f"cannot lock {self.path}: {exc.strerror or exc}") from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        except OSError:
            pass  # the pid is a courtesy for the next serve's error; the lock is what counts
        self._fd = fd

    def release(self) -> None:
        """Let go (closing the descriptor drops the lock)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> ServeLock:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def _read_pid(fd: int) -> int | None:
    """The pid the holder wrote, if it has yet (it writes right after locking)."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
