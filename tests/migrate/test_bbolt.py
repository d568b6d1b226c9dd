"""The read-only bbolt reader: real legacy fixtures, hand-built files, damage of every kind."""

from __future__ import annotations

import hashlib
import json
import lzma
import math
import os
import shutil
import struct
import tempfile
import time
import tracemalloc
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gensokyo_idmap.errors import LegacyDbError, StoreError
from migrate.bbolt import (
    BRANCH_PAGE,
    BUCKET_LEAF_FLAG,
    FREELIST_PAGE,
    LEAF_PAGE,
    MAGIC,
    MAX_TREE_DEPTH,
    META_PAGE,
    BoltFile,
    fnv1a64,
)

from ..conftest import time_limit as _time_limit

LEGACY = Path(__file__).resolve().parent.parent / "fixtures" / "legacy"
SHARED_MEDIUM = Path("/work/shared/fixtures/legacy/medium-counter.db.xz")
TOP_BUCKETS = [b"UserInfo", b"cache", b"config", b"ids"]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fixture_copy(tmp_path: Path, name: str) -> Path:
    """A read-only copy of a legacy fixture: the originals are never handed to the reader."""
    dst = tmp_path / name
    shutil.copyfile(LEGACY / name, dst)
    dst.chmod(0o444)
    return dst


def read_everything(path: Path) -> list[tuple[tuple[bytes, ...], bytes, bytes | None]]:
    with BoltFile(path) as db:
        db.bucket_names()
        return list(db.walk())


def assert_counts_match(db: BoltFile, path: tuple[bytes, ...] = ()) -> None:
    """entry_count of the bucket at ``path`` and of every bucket below it is the number of
    entries an iteration gives."""
    entries = list(db.items(path))
    assert db.entry_count(path) == len(entries), path
    for key, value in entries:
        if value is None:
            assert_counts_match(db, (*path, key))


def time_limit(seconds: float) -> AbstractContextManager[None]:
    """A hang guard for the reader (see conftest.time_limit)."""
    return _time_limit(seconds, "reader")


# --------------------------------------------------------------------------- manifests


def be64(n: int) -> bytes:
    return n.to_bytes(8, "big")


def expected_from_manifest(manifest: Mapping[str, Any]) -> dict[bytes, dict[bytes, bytes]]:
    """Every key and value each top-level bucket must hold, rebuilt from a manifest.

    ids: forward ``<id>`` → 8-byte big-endian row, ``row-<n>`` → id (``reverse`` also
    holds the ``reverse_only`` rows), pro ``<g>:<u>`` ↔ ``r:s`` text, ``currentRow``;
    cache: the same shape; config and UserInfo: exact text; then every noise entry with
    its exact bytes.
    """
    out: dict[bytes, dict[bytes, bytes]] = {name: {} for name in TOP_BUCKETS}
    for bucket, section in ((b"ids", manifest["ids"]), (b"cache", manifest["cache"])):
        table = out[bucket]
        for key, row in section["forward"].items():
            table[key.encode()] = be64(row)
        for row, target in section["reverse"].items():
            table[b"row-" + row.encode()] = target.encode()
        for key, text in section.get("pro_forward", {}).items():
            table[key.encode()] = text.encode()
        for key, text in section.get("pro_reverse", {}).items():
            table[key.encode()] = text.encode()
        if section["current_row"] is not None:
            table[b"currentRow"] = be64(section["current_row"])
    for key, text in manifest["config"].items():
        out[b"config"][key.encode()] = text.encode()
    for key, text in manifest["userinfo"].items():
        out[b"UserInfo"][key.encode()] = text.encode()
    for entry in manifest["noise"]:
        if entry["present"]:
            out[entry["bucket"].encode()][bytes.fromhex(entry["key_hex"])] = bytes.fromhex(
                entry["value_hex"]
            )
    return out


