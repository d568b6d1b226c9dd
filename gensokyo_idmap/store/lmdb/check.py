"""An LMDB file checked with plain reads before anything maps it.

LMDB trusts its file: it reads pages through a memory map, so a page number past the end of
a truncated file is a SIGBUS, and a damaged page header trips an ``assert`` (SIGABRT) or
sends a copy past the map. A signal kills the daemon with no message, and cannot be caught.
So every store file is read here first, with ``pread`` (a short file is a short read, never
a signal), and refused with :class:`DamagedStoreError` naming what is wrong:

* :func:`read_meta` - the header: the file is not empty, both meta pages carry LMDB's magic
  ``0xBEEFC0DE``, data version 1 and one page size, and the newest one's roots lie among its
  pages (2 to its last page). Costs two reads.
* :func:`check_tree` - every page the newest meta reaches (the free list, the main database,
  every named database, dupsort sub-databases and sub-pages, overflow pages): its page
  number, its type, its bounds, each node inside the page, each child page and each whole
  overflow run inside the file, one depth for all leaves, no page reached twice. What passes
  can be read by LMDB without leaving the pages it checked. Costs one read of every page in
  use.

The file may end before the meta's last page, and that is no damage: a page a transaction
took from the end of the file and freed again before its commit is never written (LMDB
drops it from the pages to write), yet the meta counts it; ``mdb_env_copy`` itself copies
only up to the file's end. LMDB reads only pages the trees reach, so only a reached page
past the end is refused (a free-list entry may name a page past it: a writer that takes it
writes it before any reader sees it).

Layout of the 64-bit LMDB 0.9 format (``mdb.c``): a page starts with ``pgno u64, pad u16,
flags u16, lower u16, upper u16`` (an overflow page has ``pages u32`` in lower/upper), then
the node offsets; a node is ``lo u16, hi u16, flags u16, ksize u16``, the key, then the data
(a branch node keeps its child's page number in lo/hi/flags). A meta page holds ``magic u32,
version u32, address u64, mapsize u64``, two database records (free list, main) of 48 bytes
``pad u32 (the page size, in the free list's), flags u16, depth u16, branch, leaf, overflow
pages, entries, root (u64 each)``, then ``last_pgno u64, txnid u64``.
"""

from __future__ import annotations

import dataclasses
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from gensokyo_idmap.errors import StoreError

__all__ = ["DamagedStoreError", "DbRecord", "LmdbMeta", "check_file", "check_meta",
           "check_tree", "open_to_read", "read_meta", "read_metas"]

MAGIC: Final = 0xBEEFC0DE
DATA_VERSION: Final = 1
_PAGE_HEADER: Final = 16
_NODE_HEADER: Final = 8
_DB_RECORD: Final = 48
_META_SIZE: Final = _PAGE_HEADER + 136  # through txnid
_NO_PAGE: Final = 0xFFFF_FFFF_FFFF_FFFF  # an empty database's root
_MAX_DEPTH: Final = 32  # LMDB's cursor stack: a deeper tree cannot be read

# page flags
_BRANCH: Final = 0x01
_LEAF: Final = 0x02
_OVERFLOW: Final = 0x04
_META: Final = 0x08
_LEAF2: Final = 0x20
_SUBPAGE: Final = 0x40
_KIND: Final = _BRANCH | _LEAF | _OVERFLOW | _META | _LEAF2 | _SUBPAGE
# node flags
_BIGDATA: Final = 0x01
_SUBDATA: Final = 0x02
_DUPDATA: Final = 0x04
# database flags
_DUPSORT: Final = 0x04
_DUPFIXED: Final = 0x10

_META_LAYOUT: Final = struct.Struct("<QHHHHIIQQ")  # page header, magic, version, address, map
_DB_LAYOUT: Final = struct.Struct("<IHHQQQQQ")
_TAIL_LAYOUT: Final = struct.Struct("<QQ")
_FLAGS: Final = struct.Struct("<H")
_BOUNDS: Final = struct.Struct("<HH")
_NODE: Final = struct.Struct("<HHHH")
_OVERFLOW_LAYOUT: Final = struct.Struct("<QHHI")


