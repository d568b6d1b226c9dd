"""The plain-read check of LMDB files (store/lmdb/check.py) on real files.

Whole files of every shape our stores take pass, and the walk reaches every page in use
(pages reached + pages the free list names + the two meta pages = the file's pages, LMDB's
own audit); a file LMDB left ending before its last page (pages it took and freed in one
commit are never written) passes and LMDB reads and writes it; each kind of damage is named,
a page in use past the end of the file among them; and a property test damages random pages
of a real store: whatever the check lets through, LMDB reads to the end, copies and writes
in a child process without dying by a signal.
"""

from __future__ import annotations

import faulthandler
import os
import random
import re
import signal
import struct
from collections.abc import Callable
from pathlib import Path

import lmdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gensokyo_idmap.store.lmdb.check import DamagedStoreError, _Walk, check_file, read_meta
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore, LmdbView
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore
from gensokyo_idmap.store.lmdb.outbox import LmdbOutboxStore

from ...lmdb_pages import leave_unwritten_tail, pages_past_end, walk_pages

PAGE = 4096


def _key(n: int) -> str:
    return f"openid:QQ:102:{n:032X}"


def _rich(view: LmdbView) -> None:
    """Every shape: branch pages, a vUIN with a few identities (duplicates on a sub-page),
    one with hundreds (a sub-database), a value spanning overflow pages."""
    for n in range(1, 400):
        view.set_vuin(_key(n), n)
        view.add_identity(n, _key(n))
    for i in range(300):
        view.set_vuin(f"raw:{i:06d}{'x' * 40}", 7)
        view.add_identity(7, f"raw:{i:06d}{'x' * 40}")
    for i in range(5):
        view.add_identity(8, f"raw:sub{i}")
    view.put_config(b"big:value", b"v" * 20000)
    view.set_vuin_counter(400)


def _churn(view: LmdbView) -> None:
    """Deletes and a rewritten big value: pages go to the free list."""
    for n in range(1, 200):
        view.remove_identity(n, _key(n))
    view.put_config(b"big:value", b"w" * 30000)


@pytest.fixture(scope="module")
def rich_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rich") / "openid-map.db"
    with LmdbIdentityStore(path) as store:
        store.write_sync(_rich)
        store.write_sync(_churn)
    return path