@pytest.mark.parametrize("name", ["small-counter", "small-hash"])
def test_small_fixture_equals_its_manifest(tmp_path: Path, name: str) -> None:
    manifest = json.loads((LEGACY / f"{name}.manifest.json").read_text())
    path = fixture_copy(tmp_path, f"{name}.db")
    before = sha256(path)
    assert before == manifest["db_sha256"]
    expected = expected_from_manifest(manifest)

    with BoltFile(path) as db:
        assert db.page_size == manifest["page_size"]
        assert db.meta_problems == []
        assert db.bucket_names() == TOP_BUCKETS
        actual: dict[bytes, list[tuple[bytes, bytes | None]]] = {
            name_: list(db.items((name_,))) for name_ in TOP_BUCKETS
        }

    for bucket, entries in actual.items():
        keys = [k for k, _ in entries]
        assert keys == sorted(set(keys)), f"{bucket!r}: keys not in strict byte order"
        assert len(entries) == manifest["key_counts"][bucket.decode()]
        assert all(v is not None for _, v in entries), "no nested buckets in the fixtures"
        assert dict(entries) == expected[bucket]

    # The forward rows decode to the manifest's numbers (some exceed 2**53 in hash mode).
    ids = dict(actual[b"ids"])
    for openid, row in manifest["ids"]["forward"].items():
        value = ids[openid.encode()]
        assert value is not None and int.from_bytes(value, "big") == row
    for row in manifest["ids"]["reverse_only"]:
        assert f"row-{row}".encode() in ids
    assert sha256(path) == before


def test_small_fixture_key_counts_add_up() -> None:
    for name in ("small-counter", "small-hash"):
        manifest = json.loads((LEGACY / f"{name}.manifest.json").read_text())
        expected = expected_from_manifest(manifest)
        assert {k.decode(): len(v) for k, v in expected.items()} == manifest["key_counts"]


def test_lookups_by_bucket_path(tmp_path: Path) -> None:
    with BoltFile(fixture_copy(tmp_path, "small-counter.db")) as db:
        ids = db.bucket([b"ids"])
        assert ids is not None and not ids.is_inline and ids.path == (b"ids",)
        assert db.bucket([b"nope"]) is None
        assert db.bucket([b"ids", b"currentRow"]) is None  # a plain value, not a bucket
        with pytest.raises(LegacyDbError, match="no bucket 'nope'"):
            list(db.items([b"nope"]))
        assert list(db.bucket_items(ids)) == list(db.items([b"ids"]))
        assert db.bucket(()) is not None


def test_empty_fixture_has_four_empty_buckets(tmp_path: Path) -> None:
    path = fixture_copy(tmp_path, "empty.db")
    before = sha256(path)
    with BoltFile(path) as db:
        assert db.bucket_names() == TOP_BUCKETS
        for name in TOP_BUCKETS:
            bucket = db.bucket([name])
            assert bucket is not None and bucket.is_inline  # fresh buckets live inline
            assert list(db.items([name])) == []
        assert list(db.walk()) == [((), name, None) for name in TOP_BUCKETS]
    assert sha256(path) == before


def test_corrupt_fixture_is_refused_naming_the_page(tmp_path: Path) -> None:
    damage = json.loads((LEGACY / "corrupt.damage.json").read_text())
    path = fixture_copy(tmp_path, "corrupt.db")
    before = sha256(path)
    with BoltFile(path) as db:
        # The metas are fine (bbolt itself opens it); the damage is inside one ids leaf.
        assert db.bucket_names() == TOP_BUCKETS
        assert len(list(db.items([b"cache"]))) == 1003
        with pytest.raises(LegacyDbError) as caught:
            list(db.items([b"ids"]))
    message = str(caught.value)
    assert f"page {damage['page_id']}" in message
    assert f"file offset {damage['page_id'] * damage['page_size']}" in message
    assert "bucket 'ids'" in message and "byte order" in message
    assert isinstance(caught.value, StoreError)
    assert sha256(path) == before


def test_truncated_fixture_is_refused_naming_the_offset(tmp_path: Path) -> None:
    path = fixture_copy(tmp_path, "truncated.db")
    before = sha256(path)
    with pytest.raises(LegacyDbError) as caught:
        read_everything(path)
    message = str(caught.value)
    assert "truncated" in message
    assert f"file ends at offset {path.stat().st_size}" in message
    assert "page" in message
    assert sha256(path) == before


def test_fixture_is_opened_read_only_and_left_alone(tmp_path: Path) -> None:
    path = fixture_copy(tmp_path, "small-hash.db")
    stat_before = path.stat()
    before = sha256(path)
    read_everything(path)
    stat_after = path.stat()
    assert sha256(path) == before
    assert (stat_after.st_size, stat_after.st_mtime_ns) == (
        stat_before.st_size,
        stat_before.st_mtime_ns,
    )


# --------------------------------------------------------------------------- hand-built files

PS = 4096


class Inline(dict[bytes, Union[bytes, "Inline"]]):
    """A nested bucket the builder stores inline, in its parent's leaf."""


Content = dict[bytes, Any]  # values: bytes, dict (bucket on its own pages) or Inline