class DamagedStoreError(StoreError):
    """A store file is not a whole LMDB file: empty, cut short, or with damaged pages."""

    code = "store_damaged"


@dataclass(frozen=True, slots=True)
class DbRecord:
    """One database's record (``MDB_db``): where its tree starts and how deep it is."""

    flags: int
    depth: int
    entries: int
    root: int

    @property
    def empty(self) -> bool:
        return self.root == _NO_PAGE


@dataclass(frozen=True, slots=True)
class LmdbMeta:
    """The meta page LMDB would use (the one with the higher transaction id)."""

    page_size: int
    txnid: int
    last_page: int
    map_size: int
    free: DbRecord
    main: DbRecord
    file_size: int


def _db_record(raw: bytes | memoryview, offset: int) -> DbRecord:
    _pad, flags, depth, _b, _l, _o, entries, root = _DB_LAYOUT.unpack_from(raw, offset)
    return DbRecord(flags, depth, entries, root)


def _read(fd: int, size: int, offset: int) -> bytes:
    """``size`` bytes at ``offset`` (fewer at the end of the file)."""
    chunks: list[bytes] = []
    while size > 0:
        chunk = os.pread(fd, size, offset)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _parse_meta(raw: bytes, which: int, page_size: int | None) -> tuple[int, LmdbMeta] | str:
    """(its page size, the meta) or what is wrong with meta page ``which``."""
    if len(raw) < _META_SIZE:
        return f"meta page {which} is cut short ({len(raw)} of {_META_SIZE} bytes)"
    _pgno, _pad, flags, _lo, _up, magic, version, _addr, map_size = _META_LAYOUT.unpack_from(raw)
    if not flags & _META:
        return f"page {which} is not a meta page (flags {flags:#06x})"
    if magic != MAGIC:
        return f"meta page {which} has magic {magic:#010x}, not LMDB's {MAGIC:#010x}"
    if version != DATA_VERSION:
        return f"meta page {which} has data version {version}, not {DATA_VERSION}"
    free = _db_record(raw, 40)
    main = _db_record(raw, 40 + _DB_RECORD)
    size = struct.unpack_from("<I", raw, 40)[0]  # the free list record's pad: the page size
    if size < 512 or size > 65536 or size & (size - 1):
        return f"meta page {which} has page size {size}, not a power of two in 512..65536"
    if page_size is not None and size != page_size:
        return f"meta page {which} has page size {size}, meta page 0 {page_size}"
    last, txnid = _TAIL_LAYOUT.unpack_from(raw, 40 + 2 * _DB_RECORD)
    return size, LmdbMeta(size, txnid, last, map_size, free, main, 0)


def read_metas(fd: int, file_size: int, name: str) -> tuple[LmdbMeta, LmdbMeta]:
    """Both meta pages, each checked on its own (two reads, no map)."""
    if file_size == 0:
        raise DamagedStoreError(f"{name} is empty (0 bytes): not an LMDB file")
    first = _parse_meta(_read(fd, _META_SIZE, 0), 0, None)
    if isinstance(first, str):
        raise DamagedStoreError(f"{name} is not a whole LMDB file: {first} "
                                f"(file size {file_size} bytes)")
    page_size = first[0]
    second = _parse_meta(_read(fd, _META_SIZE, page_size), 1, page_size)
    if isinstance(second, str):
        raise DamagedStoreError(f"{name} is not a whole LMDB file: {second} "
                                f"(file size {file_size} bytes)")
    return (dataclasses.replace(first[1], file_size=file_size),
            dataclasses.replace(second[1], file_size=file_size))


def read_meta(fd: int, file_size: int, name: str) -> LmdbMeta:
    """The meta LMDB would use (the newer one), its roots checked (:func:`check_meta`)."""
    meta = max(read_metas(fd, file_size, name), key=lambda m: m.txnid)
    check_meta(meta, name)
    return meta


