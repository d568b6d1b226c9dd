"""A read-only, pure-Python reader of bbolt files (the old daemon's ``idmap.db``).

The old Go daemon kept its idmap in a `go.etcd.io/bbolt` file (v1.3.x, on-disk format
version 2, little-endian, 64-bit). This module reads such a file without Go, without
writing to it and without trusting it.

Format facts this reader relies on (all integers little-endian)
----------------------------------------------------------------

* The file is an array of pages of ``page_size`` bytes; page *n* starts at ``n * page_size``.
  The page size is the one stored in the meta (the OS page size of the writer, 4096 on
  x86-64 Linux).
* Every page starts with a 16-byte header ``id u64, flags u16, count u16, overflow u32``.
  ``id`` is the page's own number; ``flags`` is 0x01 branch, 0x02 leaf, 0x04 meta,
  0x10 freelist; a page with ``overflow = k`` spans ``k + 1`` consecutive pages (the
  continuation pages have no header of their own).
* Pages 0 and 1 are the two metas, written alternately (page ``txid % 2``). The meta body
  follows the page header: ``magic u32 (0xED0CDAED), version u32 (2), page_size u32,
  flags u32, root bucket (root pgid u64, sequence u64), freelist pgid u64, pgid u64 (the
  high-water mark: every page in use has a smaller id), txid u64, checksum u64``. The
  checksum is FNV-1a 64 over the 56 meta bytes before it. The valid meta with the
  highest txid is the current one; the other is the previous commit (bbolt falls back to
  it after a torn write, and so do we, reporting it in :attr:`BoltFile.meta_problems`).
  Old boltdb accepted a zero checksum as "unchecked"; bbolt v1.3.x always writes one, so a
  zero checksum that does not match is invalid here.
* A branch page's ``count`` elements are 16 bytes each, right after the header:
  ``pos u32, ksize u32, pgid u64``; the key lies at ``element address + pos``. Every key in
  the child's subtree is ``>=`` its element's key and ``<`` the next element's key (the
  invariant bbolt's own ``Tx.Check`` verifies).
* A leaf page's elements are ``flags u32, pos u32, ksize u32, vsize u32``; the key lies at
  ``element address + pos`` and the value right after it. ``flags`` 0x01 marks a nested
  bucket, whose value is a 16-byte bucket header ``root pgid u64, sequence u64``. A header
  with root 0 is an *inline* bucket: a whole leaf page (header and elements, ``pos``
  relative to the element as usual) follows in the value itself.
* The meta's root bucket holds the top-level buckets, keyed by name. Keys are unique and
  sorted by unsigned byte order within each bucket; bbolt refuses empty keys.

Why so defensive
----------------

bbolt has no checksums on data pages: only the metas are checked. A flipped bit or an
overwritten block inside a leaf reads back, under bbolt itself, as garbage keys in the
wrong order; a truncated file makes bbolt die of SIGBUS. A migration must not copy garbage
into the new store nor crash, so every structural fact above is checked as it is read:
page ids inside the high-water mark and the file, the page header's own id, page types
as the parent expects, element offsets and lengths inside their page, non-empty keys in
strict byte order within and across pages and inside the bounds set by the parent branch,
no page twice on one descent and a bounded tree height, sane bucket headers. Each failure
raises :class:`~gensokyo_idmap.errors.LegacyDbError` naming what is wrong and where (page
id, file offset, bucket path); no other exception escapes, no read goes past the end of
the file, and every loop is bounded by the file's structure, so nothing can hang.

The file is read with ``pread`` on a descriptor opened read-only (no ``mmap``: a file that
shrank under a mapping would kill the process with SIGBUS). Iteration streams: at any time
only the pages on the current root-to-leaf path are held, so memory does not grow with
the file.
"""

from __future__ import annotations

import os
import stat
import struct
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Self

from gensokyo_idmap.errors import LegacyDbError

__all__ = [
    "BRANCH_PAGE",
    "BUCKET_LEAF_FLAG",
    "FREELIST_PAGE",
    "LEAF_PAGE",
    "MAGIC",
    "MAX_BUCKET_DEPTH",
    "MAX_TREE_DEPTH",
    "META_PAGE",
    "VERSION",
    "BoltFile",
    "Bucket",
    "fnv1a64",
]

MAGIC = 0xED0CDAED
VERSION = 2

BRANCH_PAGE = 0x01
LEAF_PAGE = 0x02
META_PAGE = 0x04
FREELIST_PAGE = 0x10
BUCKET_LEAF_FLAG = 0x01

#: Deepest B+tree accepted. bbolt splits and merges nodes so that branches fan out at
#: least two ways; real trees are a few levels deep (3 for the 56 MiB medium fixture), and
#: 64 levels would need more pages than a file can hold. Deeper means a loop or garbage.
MAX_TREE_DEPTH = 64
#: Deepest nesting of buckets :meth:`BoltFile.walk` follows.
MAX_BUCKET_DEPTH = 64