@dataclass
class TreeInfo:
    root: int
    leaves: list[int] = field(default_factory=list)
    branches: list[int] = field(default_factory=list)


def page_header(pgid: int, flags: int, count: int, overflow: int = 0) -> bytes:
    return struct.pack("<QHHI", pgid, flags, count, overflow)


def leaf_body(entries: list[tuple[int, bytes, bytes]]) -> tuple[bytes, bytes]:
    """(elements, data) of a leaf; pos is relative to each element, as bbolt writes it."""
    n = len(entries)
    elems = b""
    data = b""
    for i, (flags, key, value) in enumerate(entries):
        pos = 16 * n + len(data) - 16 * i
        elems += struct.pack("<IIII", flags, pos, len(key), len(value))
        data += key + value
    return elems, data


def branch_body(entries: list[tuple[bytes, int]]) -> tuple[bytes, bytes]:
    n = len(entries)
    elems = b""
    data = b""
    for i, (key, child) in enumerate(entries):
        pos = 16 * n + len(data) - 16 * i
        elems += struct.pack("<IIQ", pos, len(key), child)
        data += key
    return elems, data


def meta_page(
    index: int,
    page_size: int,
    root: int,
    hwm: int,
    txid: int,
    *,
    magic: int = MAGIC,
    version: int = 2,
    checksum: int | None = None,
) -> bytes:
    body = struct.pack("<IIIIQQQQQ", magic, version, page_size, 0, root, 0, 2, hwm, txid)
    body += struct.pack("<Q", fnv1a64(body) if checksum is None else checksum)
    return page_header(index, META_PAGE, 0) + body


class Builder:
    """Writes a bbolt file the way bbolt lays it out: metas, freelist, B+trees of pages."""

    def __init__(self, page_size: int = PS, per_leaf: int = 8, fanout: int = 4) -> None:
        self.ps = page_size
        self.per_leaf = per_leaf
        self.fanout = fanout
        self.pages: dict[int, bytes] = {}
        self.next = 3
        self.trees: dict[tuple[bytes, ...], TreeInfo] = {}

    def _write(self, flags: int, count: int, elems: bytes, data: bytes) -> int:
        size = 16 + len(elems) + len(data)
        npages = max(1, math.ceil(size / self.ps))
        pgid = self.next
        self.next += npages
        raw = page_header(pgid, flags, count, npages - 1) + elems + data
        self.pages[pgid] = raw.ljust(npages * self.ps, b"\0")
        return pgid

    def _entries(
        self, content: Mapping[bytes, Any], path: tuple[bytes, ...]
    ) -> list[tuple[int, bytes, bytes]]:
        out = []
        for key in sorted(content):
            value = content[key]
            if isinstance(value, dict):
                out.append((BUCKET_LEAF_FLAG, key, self.bucket_value(value, (*path, key))))
            else:
                out.append((0, key, value))
        return out

    def bucket_value(self, content: Mapping[bytes, Any], path: tuple[bytes, ...]) -> bytes:
        entries = self._entries(content, path)
        if isinstance(content, Inline):
            elems, data = leaf_body(entries)
            return struct.pack("<QQ", 0, 7) + page_header(0, LEAF_PAGE, len(entries)) + elems + data
        return struct.pack("<QQ", self.tree(entries, path), 7)

    def tree(self, entries: list[tuple[int, bytes, bytes]], path: tuple[bytes, ...]) -> int:
        info = TreeInfo(0)
        chunks = [entries[i : i + self.per_leaf] for i in range(0, len(entries), self.per_leaf)]
        level: list[tuple[bytes, int]] = []
        for chunk in chunks or [[]]:
            pgid = self._write(LEAF_PAGE, len(chunk), *leaf_body(chunk))
            info.leaves.append(pgid)
            level.append((chunk[0][1] if chunk else b"", pgid))
        while len(level) > 1:
            upper = []
            for i in range(0, len(level), self.fanout):
                group = level[i : i + self.fanout]
                pgid = self._write(BRANCH_PAGE, len(group), *branch_body(group))
                info.branches.append(pgid)
                upper.append((group[0][0], pgid))
            level = upper
        info.root = level[0][1]
        self.trees[path] = info
        return info.root

    def build(self, content: Content, *, txids: tuple[int, int] = (4, 5)) -> bytearray:
        root = self.tree(self._entries(content, ()), ())
        hwm = self.next
        out = bytearray(hwm * self.ps)
        for i in (0, 1):
            out[i * self.ps : i * self.ps + 80] = meta_page(i, self.ps, root, hwm, txids[i])
        out[2 * self.ps : 2 * self.ps + 16] = page_header(2, FREELIST_PAGE, 0)
        for pgid, raw in self.pages.items():
            out[pgid * self.ps : pgid * self.ps + len(raw)] = raw
        return out