def _audit(path: Path) -> tuple[int, int, int]:
    """(pages the walk reached, pages the free list names, the file's pages in use)."""
    reached, free = walk_pages(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        last_page = read_meta(fd, os.fstat(fd).st_size, str(path)).last_page
    finally:
        os.close(fd)
    return len(reached), len(free), last_page + 1


def _msgid_store(path: Path) -> None:
    with LmdbMsgIdStore(path) as store:
        store.write_sync(lambda view: view.set_msg_counter(5))


def _outbox_store(path: Path) -> None:
    with LmdbOutboxStore(path) as store:
        store.write_sync(lambda view: [view.add("sink", b"x" * 3000) for _ in range(30)])
        store.write_sync(lambda view: view.trim("sink", 3))


def _empty_identity_store(path: Path) -> None:
    LmdbIdentityStore(path).close()


@pytest.mark.parametrize("make", [_empty_identity_store, _msgid_store, _outbox_store])
def test_whole_stores_pass_and_every_page_is_reached(tmp_path: Path,
                                                     make: Callable[[Path], None]) -> None:
    path = tmp_path / "store.db"
    make(path)
    check_file(path)
    reached, free, pages = _audit(path)
    assert reached + free + 2 == pages


def test_every_shape_passes_and_every_page_is_reached(rich_store: Path) -> None:
    meta = check_file(rich_store)
    reached, free, pages = _audit(rich_store)
    assert free > 0  # the churn gave the free list something to walk
    assert reached + free + 2 == pages == meta.last_page + 1
    env = lmdb.open(str(rich_store), subdir=False, readonly=True, lock=False, max_dbs=16)
    try:
        with env.begin() as txn:
            vuin_sets = env.open_db(b"vuin_to_identity", txn=txn, dupsort=True, create=False)
            config = env.open_db(b"config", txn=txn, create=False)
            assert txn.stat(config)["overflow_pages"] > 0
            assert txn.stat(vuin_sets)["branch_pages"] > 0
    finally:
        env.close()


def _rich_copy(src: Path) -> Callable[[Path], None]:
    return lambda path: path.write_bytes(src.read_bytes())


@pytest.fixture(params=["openid-map.db", "msgid-map.db", "outbox.db"])
def short_store(request: pytest.FixtureRequest, rich_store: Path, tmp_path: Path
                ) -> tuple[Path, type[LmdbIdentityStore | LmdbMsgIdStore | LmdbOutboxStore]]:
    """A store of each kind that LMDB left ending before its meta's last page."""
    make, kind = {"openid-map.db": (_rich_copy(rich_store), LmdbIdentityStore),
                  "msgid-map.db": (_msgid_store, LmdbMsgIdStore),
                  "outbox.db": (_outbox_store, LmdbOutboxStore)}[request.param]
    path = tmp_path / request.param
    make(path)
    assert pages_past_end(path) <= 0
    assert leave_unwritten_tail(path) > 0  # the case this names: the file ends early
    return path, kind


def test_a_file_lmdb_left_shorter_than_its_last_page_passes(
        short_store: tuple[Path, type[LmdbIdentityStore | LmdbMsgIdStore | LmdbOutboxStore]]
) -> None:
    """Issue 29: after a kill -9 the daemon refused its own outbox.db as cut short."""
    path, kind = short_store
    meta = check_file(path)
    assert path.stat().st_size < (meta.last_page + 1) * PAGE
    reached, free, pages = _audit(path)
    assert reached + free + 2 == pages  # the pages never written are free ones
    assert max(walk_pages(path)[0]) * PAGE < path.stat().st_size
    assert _survives(path) == 0  # LMDB reads it to the end, copies it, writes to it
    check_file(path)
    kind(path).close()  # and the store opens it (checked before it is mapped)


def _cut(path: Path, pages: int) -> None:
    os.truncate(path, pages * PAGE)


def test_a_page_in_use_past_the_end_is_cut_short(rich_store: Path, tmp_path: Path) -> None:
    """The file cut at the highest page of a tree (every page in use from it on is gone)."""
    path = tmp_path / "openid-map.db"
    path.write_bytes(rich_store.read_bytes())
    leave_unwritten_tail(path)
    raw = path.read_bytes()
    highest = max(pgno for pgno in walk_pages(path)[0]
                  if struct.unpack_from("<H", raw, pgno * PAGE + 10)[0] & 0x03)  # branch, leaf
    _cut(path, highest)
    with pytest.raises(DamagedStoreError) as caught:
        check_file(path)
    said = re.search(r" is cut short: .* points to pages? (?:\d+\.\.)?(\d+), but the file "
                     r"ends after (\d+) bytes", caught.value.message)
    assert said is not None, caught.value.message
    assert caught.value.message.startswith(str(path))
    assert int(said[1]) >= highest and int(said[2]) == highest * PAGE
    assert _survives(path) == -signal.SIGBUS  # what LMDB would have done with it


def test_an_overflow_run_cut_in_its_middle_is_cut_short(tmp_path: Path) -> None:
    """The first page of a big value inside the file, the rest of its run past the end."""
    path = tmp_path / "big.db"
    env = lmdb.open(str(path), subdir=False, max_dbs=16)
    with env.begin(write=True) as txn:
        txn.put(b"big", b"v" * 5 * PAGE)
    env.close()
    runs: list[tuple[int, int]] = []

    class Recording(_Walk):
        def overflow(self, pgno: int, dsize: int, where: str) -> None:
            super().overflow(pgno, dsize, where)
            runs.append((pgno, -(-(dsize + 16) // PAGE)))

    fd = os.open(path, os.O_RDONLY)
    try:
        meta = read_meta(fd, os.fstat(fd).st_size, str(path))
        Recording(fd, meta, str(path), set()).database(meta.main, "the main database")
    finally:
        os.close(fd)
    [(first, pages)] = runs
    assert first + pages - 1 == meta.last_page  # the run ends the file
    _cut(path, first + 1)
    with pytest.raises(DamagedStoreError) as caught:
        check_file(path)
    assert f"points to pages {first}..{first + pages - 1}, but the file ends" in (
        caught.value.message)
    assert _survives(path) == -signal.SIGBUS


def _damaged_copy(src: Path, dst: Path, change: Callable[[bytearray], None]) -> Path:
    raw = bytearray(src.read_bytes())
    change(raw)
    dst.write_bytes(bytes(raw))
    return dst


@pytest.mark.parametrize(("change", "said"), [
    (lambda raw: raw.clear(), "is empty (0 bytes)"),
    (lambda raw: raw.__delitem__(slice(100, None)), "meta page 0 is cut short"),
    (lambda raw: raw.__delitem__(slice(5000, None)), "is cut short: the free list points to "
                                                      "page"),
    (lambda raw: raw.__setitem__(slice(16, 20), b"\0\0\0\0"), "not LMDB's 0xbeefc0de"),
    (lambda raw: raw.__setitem__(slice(PAGE + 16, PAGE + 20), b"\1\2\3\4"),
     "meta page 1 has magic"),
    (lambda raw: raw.__setitem__(slice(20, 24), struct.pack("<I", 2)), "data version 2"),
    (lambda raw: raw.__setitem__(slice(40, 44), struct.pack("<I", 3000)), "page size 3000"),
    (lambda raw: raw.__setitem__(slice(10, 12), b"\0\0"), "page 0 is not a meta page"),
], ids=["empty", "cut-in-meta-0", "cut-in-data", "magic-0", "magic-1", "version",
        "page-size", "not-meta"])
def test_header_damage_is_named(rich_store: Path, tmp_path: Path,
                                change: Callable[[bytearray], None], said: str) -> None:
    path = _damaged_copy(rich_store, tmp_path / "openid-map.db", change)
    with pytest.raises(DamagedStoreError, match=str(path)) as caught:
        check_file(path)
    assert said in caught.value.message


def _newest_meta_at(raw: bytearray) -> int:
    return max((0, PAGE), key=lambda at: struct.unpack_from("<Q", raw, at + 144)[0])


def _main_root(raw: bytearray) -> int:
    return int(struct.unpack_from("<Q", raw, _newest_meta_at(raw) + 128)[0])


@pytest.mark.parametrize(("change", "said"), [
    (lambda raw: struct.pack_into("<Q", raw, _newest_meta_at(raw) + 136, _main_root(raw) - 1),
     "outside pages 2.."),
    (lambda raw: struct.pack_into("<Q", raw, _newest_meta_at(raw) + 136, 0),
     "gives 0 as its last page"),
    (lambda raw: struct.pack_into("<Q", raw, _newest_meta_at(raw) + 128, 10**6),
     "the main database starts at page 1000000"),
    (lambda raw: struct.pack_into("<Q", raw, _main_root(raw) * PAGE, 7), "holds page number 7"),
    (lambda raw: struct.pack_into("<H", raw, _main_root(raw) * PAGE + 10, 0x08),
     "neither a branch nor a leaf page"),
    (lambda raw: struct.pack_into("<HH", raw, _main_root(raw) * PAGE + 12, 4000, 100),
     "bad free-space bounds"),
], ids=["last-page", "last-page-0", "main-root", "page-number", "page-kind", "page-bounds"])
def test_tree_damage_is_named(rich_store: Path, tmp_path: Path,
                              change: Callable[[bytearray], None], said: str) -> None:
    path = _damaged_copy(rich_store, tmp_path / "openid-map.db", change)
    with pytest.raises(DamagedStoreError) as caught:
        check_file(path)
    assert said in caught.value.message


def _read_everything(path: Path) -> None:
    """Every table to the end (duplicates too), a plain and a compacting copy, and a write."""
    env = lmdb.open(str(path), subdir=False, readonly=True, lock=False, max_dbs=16)
    with env.begin() as txn:
        names = [bytes(key) for key, _ in txn.cursor()]
        for name in names:
            db = env.open_db(name, txn=txn, create=False,
                             dupsort=name == b"vuin_to_identity")
            cursor = txn.cursor(db)
            for _ in cursor.iternext():
                pass
    with open(os.devnull, "wb") as sink:
        env.copyfd(sink.fileno())
        env.copyfd(sink.fileno(), compact=True)
    env.close()
    env = lmdb.open(str(path), subdir=False, lock=False, max_dbs=16)
    with env.begin(write=True) as txn:
        db = env.open_db(b"probe", txn=txn)
        for n in range(200):
            txn.put(b"%d" % n, b"x" * 300, db=db)
    env.close()


def _survives(path: Path) -> int:
    """The exit status of a child doing :func:`_read_everything` (negative: a signal)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            faulthandler.disable()  # a SIGBUS some tests expect: no report of it
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            _read_everything(path)
        except lmdb.Error:
            code = 1
        except BaseException:  # noqa: BLE001
            code = 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1),
       kind=st.sampled_from(["page", "span", "bytes", "header"]))
def test_what_the_check_lets_through_lmdb_reads_without_a_signal(
        rich_store: Path, tmp_path: Path, seed: int, kind: str) -> None:
    rng = random.Random(seed)
    pages = rich_store.stat().st_size // PAGE
    page = rng.randrange(2, pages)

    def damage(raw: bytearray) -> None:
        at = page * PAGE
        if kind == "page":
            raw[at:at + PAGE] = rng.randbytes(PAGE)
        elif kind == "span":
            start = rng.randrange(16, PAGE - 1)
            end = rng.randrange(start + 1, PAGE)
            raw[at + start:at + end] = rng.randbytes(end - start)
        elif kind == "bytes":
            for _ in range(rng.randrange(1, 8)):
                raw[at + rng.randrange(PAGE)] = rng.randrange(256)
        else:
            raw[at:at + 16] = rng.randbytes(16)

    path = _damaged_copy(rich_store, tmp_path / "damaged.db", damage)
    try:
        check_file(path)
    except DamagedStoreError:
        return
    assert _survives(path) >= 0
