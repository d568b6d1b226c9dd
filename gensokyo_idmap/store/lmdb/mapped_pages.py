"""Unmap the pages of an LMDB file that this process read, so that its resident size
follows what it reads now rather than every page it ever read.

Why: LMDB reads through a shared mapping of its file, and every page a read or the writer
touched stays mapped into the process until it ends. So the daemon's resident size counted
every page of openid-map.db and msgid-map.db ever read: the identity store grows with every
new person (by design: nobody is forgotten), and message ids and claims are written to ever
new pages (copy on write) until their TTL turns over. ``bench/memory.py`` measured 14 MiB of
file-backed RSS (10.6 of msgid-map.db, 3.5 of openid-map.db) after 20,000 events from
10,000 new users, growing with each event; the daemon's hot path touches a few hundred
pages of them.

``madvise(MADV_DONTNEED)`` on a shared file mapping drops the page table entries and
nothing else: the data stays in the file and in the kernel's page cache, which keeps or
evicts it as it does any cached file. The next read of such a page maps it again (a minor
fault, about a microsecond, with its neighbours mapped too); the B-tree's upper pages come
back at the first read.

Safety: the advice must reach LMDB's map and nothing else. The map is found in
``/proc/self/maps`` by the file's device and inode, shared mappings only (a private one
could hold changes of its own; LMDB's never is), and the caller holds what keeps the map in
place meanwhile (:meth:`~gensokyo_idmap.store.lmdb.env.LmdbEnv.release_mapped_pages`: the
env's read lock, which a remap and a close take). No store here maps its file writable
(``writemap`` off), so nothing is ever written through the map. Where there is no
``/proc/self/maps`` or no ``madvise`` (not Linux) this does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import functools
import mmap
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, Protocol

from gensokyo_idmap.periodic import every

__all__ = ["RELEASE_INTERVAL_SECONDS", "file_mappings", "madvise_function", "release",
           "run_releaser"]

#: How often the daemon unmaps its LMDB files' pages: often enough that a flood's pages do
#: not linger (20,000 events map about 14 MiB), rarely enough that mapping the hot pages
#: again costs nothing (a few hundred minor faults).
RELEASE_INTERVAL_SECONDS: Final = 10.0

_MADV_DONTNEED: Final = getattr(mmap, "MADV_DONTNEED", 4)
_PAGE: Final = mmap.PAGESIZE

Madvise = Callable[[int, int], int]


@functools.cache
def madvise_function() -> Madvise | None:
    """``madvise(addr, length, MADV_DONTNEED)`` of the C library (0 on success), or None
    where it has none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        madvise = ctypes.CDLL(name, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    return lambda addr, length: int(madvise(addr, length, _MADV_DONTNEED))


def file_mappings(path: Path, maps: str) -> list[tuple[int, int]]:
    """(start, end) of each shared mapping of the file at ``path`` in ``maps`` (the text of
    ``/proc/self/maps``), known by its device and inode, not its name."""
    st = os.stat(path)
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}"
    inode = str(st.st_ino)
    found = []
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if (len(fields) >= 5 and fields[4] == inode and fields[3] == device
                and fields[1].endswith("s")):
            start, _, end = fields[0].partition("-")
            found.append((int(start, 16), int(end, 16)))
    return found


def release(path: Path, madvise: Madvise | None = None) -> int:
    """Unmap every page of ``path``'s shared mappings in this process; the bytes advised
    (0 where this cannot be done). The caller keeps the mappings in place meanwhile.
    ``madvise`` defaults to :func:`madvise_function`'s."""
    madvise = madvise or madvise_function()
    if madvise is None:
        return 0
    try:
        ranges = file_mappings(path, Path("/proc/self/maps").read_text())
    except OSError:
        return 0
    advised = 0
    for start, end in ranges:
        if start % _PAGE == 0 and madvise(start, end - start) == 0:
            advised += end - start
    return advised


class Releasing(Protocol):
    def release_mapped_pages(self) -> int: ...


async def run_releaser(stop: asyncio.Event, stores: Sequence[Releasing],
                       interval_seconds: float = RELEASE_INTERVAL_SECONDS) -> None:
    """Unmap the pages of each of ``stores`` every ``interval_seconds`` until ``stop`` is
    set, on a worker thread (a store's reads wait for it: well under a millisecond)."""
    loop = asyncio.get_running_loop()
    async for _ in every(interval_seconds, stop):
        for store in stores:
            await loop.run_in_executor(None, store.release_mapped_pages)