def sample_content() -> Content:
    big = {f"key-{i:05d}".encode(): f"value {i}".encode() * (i % 3) for i in range(300)}
    return {
        b"big": big,  # 38 leaves under three levels of four-way branches
        b"nested": {
            b"a-plain": b"1",
            b"child": {f"c{i:03d}".encode(): b"x" * i for i in range(40)},
            b"inline": Inline({b"k1": b"v1", b"k2": b"", b"deeper": Inline({b"z": b"zz"})}),
            b"z-plain": b"2",
        },
        b"overflow": {
            b"huge": bytes(range(256)) * 50,  # 12,800 bytes: a leaf with 3 overflow pages
            b"small": b"s",
            b"\xff\x00binary": b"\x00",
        },
        b"tiny": Inline({}),
    }


def flatten(
    content: Mapping[bytes, Any], path: tuple[bytes, ...] = ()
) -> list[tuple[tuple[bytes, ...], bytes, bytes | None]]:
    out: list[tuple[tuple[bytes, ...], bytes, bytes | None]] = []
    for key in sorted(content):
        value = content[key]
        if isinstance(value, dict):
            out.append((path, key, None))
            out.extend(flatten(value, (*path, key)))
        else:
            out.append((path, key, value))
    return out


def write(tmp_path: Path, data: bytes | bytearray, name: str = "idmap.db") -> Path:
    path = tmp_path / name
    path.write_bytes(bytes(data))
    return path


def test_hand_built_file_with_nested_inline_and_overflow(tmp_path: Path) -> None:
    builder = Builder()
    content = sample_content()
    path = write(tmp_path, builder.build(content))
    assert len(builder.trees[(b"big",)].branches) > 2  # a real multi-level tree
    huge_leaf = builder.trees[(b"overflow",)].leaves[0]
    assert struct.unpack_from("<I", builder.pages[huge_leaf], 12)[0] == 3
    before = sha256(path)
    with BoltFile(path) as db:
        assert db.txid == 5 and db.meta_page == 1
        assert db.bucket_names() == [b"big", b"nested", b"overflow", b"tiny"]
        assert list(db.walk()) == flatten(content)
        assert dict(db.items([b"overflow"]))[b"huge"] == bytes(range(256)) * 50
        assert list(db.items([b"nested"])) == [
            (b"a-plain", b"1"),
            (b"child", None),
            (b"inline", None),
            (b"z-plain", b"2"),
        ]
        inline = db.bucket([b"nested", b"inline"])
        assert inline is not None and inline.is_inline and inline.sequence == 7
        assert list(db.items([b"nested", b"inline", b"deeper"])) == [(b"z", b"zz")]
        child = db.bucket([b"nested", b"child"])
        assert child is not None and not child.is_inline
        assert len(list(db.items([b"nested", b"child"]))) == 40
        assert list(db.walk([b"nested", b"inline"])) == flatten(
            content[b"nested"][b"inline"], (b"nested", b"inline")
        )
        assert list(db.items([b"tiny"])) == []
        assert_counts_match(db)  # multi-level, nested, inline and overflow pages
    assert sha256(path) == before


@pytest.mark.parametrize("name", ["small-counter.db", "small-hash.db", "empty.db"])
def test_entry_count_from_page_headers_matches_the_entries(tmp_path: Path, name: str) -> None:
    with BoltFile(fixture_copy(tmp_path, name)) as db:
        assert_counts_match(db)
        assert db.entry_count([b"ids"]) == sum(1 for _ in db.items([b"ids"]))


def test_entry_count_refuses_a_loop_and_a_missing_bucket(tmp_path: Path) -> None:
    builder = Builder(per_leaf=4, fanout=3)
    data = bytearray(builder.build({b"big": {f"k{i:04d}".encode(): b"v" for i in range(200)}}))
    big = builder.trees[(b"big",)]
    root, child = big.branches[-1], big.branches[0]  # the root branch and a lower one
    first_child = struct.unpack_from("<Q", data, root * PS + 16 + 8)[0]
    struct.pack_into("<Q", data, child * PS + 16 + 8, first_child)  # a child points back up
    with BoltFile(write(tmp_path, data)) as db, pytest.raises(LegacyDbError, match="a loop"):
        db.entry_count([b"big"])
    with BoltFile(fixture_copy(tmp_path, "empty.db")) as db, pytest.raises(
            LegacyDbError, match="no bucket"):
        db.entry_count([b"nope"])


