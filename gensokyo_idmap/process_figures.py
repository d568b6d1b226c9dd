"""This process's figures for the console's system page: CPU time, resident memory, open
files, uptime, the data dir's free space and the size of each store file.

Read from what the system keeps anyway (``os.times``, ``/proc/self``, ``statvfs``, ``stat``),
at the moment a page asks; where one is not available (``/proc`` is Linux's) it is None and
the page says so. Nothing is sampled in the background.
"""

from __future__ import annotations

import os
import resource
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["FileSize", "ProcessFigures", "read_figures", "resident_parts"]

_PAGE: Final = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True, slots=True)
class FileSize:
    name: str
    #: as ``ls -l`` shows it (an LMDB file is as long as its map), and as ``du`` does
    length: int
    on_disk: int


@dataclass(frozen=True, slots=True)
class ProcessFigures:
    pid: int
    uptime_seconds: float
    cpu_user_seconds: float
    cpu_system_seconds: float
    #: the share of one CPU used since the process started, in percent
    cpu_percent: float
    rss_bytes: int | None
    open_files: int | None
    open_files_limit: int | None
    data_dir: str
    disk_free_bytes: int | None
    disk_total_bytes: int | None
    files: tuple[FileSize, ...]


def _rss() -> int | None:
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def resident_parts(status: str = "/proc/self/status") -> tuple[int | None, int | None]:
    """This process's resident memory in bytes, (anonymous, file-backed): what the heap
    holds apart from the mapped files (the LMDB maps, the libraries), which the system
    takes back when it needs to. (None, None) where ``/proc`` does not say (not Linux)."""
    parts: dict[str, int] = {}
    try:
        with open(status, encoding="ascii") as lines:
            for line in lines:
                name, _, value = line.partition(":")
                if name in ("RssAnon", "RssFile"):
                    parts[name] = int(value.split()[0]) * 1024  # in kB
    except (OSError, ValueError, IndexError):
        return None, None
    return parts.get("RssAnon"), parts.get("RssFile")


def _open_files() -> int | None:
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            return max(0, len(os.listdir(folder)) - 1)  # less the one listing it
        except OSError:
            continue
    return None


def _limit() -> int | None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def read_figures(started: float, data_dir: Path, files: Iterable[Path],
                 now: float | None = None) -> ProcessFigures:
    """The figures now; ``started``: when the process started (``time.time()`` then);
    ``files``: the store files to measure (those that exist)."""
    now = time.time() if now is None else now
    times = os.times()
    uptime = max(now - started, 1e-9)
    try:
        disk = shutil.disk_usage(data_dir)
        free: int | None = disk.free
        total: int | None = disk.total
    except OSError:
        free = total = None
    sizes = []
    for path in files:
        try:
            stat = path.stat()
        except OSError:
            continue
        sizes.append(FileSize(path.name, stat.st_size, stat.st_blocks * 512))
    return ProcessFigures(
        pid=os.getpid(), uptime_seconds=uptime, cpu_user_seconds=times.user,
        cpu_system_seconds=times.system,
        cpu_percent=100.0 * (times.user + times.system) / uptime, rss_bytes=_rss(),
        open_files=_open_files(), open_files_limit=_limit(), data_dir=str(data_dir),
        disk_free_bytes=free, disk_total_bytes=total, files=tuple(sizes))