_MIN_PAGE_SIZE = 512
_MAX_PAGE_SIZE = 1 << 20

_PAGE_HEADER = struct.Struct("<QHHI")  # id, flags, count, overflow
_PAGE_HEADER_SIZE = _PAGE_HEADER.size  # 16
# magic, version, page_size, flags, root pgid, sequence, freelist, pgid, txid, checksum
_META = struct.Struct("<IIIIQQQQQQ")
_META_SUM_LEN = 56  # bytes of the meta covered by its checksum
_BRANCH_ELEM = struct.Struct("<IIQ")  # pos, ksize, pgid
_LEAF_ELEM = struct.Struct("<IIII")  # flags, pos, ksize, vsize
_ELEM_SIZE = 16
_BUCKET_HEADER = struct.Struct("<QQ")  # root pgid, sequence
_BUCKET_HEADER_SIZE = _BUCKET_HEADER.size  # 16

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_U64 = (1 << 64) - 1

_FLAG_NAMES = {
    BRANCH_PAGE: "branch",
    LEAF_PAGE: "leaf",
    META_PAGE: "meta",
    FREELIST_PAGE: "freelist",
}


def fnv1a64(data: bytes) -> int:
    """FNV-1a, 64 bit: the hash bbolt uses for its meta checksum."""
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & _U64
    return h


def _flags_name(flags: int) -> str:
    return _FLAG_NAMES.get(flags, f"unknown flags {flags:#06x}")


def _show_key(key: bytes) -> str:
    """A key for a message: quoted text when it is printable UTF-8, else hex."""
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and text.isprintable():
        return repr(text if len(text) <= 80 else text[:80] + "…")
    shown = key[:40].hex()
    return f"0x{shown}{'…' if len(key) > 40 else ''}"


def _show_path(path: Sequence[bytes]) -> str:
    if not path:
        return "root bucket"
    return "bucket " + "/".join(_show_key(name) for name in path)


def _referrer(branch: _Page, i: int) -> str:
    offset = branch.offset + _PAGE_HEADER_SIZE + i * _ELEM_SIZE
    return f"page {branch.pgid} element {i} (file offset {offset})"


@dataclass(frozen=True, slots=True)
class _Meta:
    index: int
    page_size: int
    root: int
    sequence: int
    freelist: int
    high_water: int
    txid: int


@dataclass(frozen=True, slots=True)
class Bucket:
    """Where a bucket's tree lives: ``root`` page id, or 0 with the ``inline`` page bytes."""

    path: tuple[bytes, ...]
    root: int
    sequence: int
    inline: bytes | None = None
    #: File offset of the inline page (for messages); 0 for a bucket with its own pages.
    inline_offset: int = 0

    @property
    def is_inline(self) -> bool:
        return self.root == 0


@dataclass(slots=True)
class _Page:
    """One page (with its overflow) or an inline page, as read from the file."""

    pgid: int | None  # None for an inline page
    data: bytes
    flags: int
    count: int
    offset: int  # file offset of the page header
    where: str  # "page 27 (file offset 110592)", for messages