def test_lookup_descends_every_branch(tmp_path: Path) -> None:
    content = {f"b{i:03d}".encode(): {b"k": f"{i}".encode()} for i in range(100)}
    path = write(tmp_path, Builder(per_leaf=4, fanout=3).build(content))
    with BoltFile(path) as db:
        for i in range(100):
            assert list(db.items([f"b{i:03d}".encode()])) == [(b"k", f"{i}".encode())]
        assert db.bucket([b"a"]) is None and db.bucket([b"b0995"]) is None
        assert db.bucket([b"c"]) is None


def test_meta_with_highest_valid_txid_wins(tmp_path: Path) -> None:
    data = Builder().build({b"ids": {b"k": b"v"}}, txids=(9, 8))
    with BoltFile(write(tmp_path, data)) as db:
        assert (db.meta_page, db.txid) == (0, 9)


def test_damaged_newest_meta_falls_back_to_the_other(tmp_path: Path) -> None:
    data = Builder().build({b"ids": {b"k": b"v"}}, txids=(4, 5))
    data[PS + 16 + 48] ^= 0x01  # txid of meta 1: its checksum no longer matches
    with BoltFile(write(tmp_path, data)) as db:
        assert (db.meta_page, db.txid) == (0, 4)
        assert len(db.meta_problems) == 1
        assert "meta page 1" in db.meta_problems[0] and "checksum" in db.meta_problems[0]
        assert list(db.items([b"ids"])) == [(b"k", b"v")]


def test_damaged_meta_zero_still_finds_meta_one_at_another_page_size(tmp_path: Path) -> None:
    builder = Builder(page_size=16384)
    data = builder.build({b"ids": {b"k": b"v"}}, txids=(6, 5))
    data[16:20] = b"\0\0\0\0"  # magic of meta 0
    with BoltFile(write(tmp_path, data)) as db:
        assert (db.page_size, db.meta_page, db.txid) == (16384, 1, 5)
        assert "bad magic" in db.meta_problems[0]
        assert list(db.items([b"ids"])) == [(b"k", b"v")]


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"magic": 0x12345678}, "bad magic"),
        ({"version": 1}, "format version 1"),
        ({"checksum": 0}, "checksum"),
    ],
)
def test_no_valid_meta_is_refused(tmp_path: Path, patch: dict[str, int], message: str) -> None:
    data = Builder().build({b"ids": {}})
    for i in (0, 1):
        data[i * PS : i * PS + 80] = meta_page(i, PS, 3, 5, 4 + i, **patch)
    with pytest.raises(LegacyDbError, match=f"no valid meta page.*{message}"):
        BoltFile(write(tmp_path, data))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "too short"),
        (b"\0" * 79, "too short"),
        (b"\0" * 8192, "no valid meta"),
        (os.urandom(3 * 4096), "no valid meta"),
    ],
)
def test_not_a_bbolt_file(tmp_path: Path, data: bytes, message: str) -> None:
    with pytest.raises(LegacyDbError, match=message):
        BoltFile(write(tmp_path, data))


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(LegacyDbError, match="cannot open"):
        BoltFile(tmp_path / "absent.db")
    with pytest.raises(LegacyDbError):
        BoltFile(tmp_path)


def test_reads_after_close_raise_our_error(tmp_path: Path) -> None:
    db = BoltFile(write(tmp_path, Builder().build(sample_content())))
    entries = db.items([b"big"])
    next(entries)
    db.close()
    db.close()  # idempotent
    with pytest.raises(LegacyDbError, match="after close"):
        list(entries)
    with pytest.raises(LegacyDbError, match="after close"):
        db.bucket_names()


# Damage of each kind, on a hand-built file whose page numbers the builder recorded.


def damaged(builder: Builder, content: Content, edit: Any) -> bytearray:
    data = builder.build(content)
    edit(data, builder)
    return data


def leaf_elem(pgid: int, i: int) -> int:
    return pgid * PS + 16 + 16 * i


def big_leaf(b: Builder, n: int = 0) -> int:
    return b.trees[(b"big",)].leaves[n]


def big_branch(b: Builder) -> int:
    return b.trees[(b"big",)].root


def set_u32(data: bytearray, offset: int, value: int) -> None:
    struct.pack_into("<I", data, offset, value)


def set_u64(data: bytearray, offset: int, value: int) -> None:
    struct.pack_into("<Q", data, offset, value)