def check_meta(meta: LmdbMeta, name: str) -> None:
    """The meta's roots lie among its pages. Not against the file size: the file may end
    before the last page (see the module notes); the walk refuses a reached page past it."""
    if meta.last_page < 1:
        raise DamagedStoreError(f"{name}: its meta page gives {meta.last_page} as its last "
                                f"page, below its two meta pages (0 and 1)")
    for label, record in (("free list", meta.free), ("main database", meta.main)):
        if not record.empty and not 2 <= record.root <= meta.last_page:
            raise DamagedStoreError(
                f"{name}: the {label} starts at page {record.root}, outside pages 2.."
                f"{meta.last_page}")


@dataclass(slots=True)
class _Walk:
    """One walk over the pages of one snapshot."""

    fd: int
    meta: LmdbMeta
    name: str
    seen: set[int]

    def fail(self, where: str, what: str) -> DamagedStoreError:
        return DamagedStoreError(f"{self.name} is damaged: {where}: {what}")

    def cut_short(self, where: str, first: int, last: int) -> DamagedStoreError:
        """A page in use (``first``; an overflow run ``first``..``last``) past the end."""
        pages = f"page {first}" if first == last else f"pages {first}..{last}"
        return DamagedStoreError(
            f"{self.name} is cut short: {where} points to {pages}, but the file ends after "
            f"{self.meta.file_size} bytes (truncated?)")

    def page(self, pgno: int, where: str) -> bytes:
        if not 2 <= pgno <= self.meta.last_page:
            raise self.fail(where, f"points to page {pgno}, outside pages 2.."
                                   f"{self.meta.last_page}")
        if pgno in self.seen:
            raise self.fail(where, f"page {pgno} is reached twice (a loop or a shared page)")
        self.seen.add(pgno)
        size = self.meta.page_size
        raw = _read(self.fd, size, pgno * size)
        if len(raw) < size:
            raise self.cut_short(where, pgno, pgno)
        stored = struct.unpack_from("<Q", raw)[0]
        if stored != pgno:
            raise self.fail(f"page {pgno}", f"holds page number {stored}")
        return raw

    def tree(self, record: DbRecord, where: str
             ) -> Iterator[tuple[int, bytes, tuple[int, ...]]]:
        """(page number, leaf page, its node offsets) of every leaf of one database."""
        if record.empty:
            return
        if not 1 <= record.depth <= _MAX_DEPTH:
            raise self.fail(where, f"depth {record.depth} is not 1..{_MAX_DEPTH}")
        stack: list[tuple[int, int, str]] = [(record.root, 1, where)]
        while stack:
            pgno, level, parent = stack.pop()
            raw = self.page(pgno, parent)
            flags = _FLAGS.unpack_from(raw, 10)[0] & _KIND
            here = f"page {pgno}"
            if flags == _LEAF | _LEAF2:
                lower = _FLAGS.unpack_from(raw, 12)[0]
                offsets: tuple[int, ...] = tuple(range(max(0, lower - _PAGE_HEADER) // 2))
            else:
                offsets = self.node_offsets(raw, 0, len(raw), here)
            if flags == _BRANCH:
                if level >= record.depth:
                    raise self.fail(f"page {pgno}", f"a branch page at depth {level} of a "
                                                    f"tree {record.depth} deep")
                if not offsets:
                    raise self.fail(here, "a branch page without children")
                for child in self.children(raw, offsets, here):
                    stack.append((child, level + 1, here))
            elif flags in (_LEAF, _LEAF | _LEAF2):
                if level != record.depth:
                    raise self.fail(f"page {pgno}", f"a leaf at depth {level} of a tree "
                                                    f"{record.depth} deep")
                yield pgno, raw, offsets
            else:
                raise self.fail(f"page {pgno}", f"neither a branch nor a leaf page "
                                                f"(flags {flags:#06x})")

    def node_offsets(self, raw: bytes, base: int, size: int, where: str) -> tuple[int, ...]:
        """The node offsets of the page (or sub-page) at ``base``, its bounds checked."""
        lower, upper = _BOUNDS.unpack_from(raw, base + 12)
        if lower < _PAGE_HEADER or lower > upper or upper > size or (lower - _PAGE_HEADER) % 2:
            raise self.fail(where, f"bad free-space bounds (lower {lower}, upper {upper})")
        offsets = struct.unpack_from(f"<{(lower - _PAGE_HEADER) // 2}H", raw, base + 16)
        if offsets and (min(offsets) < upper or max(offsets) > size - _NODE_HEADER):
            raise self.fail(where, "a node lies outside the page")
        return offsets

    def children(self, raw: bytes, offsets: tuple[int, ...], where: str) -> list[int]:
        size = len(raw)
        found: list[int] = []
        for offset in offsets:
            lo, hi, top, ksize = _NODE.unpack_from(raw, offset)
            if offset + _NODE_HEADER + ksize > size:
                raise self.fail(where, "the key of a node runs past the page")
            found.append(lo | hi << 16 | top << 32)
        return found

    def leaf_nodes(self, raw: bytes, offsets: tuple[int, ...], where: str, dupsort: bool,
                   every: bool = False) -> list[tuple[int, int, int, int]]:
        """Check each node of a leaf page: (flags, key size, data offset, data size) of
        those with flags (of all with ``every``). The hot loop of the walk: a node per entry.
        """
        size = len(raw)
        found: list[tuple[int, int, int, int]] = []
        for offset in offsets:
            lo, hi, flags, ksize = _NODE.unpack_from(raw, offset)
            dsize = lo | hi << 16
            start = offset + _NODE_HEADER + ksize
            if start + (8 if flags & _BIGDATA else dsize) > size:
                raise self.fail(where, f"a node runs past the page (key {ksize}, data "
                                       f"{dsize} bytes)")
            if flags:
                if flags & ~(_BIGDATA | _SUBDATA | _DUPDATA):
                    raise self.fail(where, f"a node has unknown flags {flags:#06x}")
                if flags & _DUPDATA and not dupsort:
                    raise self.fail(where, "a node holds duplicates in a table without")
                found.append((flags, ksize, start, dsize))
            elif every:
                found.append((flags, ksize, start, dsize))
        return found

    def overflow(self, pgno: int, dsize: int, where: str) -> None:
        size = self.meta.page_size
        raw = self.page(pgno, where)
        flags, pages = _OVERFLOW_LAYOUT.unpack_from(raw)[2:]
        if flags & _KIND != _OVERFLOW:
            raise self.fail(f"page {pgno}", f"not an overflow page (flags {flags:#06x})")
        if pages < 1 or pgno + pages - 1 > self.meta.last_page:
            raise self.fail(f"page {pgno}", f"an overflow of {pages} pages runs past page "
                                            f"{self.meta.last_page}")
        if pages * size - _PAGE_HEADER < dsize:
            raise self.fail(f"page {pgno}", f"an overflow of {pages} pages cannot hold "
                                            f"{dsize} bytes")
        if (pgno + pages) * size > self.meta.file_size:
            raise self.cut_short(where, pgno, pgno + pages - 1)
        for extra in range(pgno + 1, pgno + pages):
            if extra in self.seen:
                raise self.fail(f"page {pgno}", f"its page {extra} is reached twice")
            self.seen.add(extra)

    def database(self, record: DbRecord, where: str, *, main: bool = False) -> None:
        """Every page of one database, the named databases inside the main one included."""
        dupsort = bool(record.flags & _DUPSORT)
        for pgno, raw, offsets in self.tree(record, where):
            here = f"page {pgno}"
            if _FLAGS.unpack_from(raw, 10)[0] & _LEAF2:
                self.leaf2(raw, 0, len(offsets), len(raw), here)
                continue
            for flags, ksize, start, dsize in self.leaf_nodes(raw, offsets, here, dupsort):
                if flags & _BIGDATA:
                    if flags & (_SUBDATA | _DUPDATA):
                        raise self.fail(here, "a big value that is also a database")
                    self.overflow(struct.unpack_from("<Q", raw, start)[0], dsize, here)
                elif flags & _SUBDATA:
                    if dsize != _DB_RECORD:
                        raise self.fail(here, f"a database record of {dsize} bytes")
                    sub = _db_record(raw, start)
                    if flags & _DUPDATA:
                        self.database(sub, f"the duplicates of a key in {where}")
                    elif main:
                        key = raw[start - ksize:start].decode("utf-8", "replace")
                        self.database(sub, f"table {key!r}")
                    else:
                        raise self.fail(here, "a database record outside the main database")
                elif flags & _DUPDATA:
                    self.subpage(raw, start, dsize, here)

    def subpage(self, raw: bytes, base: int, size: int, where: str) -> None:
        """Duplicates kept inline: a small page inside a node (offsets from its start)."""
        where = f"{where} (duplicates)"
        if size < _PAGE_HEADER:
            raise self.fail(where, f"a sub-page of {size} bytes")
        flags = _FLAGS.unpack_from(raw, base + 10)[0] & _KIND
        if flags not in (_LEAF | _SUBPAGE, _LEAF | _SUBPAGE | _LEAF2):
            raise self.fail(where, f"not a sub-page (flags {flags:#06x})")
        offsets = self.node_offsets(raw, base, size, where)
        if flags & _LEAF2:
            self.leaf2(raw, base, len(offsets), size, where)
            return
        for offset in offsets:
            lo, hi, node_flags, ksize = _NODE.unpack_from(raw, base + offset)
            if node_flags or lo or hi or offset + _NODE_HEADER + ksize > size:
                raise self.fail(where, "a duplicate with data, flags, or past the sub-page")

    def leaf2(self, raw: bytes, base: int, count: int, size: int, where: str) -> None:
        ksize = _FLAGS.unpack_from(raw, base + 8)[0]
        if _PAGE_HEADER + count * ksize > size:
            raise self.fail(where, f"{count} fixed-size keys of {ksize} bytes overflow it")

    def free_list(self) -> None:
        """The free list's values are page lists (count, then page numbers): a page a writer
        would take from it must lie inside the file."""
        for pgno, raw, offsets in self.tree(self.meta.free, "the free list"):
            here = f"page {pgno}"
            if _FLAGS.unpack_from(raw, 10)[0] & _LEAF2:
                raise self.fail(here, "a free-list page with fixed-size keys")
            for flags, _k, start, dsize in self.leaf_nodes(raw, offsets, here, False,
                                                           every=True):
                if flags & (_SUBDATA | _DUPDATA):
                    raise self.fail(here, "a free-list entry that is a database")
                if flags & _BIGDATA:
                    first = struct.unpack_from("<Q", raw, start)[0]
                    self.overflow(first, dsize, here)
                    value = _read(self.fd, dsize, first * self.meta.page_size + _PAGE_HEADER)
                else:
                    value = raw[start:start + dsize]
                self.page_list(value, here)

    def page_list(self, value: bytes, where: str) -> None:
        if len(value) < 8 or len(value) % 8:
            raise self.fail(where, f"a free-list entry of {len(value)} bytes")
        numbers = struct.unpack_from(f"<{len(value) // 8}Q", value)
        if numbers[0] != len(numbers) - 1:
            raise self.fail(where, f"a free-list entry counts {numbers[0]} pages but holds "
                                   f"{len(numbers) - 1}")
        last = self.meta.last_page
        if len(numbers) > 1 and (min(numbers[1:]) < 2 or max(numbers[1:]) > last):
            raise self.fail(where, f"a free-list entry names a page outside 2..{last}")


def check_tree(fd: int, meta: LmdbMeta, name: str) -> int:
    """Walk every page ``meta`` reaches (see the module notes); how many pages are in use.

    The caller makes sure no writer reuses those pages meanwhile (a read transaction of that
    snapshot, or the same newest transaction id before and after the walk).
    """
    walk = _Walk(fd, meta, name, set())
    walk.free_list()
    walk.database(meta.main, "the main database", main=True)
    return len(walk.seen)


def open_to_read(path: Path) -> int:
    """A read-only descriptor of ``path`` (the caller closes it)."""
    try:
        return os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}") from None


def check_file(path: Path) -> LmdbMeta:
    """The whole check of a file that nobody writes meanwhile (a backup, a closed store)."""
    name = str(path)
    fd = open_to_read(path)
    try:
        meta = read_meta(fd, os.fstat(fd).st_size, name)
        check_tree(fd, meta, name)
        return meta
    finally:
        os.close(fd)