class BoltFile:
    """A bbolt file opened read-only; use as a context manager or call :meth:`close`.

    Everything raises :class:`LegacyDbError` on damage, with a message that names the page,
    the file offset and the bucket path where the damage was found.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._name = str(self.path)
        self._fd = -1
        try:
            self._fd = os.open(
                self.path, os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
            )
            st = os.fstat(self._fd)
        except OSError as exc:
            self._close_fd()
            raise LegacyDbError(f"{self._name}: cannot open for reading: {exc}") from exc
        if not stat.S_ISREG(st.st_mode):
            self._close_fd()
            raise LegacyDbError(f"{self._name}: not a regular file")
        self.file_size = st.st_size
        #: Why a meta page was not used (empty when both are valid).
        self.meta_problems: list[str] = []
        try:
            self._meta = self._select_meta()
        except BaseException:
            self._close_fd()
            raise

    # ------------------------------------------------------------------ life cycle

    def close(self) -> None:
        """Release the file descriptor; further reads raise :class:`LegacyDbError`."""
        self._close_fd()

    def _close_fd(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ meta facts

    @property
    def page_size(self) -> int:
        return self._meta.page_size

    @property
    def txid(self) -> int:
        return self._meta.txid

    @property
    def high_water(self) -> int:
        """The meta's ``pgid``: number of pages in use; every page id must be below it."""
        return self._meta.high_water

    @property
    def meta_page(self) -> int:
        """Which meta page (0 or 1) is current."""
        return self._meta.index

    # ------------------------------------------------------------------ raw reads

    def _pread(self, offset: int, length: int, what: str) -> bytes:
        if self._fd < 0:
            raise LegacyDbError(f"{self._name}: read of {what} after close")
        if offset < 0 or length < 0 or offset + length > self.file_size:
            raise LegacyDbError(
                f"{self._name}: {what} (file offset {offset}, {length} bytes) lies past the "
                f"end of the {self.file_size}-byte file: the file is truncated"
            )
        try:
            data = os.pread(self._fd, length, offset)
        except (OSError, OverflowError, ValueError) as exc:
            raise LegacyDbError(
                f"{self._name}: cannot read {what} at file offset {offset}: {exc}"
            ) from exc
        if len(data) != length:
            raise LegacyDbError(
                f"{self._name}: {what} at file offset {offset}: read {len(data)} of "
                f"{length} bytes: the file is truncated (it shrank while being read)"
            )
        return data

    # ------------------------------------------------------------------ metas

    def _parse_meta(self, index: int, page_size: int) -> _Meta | str:
        """The meta on page ``index`` for a file of ``page_size`` pages, or why it is invalid."""
        offset = index * page_size
        length = _PAGE_HEADER_SIZE + _META.size
        if offset + length > self.file_size:
            return (
                f"meta page {index} (file offset {offset}) lies past the end of the "
                f"{self.file_size}-byte file"
            )
        buf = self._pread(offset, length, f"meta page {index}")
        pid, flags, _count, _overflow = _PAGE_HEADER.unpack_from(buf, 0)
        (magic, version, psize, _mflags, root, seq, freelist, hwm, txid, checksum) = (
            _META.unpack_from(buf, _PAGE_HEADER_SIZE)
        )
        where = f"meta page {index} (file offset {offset})"
        if magic != MAGIC:
            return f"{where}: bad magic {magic:#010x} (want {MAGIC:#010x})"
        if version != VERSION:
            return f"{where}: format version {version} (this reader knows {VERSION})"
        want = fnv1a64(buf[_PAGE_HEADER_SIZE : _PAGE_HEADER_SIZE + _META_SUM_LEN])
        if checksum != want:
            return f"{where}: checksum {checksum:#018x} does not match {want:#018x}"
        if flags != META_PAGE:
            return f"{where}: page header says {_flags_name(flags)}, not meta"
        if pid != index:
            return f"{where}: page header id {pid}, not {index}"
        if psize != page_size:
            return f"{where}: page size {psize} disagrees with the {page_size} it was found at"
        if hwm < 3:
            return f"{where}: high-water mark of {hwm} pages leaves no room for data"
        if not 2 <= root < hwm:
            return f"{where}: root bucket page {root} outside pages 2..{hwm - 1}"
        return _Meta(index, page_size, root, seq, freelist, hwm, txid)

    def _select_meta(self) -> _Meta:
        if self.file_size < _PAGE_HEADER_SIZE + _META.size:
            raise LegacyDbError(
                f"{self._name}: {self.file_size} bytes is too short for a bbolt file "
                f"(meta page 0 alone needs {_PAGE_HEADER_SIZE + _META.size})"
            )
        # Meta 0 tells the page size; if it is damaged, look for meta 1 at every plausible
        # page size, as bbolt would have to (it gives up instead).
        metas: list[_Meta] = []
        problems: list[str] = []
        head = self._pread(0, _PAGE_HEADER_SIZE + _META.size, "meta page 0")
        claimed = struct.unpack_from("<I", head, _PAGE_HEADER_SIZE + 8)[0]
        first = (
            self._parse_meta(0, claimed)
            if self._plausible_page_size(claimed)
            else (f"meta page 0 (file offset 0): implausible page size {claimed}")
        )
        if isinstance(first, _Meta):
            metas.append(first)
            second = self._parse_meta(1, first.page_size)
            if isinstance(second, _Meta):
                metas.append(second)
            else:
                problems.append(second)
        else:
            # Without a valid meta 0 the page size is unknown: try every plausible one for
            # meta 1 (bbolt itself only tries the OS page size). Report why meta 1 was not
            # found at 4096, the usual size, or else at the first size tried.
            problems.append(first)
            size = _MIN_PAGE_SIZE
            found: str | None = None
            while size <= _MAX_PAGE_SIZE:
                second = self._parse_meta(1, size)
                if isinstance(second, _Meta):
                    metas.append(second)
                    break
                if found is None or size == 4096:
                    found = second
                size *= 2
            if not metas:
                problems.append(found or "meta page 1: not found")
        self.meta_problems = problems
        if not metas:
            raise LegacyDbError(
                f"{self._name}: no valid meta page, not a readable bbolt file: "
                + "; ".join(problems)
            )
        meta = max(metas, key=lambda m: m.txid)
        needed = meta.high_water * meta.page_size
        if self.file_size < needed:
            raise LegacyDbError(
                f"{self._name}: the file is truncated: meta page {meta.index} (txid "
                f"{meta.txid}) uses {meta.high_water} pages of {meta.page_size} bytes, up to "
                f"file offset {needed}, but the file ends at offset {self.file_size} "
                f"(inside page {self.file_size // meta.page_size})"
            )
        return meta

    @staticmethod
    def _plausible_page_size(size: int) -> bool:
        return _MIN_PAGE_SIZE <= size <= _MAX_PAGE_SIZE and size & (size - 1) == 0

    # ------------------------------------------------------------------ pages

    def _read_page(self, pgid: int, path: Sequence[bytes], referrer: str) -> _Page:
        """Page ``pgid`` (with its overflow), checked to be a branch or leaf page."""
        meta = self._meta
        ps = meta.page_size
        offset = pgid * ps
        where = self._check_pgid(pgid, path, referrer)
        data = self._pread(offset, ps, where)
        flags, count, overflow = self._check_header(data, pgid, path, referrer)
        if overflow:
            if pgid + overflow >= meta.high_water:
                raise LegacyDbError(
                    f"{self._name}: {where} claims {overflow} overflow pages, running to "
                    f"page {pgid + overflow}, past the high-water mark "
                    f"{meta.high_water} ({_show_path(path)})"
                )
            data = self._pread(offset, ps * (overflow + 1), f"{where} with {overflow} overflow")
        return _Page(pgid, data, flags, count, offset, where)

    def _check_pgid(self, pgid: int, path: Sequence[bytes], referrer: str) -> str:
        """``pgid`` checked to be a data page below the high-water mark; "page N (file
        offset O)" for messages."""
        high_water = self._meta.high_water
        if not 2 <= pgid < high_water:
            raise LegacyDbError(
                f"{self._name}: {referrer} points to page {pgid}, outside the data pages "
                f"2..{high_water - 1} of the meta's high-water mark ({_show_path(path)})"
            )
        return f"page {pgid} (file offset {pgid * self._meta.page_size})"

    def _check_header(
        self, data: bytes, pgid: int, path: Sequence[bytes], referrer: str
    ) -> tuple[int, int, int]:
        """(flags, count, overflow) of the page header at the start of ``data``, checked to
        carry the page's own id and the type of a branch or a leaf."""
        where = f"page {pgid} (file offset {pgid * self._meta.page_size})"
        pid, flags, count, overflow = _PAGE_HEADER.unpack_from(data, 0)
        if pid != pgid:
            raise LegacyDbError(
                f"{self._name}: {where}, reached from {referrer}, has header id {pid} "
                f"({_show_path(path)})"
            )
        if flags not in (BRANCH_PAGE, LEAF_PAGE):
            raise LegacyDbError(
                f"{self._name}: {where}, reached from {referrer}, has type "
                f"{_flags_name(flags)} where a branch or leaf page belongs "
                f"({_show_path(path)})"
            )
        return flags, count, overflow

    def _bucket_root_page(self, bucket: Bucket) -> _Page:
        if bucket.inline is None:
            return self._read_page(
                bucket.root, bucket.path, f"the header of {_show_path(bucket.path)}"
            )
        data = bucket.inline
        _pid, flags, count, _overflow = _PAGE_HEADER.unpack_from(data, 0)
        where = f"inline page (file offset {bucket.inline_offset})"
        if flags != LEAF_PAGE:
            raise LegacyDbError(
                f"{self._name}: {where} of {_show_path(bucket.path)} has type "
                f"{_flags_name(flags)}: an inline bucket is a single leaf page"
            )
        return _Page(None, data, flags, count, bucket.inline_offset, where)

    def _elements(self, page: _Page, path: Sequence[bytes]) -> int:
        """End of the element array, checked to lie inside the page."""
        end = _PAGE_HEADER_SIZE + page.count * _ELEM_SIZE
        if end > len(page.data):
            raise LegacyDbError(
                f"{self._name}: {page.where}: {page.count} elements need {end} bytes, the "
                f"page has {len(page.data)} ({_show_path(path)})"
            )
        return end

    def _branch(
        self, page: _Page, path: Sequence[bytes], lo: bytes | None, hi: bytes | None
    ) -> list[tuple[bytes, int]]:
        """The (key, child page) elements of a branch page, checked."""
        data = page.data
        size = len(data)
        end = self._elements(page, path)
        if page.count == 0:
            raise LegacyDbError(
                f"{self._name}: {page.where}: branch page without elements ({_show_path(path)})"
            )
        out: list[tuple[bytes, int]] = []
        prev: bytes | None = None
        base = _PAGE_HEADER_SIZE
        for i, (pos, ksize, child) in enumerate(_BRANCH_ELEM.iter_unpack(data[base:end])):
            start = base + i * _ELEM_SIZE + pos
            stop = start + ksize
            if ksize == 0:
                raise LegacyDbError(
                    f"{self._name}: {page.where}: branch element {i} has an empty key "
                    f"({_show_path(path)})"
                )
            if start < end or stop > size:
                raise LegacyDbError(
                    f"{self._name}: {page.where}: branch element {i} key (offset {pos}, "
                    f"{ksize} bytes) lies outside the page's key area "
                    f"[{end}, {size}) ({_show_path(path)})"
                )
            key = data[start:stop]
            if prev is not None and key <= prev:
                raise LegacyDbError(
                    f"{self._name}: {page.where}: branch element {i} key {_show_key(key)} is "
                    f"not after the previous key {_show_key(prev)} ({_show_path(path)})"
                )
            out.append((key, child))
            prev = key
        if lo is not None and out[0][0] < lo:
            raise LegacyDbError(
                f"{self._name}: {page.where}: first key {_show_key(out[0][0])} is before the "
                f"parent branch's key {_show_key(lo)} ({_show_path(path)})"
            )
        if hi is not None and out[-1][0] >= hi:
            raise LegacyDbError(
                f"{self._name}: {page.where}: last key {_show_key(out[-1][0])} is not before "
                f"the parent branch's next key {_show_key(hi)} ({_show_path(path)})"
            )
        return out

    def _leaf(
        self,
        page: _Page,
        path: Sequence[bytes],
        lo: bytes | None,
        hi: bytes | None,
        prev: bytes | None,
    ) -> list[tuple[bytes, int, bytes, int]]:
        """The (key, flags, value, value file offset) elements of a leaf page, checked.

        ``prev`` is the last key read from the bucket's previous leaf: keys must go on
        rising across pages too.
        """
        data = page.data
        size = len(data)
        end = self._elements(page, path)
        out: list[tuple[bytes, int, bytes, int]] = []
        base = _PAGE_HEADER_SIZE
        for i, (flags, pos, ksize, vsize) in enumerate(_LEAF_ELEM.iter_unpack(data[base:end])):
            start = base + i * _ELEM_SIZE + pos
            kend = start + ksize
            vend = kend + vsize
            if ksize == 0:
                raise LegacyDbError(
                    f"{self._name}: {page.where}: leaf element {i} has an empty key "
                    f"({_show_path(path)})"
                )
            if start < end or vend > size:
                raise LegacyDbError(
                    f"{self._name}: {page.where}: leaf element {i} (key at offset {pos}, "
                    f"{ksize} + {vsize} bytes) lies outside the page's data area "
                    f"[{end}, {size}) ({_show_path(path)})"
                )
            if flags & ~BUCKET_LEAF_FLAG:
                raise LegacyDbError(
                    f"{self._name}: {page.where}: leaf element {i} has unknown flags "
                    f"{flags:#x} ({_show_path(path)})"
                )
            key = data[start:kend]
            if prev is not None and key <= prev:
                raise LegacyDbError(
                    f"{self._name}: {page.where}: key {_show_key(key)} (element {i}) is not "
                    f"after the previous key {_show_key(prev)}: keys out of byte order "
                    f"({_show_path(path)})"
                )
            if i == 0 and lo is not None and key < lo:
                raise LegacyDbError(
                    f"{self._name}: {page.where}: first key {_show_key(key)} is before the "
                    f"parent branch's key {_show_key(lo)} ({_show_path(path)})"
                )
            out.append((key, flags, data[kend:vend], page.offset + kend))
            prev = key
        if hi is not None and out and out[-1][0] >= hi:
            raise LegacyDbError(
                f"{self._name}: {page.where}: last key {_show_key(out[-1][0])} is not before "
                f"the parent branch's next key {_show_key(hi)} ({_show_path(path)})"
            )
        return out

    def _leaf_pairs(
        self,
        page: _Page,
        path: Sequence[bytes],
        lo: bytes | None,
        hi: bytes | None,
        prev: bytes | None,
    ) -> tuple[list[tuple[bytes, bytes]], list[int]]:
        """The (key, value) pairs of a leaf page and the indexes of its nested buckets.

        The hot path of iteration: the checks of :meth:`_leaf` with as little work per
        element as possible (no per-element tuple of four, no file offsets, which only
        nested buckets need). When any check fails it hands over to :meth:`_leaf`, which
        raises the exact error it would have raised: the two accept the same pages.
        """
        data = page.data
        size = len(data)
        end = self._elements(page, path)
        pairs: list[tuple[bytes, bytes]] = []
        append = pairs.append
        buckets: list[int] = []
        last = b"" if prev is None else prev  # keys are never empty, so every key > b""
        elem = _PAGE_HEADER_SIZE
        for flags, pos, ksize, vsize in _LEAF_ELEM.iter_unpack(data[_PAGE_HEADER_SIZE:end]):
            start = elem + pos
            kend = start + ksize
            vend = kend + vsize
            if not ksize or start < end or vend > size:
                break  # damaged: _leaf says how
            key = data[start:kend]
            if key <= last:
                break
            if flags:
                if flags != BUCKET_LEAF_FLAG:
                    break
                buckets.append(len(pairs))
            append((key, data[kend:vend]))
            last = key
            elem += _ELEM_SIZE
        else:
            if not pairs or (
                (lo is None or pairs[0][0] >= lo) and (hi is None or last < hi)
            ):
                return pairs, buckets
        self._leaf(page, path, lo, hi, prev)  # raises
        raise LegacyDbError(  # pragma: no cover - _leaf rejects whatever stopped the loop
            f"{self._name}: {page.where}: leaf page rejected ({_show_path(path)})"
        )

    def _child_bucket(
        self, parent: Sequence[bytes], key: bytes, value: bytes, value_offset: int
    ) -> Bucket:
        """The bucket whose header is ``value``, checked."""
        path = (*parent, key)
        where = f"header of {_show_path(path)} (file offset {value_offset})"
        if len(value) < _BUCKET_HEADER_SIZE:
            raise LegacyDbError(
                f"{self._name}: {where}: {len(value)} bytes, a bucket header needs "
                f"{_BUCKET_HEADER_SIZE}"
            )
        root, seq = _BUCKET_HEADER.unpack_from(value, 0)
        if root == 0:
            inline = value[_BUCKET_HEADER_SIZE:]
            if len(inline) < _PAGE_HEADER_SIZE:
                raise LegacyDbError(
                    f"{self._name}: {where}: inline bucket of {len(inline)} bytes, too short "
                    "for a page header"
                )
            return Bucket(path, 0, seq, inline, value_offset + _BUCKET_HEADER_SIZE)
        if len(value) != _BUCKET_HEADER_SIZE:
            raise LegacyDbError(
                f"{self._name}: {where}: {len(value)} bytes for a bucket with root page "
                f"{root} (want {_BUCKET_HEADER_SIZE})"
            )
        if not 2 <= root < self._meta.high_water:
            raise LegacyDbError(
                f"{self._name}: {where}: root page {root} outside the data pages "
                f"2..{self._meta.high_water - 1} of the meta's high-water mark"
            )
        return Bucket(path, root, seq)

    # ------------------------------------------------------------------ trees

    def _leaves(
        self, bucket: Bucket
    ) -> Iterator[tuple[_Page, list[tuple[bytes, bytes]], list[int]]]:
        """Every leaf page of one bucket's tree, in key order, as (page, pairs, indexes of
        the nested buckets among the pairs): see :meth:`_leaf_pairs`.

        Depth-first with an explicit stack; holds only the pages of the current path.
        """
        path = bucket.path
        root = self._bucket_root_page(bucket)
        prev: bytes | None = None
        if root.flags == LEAF_PAGE:
            yield root, *self._leaf_pairs(root, path, None, None, None)
            return
        # Stack frames: (branch page, its elements, next index, upper bound of the last).
        stack: list[tuple[_Page, list[tuple[bytes, int]], list[int], bytes | None]] = [
            (root, self._branch(root, path, None, None), [0], None)
        ]
        on_path: set[int | None] = {root.pgid}
        while stack:
            branch, elems, cursor, hi = stack[-1]
            i = cursor[0]
            if i >= len(elems):
                stack.pop()
                on_path.discard(branch.pgid)
                continue
            cursor[0] = i + 1
            key, child = elems[i]
            child_hi = elems[i + 1][0] if i + 1 < len(elems) else hi
            if child in on_path or len(stack) >= MAX_TREE_DEPTH:
                referrer = _referrer(branch, i)
                if child in on_path:
                    raise LegacyDbError(
                        f"{self._name}: {referrer} points back to page {child}, already on "
                        f"the path from the root: a loop ({_show_path(path)})"
                    )
                raise LegacyDbError(
                    f"{self._name}: {referrer} leads deeper than {MAX_TREE_DEPTH} levels: "
                    f"a loop or garbage ({_show_path(path)})"
                )
            page = self._read_page(child, path, _referrer(branch, i))
            if page.flags == LEAF_PAGE:
                pairs, buckets = self._leaf_pairs(page, path, key, child_hi, prev)
                if pairs:
                    prev = pairs[-1][0]
                yield page, pairs, buckets
            else:
                stack.append((page, self._branch(page, path, key, child_hi), [0], child_hi))
                on_path.add(child)

    def _entries(self, bucket: Bucket) -> Iterator[tuple[bytes, int, bytes, int]]:
        """Every (key, flags, value, value file offset) of one bucket's tree, in key order
        (the offset is given for nested buckets only, 0 for plain values)."""
        for page, pairs, buckets in self._leaves(bucket):
            if not buckets:
                for key, value in pairs:
                    yield key, 0, value, 0
                continue
            flagged = set(buckets)
            for i, (key, value) in enumerate(pairs):
                if i in flagged:
                    yield key, BUCKET_LEAF_FLAG, value, self._value_offset(page, i)
                else:
                    yield key, 0, value, 0

    @staticmethod
    def _value_offset(page: _Page, i: int) -> int:
        """File offset of the value of leaf element ``i`` (already checked by the decoder)."""
        elem = _PAGE_HEADER_SIZE + i * _ELEM_SIZE
        _flags, pos, ksize, _vsize = _LEAF_ELEM.unpack_from(page.data, elem)
        return page.offset + elem + int(pos) + int(ksize)

    def _find(self, bucket: Bucket, key: bytes) -> tuple[int, bytes, int] | None:
        """(flags, value, value offset) of ``key`` in ``bucket``, by descent; None if absent."""
        path = bucket.path
        page = self._bucket_root_page(bucket)
        lo: bytes | None = None
        hi: bytes | None = None
        seen: set[int | None] = {page.pgid}
        depth = 1
        while page.flags == BRANCH_PAGE:
            elems = self._branch(page, path, lo, hi)
            i = bisect_right(elems, key, key=lambda e: e[0]) - 1
            if i < 0:
                return None
            lo, child = elems[i]
            if i + 1 < len(elems):
                hi = elems[i + 1][0]
            referrer = _referrer(page, i)
            if child in seen:
                raise LegacyDbError(
                    f"{self._name}: {referrer} points back to page {child}, already on the "
                    f"path from the root: a loop ({_show_path(path)})"
                )
            depth += 1
            if depth > MAX_TREE_DEPTH:
                raise LegacyDbError(
                    f"{self._name}: {referrer} leads deeper than {MAX_TREE_DEPTH} levels: "
                    f"a loop or garbage ({_show_path(path)})"
                )
            seen.add(child)
            page = self._read_page(child, path, referrer)
        for k, flags, value, offset in self._leaf(page, path, lo, hi, None):
            if k == key:
                return flags, value, offset
        return None

    def _root_bucket(self) -> Bucket:
        return Bucket((), self._meta.root, self._meta.sequence)

    # ------------------------------------------------------------------ public API

    def bucket(self, path: Sequence[bytes]) -> Bucket | None:
        """The bucket at ``path`` (``()`` is the root), or None if some name is missing.

        A name that holds a plain value rather than a bucket also gives None.
        """
        current = self._root_bucket()
        for name in path:
            found = self._find(current, bytes(name))
            if found is None:
                return None
            flags, value, offset = found
            if not flags & BUCKET_LEAF_FLAG:
                return None
            current = self._child_bucket(current.path, bytes(name), value, offset)
        return current

    def _require(self, path: Sequence[bytes]) -> Bucket:
        bucket = self.bucket(path)
        if bucket is None:
            raise LegacyDbError(f"{self._name}: no {_show_path([bytes(p) for p in path])}")
        return bucket

    def items(self, path: Sequence[bytes] = ()) -> Iterator[tuple[bytes, bytes | None]]:
        """(key, value) of every entry of the bucket at ``path``, in key order, streaming.

        A nested bucket comes as (name, None). A missing bucket raises
        :class:`LegacyDbError` (probe with :meth:`bucket`).
        """
        return self.bucket_items(self._require(path))

    def get(self, path: Sequence[bytes], key: bytes) -> bytes | None:
        """The value of ``key`` in the bucket at ``path``, by one descent (None if absent or
        if ``key`` names a nested bucket). A missing bucket raises :class:`LegacyDbError`."""
        found = self._find(self._require(path), bytes(key))
        if found is None or found[0] & BUCKET_LEAF_FLAG:
            return None
        return found[1]

    def last_key(self, path: Sequence[bytes] = ()) -> bytes | None:
        """The greatest key of the bucket at ``path``, by one descent along the tree's right
        edge (a few pages, checked like every read), or None when the rightmost leaf is
        empty: an empty bucket (or a damaged tree, which a full iteration rejects).

        A full iteration gives keys in strictly rising order up to this one, so every key
        of the bucket is ``<=`` it. A missing bucket raises :class:`LegacyDbError`.
        """
        bucket = self._require(path)
        path = bucket.path
        page = self._bucket_root_page(bucket)
        lo: bytes | None = None
        hi: bytes | None = None
        seen: set[int | None] = {page.pgid}
        while page.flags == BRANCH_PAGE:
            elems = self._branch(page, path, lo, hi)
            i = len(elems) - 1
            lo, child = elems[i]
            referrer = _referrer(page, i)
            if child in seen:
                raise LegacyDbError(
                    f"{self._name}: {referrer} points back to page {child}, already on the "
                    f"path from the root: a loop ({_show_path(path)})"
                )
            if len(seen) >= MAX_TREE_DEPTH:
                raise LegacyDbError(
                    f"{self._name}: {referrer} leads deeper than {MAX_TREE_DEPTH} levels: "
                    f"a loop or garbage ({_show_path(path)})"
                )
            seen.add(child)
            page = self._read_page(child, path, referrer)
        pairs, _buckets = self._leaf_pairs(page, path, lo, hi, None)
        return pairs[-1][0] if pairs else None

    def entry_count(self, path: Sequence[bytes] = ()) -> int:
        """How many entries the bucket at ``path`` holds (a nested bucket counts as one),
        from the page headers: every branch page, and only the 16-byte header of each leaf.

        A cheap total for a progress display (a few hundred bytes read per thousand
        entries), not a check: the leaves' own counts are trusted here and checked by any
        iteration. Loops, pages outside the file and pages of the wrong type are refused as
        everywhere else. A missing bucket raises :class:`LegacyDbError`.
        """
        bucket = self._require(path)
        path = bucket.path
        root = self._bucket_root_page(bucket)
        if root.flags == LEAF_PAGE:
            return root.count
        total = 0
        stack = [(root, 1)]  # branch pages still to read, with their depth
        seen: set[int | None] = {root.pgid}  # each page is referenced once in a sound tree
        while stack:
            branch, depth = stack.pop()
            for i, (_key, child) in enumerate(self._branch(branch, path, None, None)):
                referrer = _referrer(branch, i)
                if child in seen:
                    raise LegacyDbError(
                        f"{self._name}: {referrer} points to page {child} a second time: a "
                        f"loop or garbage ({_show_path(path)})"
                    )
                if depth >= MAX_TREE_DEPTH:
                    raise LegacyDbError(
                        f"{self._name}: {referrer} leads deeper than {MAX_TREE_DEPTH} levels: "
                        f"a loop or garbage ({_show_path(path)})"
                    )
                seen.add(child)
                where = self._check_pgid(child, path, referrer)
                header = self._pread(child * self._meta.page_size, _PAGE_HEADER_SIZE, where)
                flags, count, _overflow = self._check_header(header, child, path, referrer)
                if flags == LEAF_PAGE:
                    total += count
                else:
                    stack.append((self._read_page(child, path, referrer), depth + 1))
        return total

    def bucket_items(self, bucket: Bucket) -> Iterator[tuple[bytes, bytes | None]]:
        """Like :meth:`items`, for a :class:`Bucket` already found."""
        for pairs in self.bucket_pages(bucket):
            yield from pairs

    def pages(self, path: Sequence[bytes] = ()) -> Iterator[list[tuple[bytes, bytes | None]]]:
        """The entries of the bucket at ``path`` as :meth:`items` gives them, one list per
        leaf page (a few dozen entries each), in key order, streaming.

        The same entries and checks as :meth:`items`, for a caller that wants to loop over
        them in its own frame rather than pay a generator step per entry. A page's list is
        only given once the whole page has been checked. A missing bucket raises
        :class:`LegacyDbError`.
        """
        return self.bucket_pages(self._require(path))

    def bucket_pages(self, bucket: Bucket) -> Iterator[list[tuple[bytes, bytes | None]]]:
        """Like :meth:`pages`, for a :class:`Bucket` already found."""
        for page, pairs, buckets in self._leaves(bucket):
            if buckets:
                entries: list[tuple[bytes, bytes | None]] = list(pairs)
                for i in buckets:
                    key, value = pairs[i]
                    # check the header
                    self._child_bucket(bucket.path, key, value, self._value_offset(page, i))
                    entries[i] = (key, None)
                yield entries
            elif pairs:
                yield pairs  # type: ignore[misc]

    def bucket_names(self) -> list[bytes]:
        """Names of the top-level buckets, in key order."""
        names: list[bytes] = []
        for key, value in self.items(()):
            if value is not None:
                raise LegacyDbError(
                    f"{self._name}: the root bucket holds a plain value under "
                    f"{_show_key(key)}; bbolt only stores buckets there"
                )
            names.append(key)
        return names

    def walk(
        self, path: Sequence[bytes] = ()
    ) -> Iterator[tuple[tuple[bytes, ...], bytes, bytes | None]]:
        """(bucket path, key, value) of every entry under ``path``, depth first, in key order.

        A nested bucket yields (path, name, None) and then its own entries.
        """
        bucket = self._require(path)
        yield from self._walk(bucket, [])

    def _walk(
        self, bucket: Bucket, roots: list[int]
    ) -> Iterator[tuple[tuple[bytes, ...], bytes, bytes | None]]:
        if len(bucket.path) > MAX_BUCKET_DEPTH:
            raise LegacyDbError(
                f"{self._name}: {_show_path(bucket.path)} is nested deeper than "
                f"{MAX_BUCKET_DEPTH} buckets"
            )
        if bucket.root and bucket.root in roots:
            raise LegacyDbError(
                f"{self._name}: {_show_path(bucket.path)} has root page {bucket.root}, the "
                "root of an enclosing bucket: a loop"
            )
        roots = [*roots, bucket.root] if bucket.root else roots
        for key, flags, value, offset in self._entries(bucket):
            if flags & BUCKET_LEAF_FLAG:
                child = self._child_bucket(bucket.path, key, value, offset)
                yield bucket.path, key, None
                yield from self._walk(child, roots)
            else:
                yield bucket.path, key, value