DAMAGE: list[tuple[str, Any, list[str]]] = [
    (
        "child page beyond the high-water mark",
        lambda d, b: set_u64(d, leaf_elem(big_branch(b), 1) + 8, b.next + 5),
        ["outside the data pages", "page", "bucket 'big'"],
    ),
    (
        "child page is a meta page",
        lambda d, b: set_u64(d, leaf_elem(big_branch(b), 0) + 8, 1),
        ["points to page 1, outside the data pages"],
    ),
    (
        "child page is the freelist",
        lambda d, b: set_u64(d, leaf_elem(big_branch(b), 0) + 8, 2),
        ["page 2 (file offset 8192)", "has type freelist where a branch or leaf page belongs"],
    ),
    (
        "header id is not the page's own",
        lambda d, b: set_u64(d, big_leaf(b, 3) * PS, 999),
        ["has header id 999"],
    ),
    (
        "unknown page flags",
        lambda d, b: struct.pack_into("<H", d, big_leaf(b, 2) * PS + 8, 0x40),
        ["unknown flags 0x0040"],
    ),
    (
        "element count larger than the page",
        lambda d, b: struct.pack_into("<H", d, big_leaf(b, 0) * PS + 10, 0xFFFF),
        ["65535 elements need", "bucket 'big'"],
    ),
    (
        "key offset outside the page",
        lambda d, b: set_u32(d, leaf_elem(big_leaf(b, 1), 2) + 4, 0xFFFFFF00),
        ["leaf element 2", "outside the page's data area"],
    ),
    (
        "value length outside the page",
        lambda d, b: set_u32(d, leaf_elem(big_leaf(b, 1), 0) + 12, 5000),
        ["leaf element 0"],
    ),
    (
        "key pointing into the element array",
        lambda d, b: set_u32(d, leaf_elem(big_leaf(b, 1), 1) + 4, 0),
        ["leaf element 1"],
    ),
    (
        "empty key",
        lambda d, b: set_u32(d, leaf_elem(big_leaf(b, 1), 1) + 8, 0),
        ["leaf element 1 has an empty key"],
    ),
    (
        "unknown element flags",
        lambda d, b: set_u32(d, leaf_elem(big_leaf(b, 1), 1), 0x4),
        ["unknown flags 0x4"],
    ),
    (
        "keys out of order inside a leaf",
        lambda d, b: swap_first_keys(d, big_leaf(b, 1)),
        ["not after the previous key", "byte order", "bucket 'big'"],
    ),
    (
        "keys out of order across leaves",
        lambda d, b: d.__setitem__(slice(*key_span(d, big_leaf(b, 5), 0)), b"key-00000"),
        ["not after the previous key"],
    ),
    (
        "branch key outside its parent's range",
        lambda d, b: d.__setitem__(
            slice(*branch_key_span(d, b.trees[(b"big",)].branches[1], 0)), b"key-00000"
        ),
        ["first key 'key-00000' is before the parent branch's key 'key-00032'"],
    ),
    (
        "branch without elements",
        lambda d, b: struct.pack_into("<H", d, big_branch(b) * PS + 10, 0),
        ["branch page without elements"],
    ),
    (
        "branch pointing to itself",
        lambda d, b: set_u64(d, leaf_elem(big_branch(b), 0) + 8, big_branch(b)),
        ["points back to page", "a loop"],
    ),
    (
        "overflow beyond the high-water mark",
        lambda d, b: set_u32(d, big_leaf(b, 0) * PS + 12, 10_000),
        ["overflow pages", "past the high-water mark"],
    ),
    (
        "nested bucket header too short",
        lambda d, b: set_u32(d, bucket_elem(d, b, (b"nested",), b"child") + 12, 8),
        ["header of bucket 'nested'/'child'", "8 bytes"],
    ),
    (
        "nested bucket root beyond the high-water mark",
        lambda d, b: set_u64(d, bucket_value_offset(d, b, (b"nested",), b"child"), 10**9),
        ["root page 1000000000 outside the data pages"],
    ),
    (
        "inline bucket holding a branch page",
        lambda d, b: struct.pack_into(
            "<H", d, bucket_value_offset(d, b, (b"nested",), b"inline") + 16 + 8, BRANCH_PAGE
        ),
        ["inline page", "has type branch", "bucket 'nested'/'inline'"],
    ),
]


def key_span(data: bytearray, pgid: int, i: int) -> tuple[int, int]:
    elem = leaf_elem(pgid, i)
    _flags, pos, ksize, _vsize = struct.unpack_from("<IIII", data, elem)
    return elem + pos, elem + pos + ksize


