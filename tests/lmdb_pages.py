"""LMDB files page by page, for the store and fault tests: the pages in use, and a healthy
file that ends before its meta page's last page, made by LMDB itself.

LMDB writes only the pages a commit leaves dirty. A write transaction that takes pages from
the end of the file (a value too big for any run of free pages) and frees them again before
it commits drops them from the pages to write (``mdb_ovpage_free`` moves them to the
reusable list once that list is loaded), yet its meta page counts them: the file ends
before ``(last page + 1) * page size``, and LMDB reads and writes it as any other. Any
commit that frees pages it took from the end leaves such a file (pages copied and emptied
in one outbox batch of adds and removes, too), until later commits reuse those pages; a
daemon killed meanwhile starts again on it (issue 29).

The helper writes through py-lmdb on a closed store, into the main database only, and takes
out everything it added: the stores' tables are as they were.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import lmdb

from gensokyo_idmap.store.lmdb.check import LmdbMeta, _Walk, read_meta, read_metas

_SCRATCH = b"\xfftest-tail:"


def walk_pages(path: Path) -> tuple[set[int], list[int]]:
    """(the pages the check's walk reaches, the pages the free list names) of ``path``."""
    free: list[int] = []

    class Counting(_Walk):
        def page_list(self, value: bytes, where: str) -> None:
            super().page_list(value, where)
            free.extend(struct.unpack_from(f"<{len(value) // 8}Q", value)[1:])

    fd = os.open(path, os.O_RDONLY)
    try:
        meta = read_meta(fd, os.fstat(fd).st_size, str(path))
        walk = Counting(fd, meta, str(path), set())
        walk.free_list()
        walk.database(meta.main, "the main database", main=True)
        return walk.seen, free
    finally:
        os.close(fd)


def _newest_meta(path: Path) -> LmdbMeta:
    """The meta LMDB would use, unchecked (with the file's size)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return max(read_metas(fd, os.fstat(fd).st_size, str(path)), key=lambda m: m.txnid)
    finally:
        os.close(fd)


def pages_past_end(path: Path) -> int:
    """How many pages the newest meta counts beyond the file's end."""
    meta = _newest_meta(path)
    return meta.last_page + 1 - -(-meta.file_size // meta.page_size)


def leave_unwritten_tail(path: Path) -> int:
    """Commit to ``path`` (a closed store) a transaction that grows the file by pages it
    frees again; how many pages its meta then counts past the file's end.

    Three commits make reusable free pages first (a page freed by one commit is reused only
    from two commits later on: no snapshot from before its freeing may still be open), so
    that the last commit has loaded its reusable list when it frees the big value.
    """
    meta = _newest_meta(path)
    big = 2 * max(meta.file_size, 1 << 16)  # longer than any run of free pages
    env = lmdb.open(str(path), subdir=False, max_dbs=16, readahead=False,
                    map_size=max(meta.map_size, 2 * (meta.file_size + big)))
    try:
        env.reader_check()  # a killed process's reader slot would keep the free pages held
        with env.begin(write=True) as txn:
            for n in range(8):
                txn.put(_SCRATCH + b"%d" % n, b"s" * 9000)
        with env.begin(write=True) as txn:
            for n in range(8):
                txn.delete(_SCRATCH + b"%d" % n)
        with env.begin(write=True) as txn:
            txn.put(_SCRATCH + b"mark", b"1")
        with env.begin(write=True) as txn:
            txn.put(_SCRATCH + b"big", b"b" * big)
            txn.delete(_SCRATCH + b"big")
            txn.delete(_SCRATCH + b"mark")
    finally:
        env.close()
    return pages_past_end(path)
