"""An LMDB store unmaps the pages of its file it read: the process's resident size drops,
the data stays, reads go on (:mod:`gensokyo_idmap.store.lmdb.mapped_pages`, issue 36.4).

Real stores in a temp dir, the resident size read from this process's own
``/proc/self/smaps``; the advice reaches no mapping but the store's file.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.store.lmdb.mapped_pages import file_mappings, release, run_releaser

KEYS = 3_000


def resident_kib(path: Path) -> int:
    """Resident kB of this process's mappings of ``path`` (smaps, by name)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and not head[0].endswith(":"):
            inside = len(head) >= 6 and head[5] == str(path)
        elif inside and head[:1] == ["Rss:"]:
            total += int(head[1])
    return total


def filled(path: Path) -> LmdbIdentityStore:
    store = LmdbIdentityStore(path)

    def fill(view: object) -> None:
        for n in range(KEYS):
            view.set_vuin(f"raw:{n:06d}" + "x" * 150, n + 1)  # type: ignore[attr-defined]

    store.write_sync(fill)
    return store


def read_all(store: LmdbIdentityStore) -> list[int | None]:
    with store.read() as view:
        return [view.vuin_of(f"raw:{n:06d}" + "x" * 150) for n in range(KEYS)]


def test_a_store_unmaps_the_pages_it_read_and_reads_them_again(tmp_path: Path) -> None:
    path = (tmp_path / "openid-map.db").resolve()
    store = filled(path)
    try:
        assert read_all(store) == list(range(1, KEYS + 1))
        before = resident_kib(path)
        assert before >= 400  # about 600 KiB of pages read through the map
        advised = store.release_mapped_pages()
        assert advised >= store.map_size  # the whole map
        assert resident_kib(path) < before / 4
        assert read_all(store) == list(range(1, KEYS + 1))  # the data is where it was
        assert resident_kib(path) >= 400  # mapped again by the reads
    finally:
        store.close()
    assert store.release_mapped_pages() == 0  # closed: nothing to do


def test_the_advice_goes_to_shared_mappings_of_the_file_only(tmp_path: Path) -> None:
    path = tmp_path / "openid-map.db"
    path.write_bytes(b"\0" * 8192)
    st = os.stat(path)
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}"
    maps = "\n".join([
        f"7f0000000000-7f0004000000 r--s 00000000 {device} {st.st_ino}   {path}",
        f"7f1000000000-7f1000002000 rw-p 00000000 {device} {st.st_ino}   {path}",  # private
        f"7f2000000000-7f2000001000 r--s 00000000 {device} {st.st_ino + 1}   {path}.old",
        "7f3000000000-7f3000021000 rw-p 00000000 00:00 0 ",  # anonymous
        f"7f4000000000-7f4000001000 r--s 00000000 fe:fd {st.st_ino}   elsewhere",
    ])
    assert file_mappings(path, maps) == [(0x7F0000000000, 0x7F0004000000)]
    advised: list[tuple[int, int]] = []

    def madvise(addr: int, length: int) -> int:
        advised.append((addr, length))
        return 0

    # this process maps no such file: release() advises nothing
    assert release(path, madvise) == 0
    assert advised == []


@pytest.mark.parametrize("stores", [1, 3])
def test_the_releaser_unmaps_each_store_on_its_interval_until_stopped(stores: int) -> None:
    class Store:
        calls = 0

        def release_mapped_pages(self) -> int:
            self.calls += 1
            return 0

    async def main() -> list[int]:
        each = [Store() for _ in range(stores)]
        stop = asyncio.Event()
        task = asyncio.create_task(run_releaser(stop, each, interval_seconds=0.01))
        while min(store.calls for store in each) < 3:
            await asyncio.sleep(0.01)
        stop.set()
        await asyncio.wait_for(task, 5)
        return [store.calls for store in each]

    calls = asyncio.run(main())
    assert all(n >= 3 for n in calls)