def branch_key_span(data: bytearray, pgid: int, i: int) -> tuple[int, int]:
    elem = leaf_elem(pgid, i)
    pos, ksize, _child = struct.unpack_from("<IIQ", data, elem)
    return elem + pos, elem + pos + ksize


def swap_first_keys(data: bytearray, pgid: int) -> None:
    a0, a1 = key_span(data, pgid, 0)
    b0, b1 = key_span(data, pgid, 1)
    first, second = bytes(data[a0:a1]), bytes(data[b0:b1])
    assert len(first) == len(second)
    data[a0:a1], data[b0:b1] = second, first


def bucket_elem(data: bytearray, b: Builder, parent: tuple[bytes, ...], key: bytes) -> int:
    for pgid in b.trees[parent].leaves:
        count = struct.unpack_from("<H", data, pgid * PS + 10)[0]
        for i in range(count):
            start, stop = key_span(data, pgid, i)
            if data[start:stop] == key:
                return leaf_elem(pgid, i)
    raise AssertionError(key)


def bucket_value_offset(data: bytearray, b: Builder, parent: tuple[bytes, ...], key: bytes) -> int:
    elem = bucket_elem(data, b, parent, key)
    _flags, pos, ksize, _vsize = struct.unpack_from("<IIII", data, elem)
    return int(elem + pos + ksize)


@pytest.mark.parametrize(("what", "edit", "fragments"), DAMAGE, ids=[d[0] for d in DAMAGE])
def test_structural_damage_is_named(
    tmp_path: Path, what: str, edit: Any, fragments: list[str]
) -> None:
    builder = Builder()
    data = damaged(builder, sample_content(), edit)
    path = write(tmp_path, data)
    with time_limit(10), pytest.raises(LegacyDbError) as caught:
        read_everything(path)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, message
    assert "page" in message or "offset" in message


def test_bucket_loop_through_nested_headers(tmp_path: Path) -> None:
    builder = Builder()
    content = {b"a": {b"b": {b"k": b"v"}}}
    data = builder.build(content)
    # Make a/b's header point at a's own root page: walking would recurse forever.
    set_u64(data, bucket_value_offset(data, builder, (b"a",), b"b"), builder.trees[(b"a",)].root)
    path = write(tmp_path, data)
    with time_limit(10), pytest.raises(LegacyDbError, match="root of an enclosing bucket"):
        read_everything(path)


def test_chain_deeper_than_the_limit_is_refused(tmp_path: Path) -> None:
    # A chain of one-element branch pages, each pointing to the next: legal page by page,
    # but deeper than any real tree.
    builder = Builder()
    leaf = builder._write(LEAF_PAGE, 1, *leaf_body([(0, b"k", b"v")]))
    child = leaf
    for _ in range(MAX_TREE_DEPTH + 5):
        child = builder._write(BRANCH_PAGE, 1, *branch_body([(b"k", child)]))
    top = builder._write(
        LEAF_PAGE, 1, *leaf_body([(BUCKET_LEAF_FLAG, b"deep", struct.pack("<QQ", child, 0))])
    )
    hwm = builder.next
    data = bytearray(hwm * PS)
    for i in (0, 1):
        data[i * PS : i * PS + 80] = meta_page(i, PS, top, hwm, 4 + i)
    for pgid, raw in builder.pages.items():
        data[pgid * PS : pgid * PS + len(raw)] = raw
    path = write(tmp_path, data)
    with BoltFile(path) as db:
        with pytest.raises(LegacyDbError, match=f"deeper than {MAX_TREE_DEPTH} levels"):
            list(db.items([b"deep"]))
        with pytest.raises(LegacyDbError, match=f"deeper than {MAX_TREE_DEPTH} levels"):
            db.bucket([b"deep", b"k"])


def test_plain_value_in_the_root_bucket_is_refused(tmp_path: Path) -> None:
    builder = Builder()
    data = builder.build({b"a": {}, b"b": {}})
    root_leaf = builder.trees[()].leaves[0]
    set_u32(data, leaf_elem(root_leaf, 1), 0)  # clear the bucket flag of "b"
    with (
        BoltFile(write(tmp_path, data)) as db,
        pytest.raises(LegacyDbError, match="root bucket holds a plain value under 'b'"),
    ):
        db.bucket_names()


def test_file_shorter_than_the_high_water_mark(tmp_path: Path) -> None:
    data = Builder().build(sample_content())
    cut = len(data) - PS - 100
    with pytest.raises(LegacyDbError, match=f"file ends at offset {cut}"):
        BoltFile(write(tmp_path, data[:cut]))


# --------------------------------------------------------------------------- mutations

SMALL = (LEGACY / "small-counter.db").read_bytes()
SMALL_PAGES = 89  # the high-water mark of small-counter.db


def check_mutant(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mutant.db"
        path.write_bytes(data)
        started = time.monotonic()
        with time_limit(20):
            try:
                read_everything(path)
            except LegacyDbError as exc:
                assert str(exc)
            try:  # the count from the page headers: a number or our error, whatever the walk said
                with BoltFile(path) as db:
                    for name in TOP_BUCKETS:
                        if db.bucket([name]) is not None:
                            db.entry_count([name])
            except LegacyDbError as exc:
                assert str(exc)
        assert time.monotonic() - started < 20
        assert path.read_bytes() == data


offsets_anywhere = st.integers(0, len(SMALL) - 1)
# Most flips land in key/value bytes; these aim at headers, element arrays and metas.
offsets_in_structure = st.builds(
    lambda page, within: page * PS + within, st.integers(0, SMALL_PAGES - 1), st.integers(0, 255)
)
flips = st.lists(
    st.tuples(st.one_of(offsets_anywhere, offsets_in_structure), st.integers(1, 255)),
    min_size=0,
    max_size=6,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flips=flips, cut=st.one_of(st.none(), st.integers(0, len(SMALL))))
def test_mutated_small_fixture_reads_or_raises_our_error(
    flips: list[tuple[int, int]], cut: int | None
) -> None:
    data = bytearray(SMALL)
    for offset, mask in flips:
        data[offset] ^= mask
    check_mutant(bytes(data[:cut] if cut is not None else data))


SYNTHETIC = bytes(Builder().build(sample_content()))
SYNTHETIC_WRITTEN = [i for i, byte in enumerate(SYNTHETIC) if byte]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    flips=st.lists(
        st.tuples(st.integers(0, len(SYNTHETIC) - 1), st.integers(1, 255)), min_size=1, max_size=4
    ),
    cut=st.one_of(st.none(), st.integers(0, len(SYNTHETIC))),
)
def test_mutated_hand_built_file_reads_or_raises_our_error(
    flips: list[tuple[int, int]], cut: int | None
) -> None:
    # This file has nested, inline and overflow pages, which the real fixtures lack.
    data = bytearray(SYNTHETIC)
    for offset, mask in flips:
        data[SYNTHETIC_WRITTEN[offset % len(SYNTHETIC_WRITTEN)]] ^= mask  # not at padding
    check_mutant(bytes(data[:cut] if cut is not None else data))


# --------------------------------------------------------------------------- streaming


@pytest.fixture(scope="module")
def medium_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not SHARED_MEDIUM.exists():
        pytest.skip(f"{SHARED_MEDIUM} is not here")
    path = tmp_path_factory.mktemp("medium") / "medium-counter.db"
    with lzma.open(SHARED_MEDIUM) as src, path.open("wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    path.chmod(0o444)
    return path


def test_medium_fixture_streams_in_bounded_memory(medium_db: Path) -> None:
    summary = json.loads((LEGACY / "medium-counter.summary.json").read_text())
    before = sha256(medium_db)
    assert before == summary["db_sha256"]
    size = medium_db.stat().st_size
    sample = {k.encode(): be64(v) for k, v in summary["ids"]["forward_sample"].items()}
    seen: dict[bytes, bytes | None] = {}
    count = 0
    previous = b""
    tracemalloc.start()
    try:
        with BoltFile(medium_db) as db:
            for key, value in db.items([b"ids"]):
                assert key > previous
                previous = key
                count += 1
                if key in sample:
                    seen[key] = value
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == summary["key_counts"]["ids"]
    assert seen == sample
    assert peak < min(size // 20, 2 << 20), f"peak {peak} bytes for a {size}-byte file"
    assert sha256(medium_db) == before


def test_medium_fixture_key_counts(medium_db: Path) -> None:
    summary = json.loads((LEGACY / "medium-counter.summary.json").read_text())
    with BoltFile(medium_db) as db:
        assert db.bucket_names() == TOP_BUCKETS
        counts = {name.decode(): sum(1 for _ in db.items([name])) for name in TOP_BUCKETS}
        from_headers = {name.decode(): db.entry_count([name]) for name in TOP_BUCKETS}
    assert counts == summary["key_counts"] == from_headers
