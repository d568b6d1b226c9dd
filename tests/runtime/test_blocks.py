"""The message ids' high-water mark in the precious store (runtime.blocks, issue 29.2): real
openid-map.db files and PostgreSQL schemas, real msgid-map.db files and Redis prefixes.

The daemon-level proof (a damaged msgid-map.db, FLUSHALL, Redis restarted empty, with each
graph backend) is tests/e2e/test_msgid_high_water.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap.errors import StoreError
from gensokyo_idmap.runtime.msgid import INT32_MAX, MessageIds, MsgContext, MsgIdMap
from gensokyo_idmap.runtime.blocks import (
    BLOCK,
    MSG_RESERVED,
    IdBlocks,
    reserve_in,
    virtual_id_at,
)
from gensokyo_idmap.runtime.redis.state import RedisMsgIdMap
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore, open_msgid_store
from gensokyo_idmap.runtime.redis.scripts import RedisMsgIds
from gensokyo_idmap.runtime.redis.connection import RedisRuntime

from ..conftest import MSGID_BACKENDS, FakeClock, run
from ..store_backends import StoreFactory, open_store  # noqa: F401 - the fixture

GROUP = MsgContext("102000001", "group", "G1", "in")
TTL = 3600.0


# --- positions and their ids ----------------------------------------------------------------


@given(st.integers(1, 2**62))
def test_the_id_of_a_position_is_a_positive_int32_that_comes_back_after_a_full_turn(
        position: int) -> None:
    vid = virtual_id_at(position)
    assert 1 <= vid <= INT32_MAX
    assert virtual_id_at(position + INT32_MAX) == vid
    assert virtual_id_at(position + 1) == vid % INT32_MAX + 1


def test_ids_wrap_from_int32_max_to_1() -> None:
    assert [virtual_id_at(p) for p in (1, INT32_MAX - 1, INT32_MAX, INT32_MAX + 1)] == [
        1, INT32_MAX - 1, INT32_MAX, 1]


# --- the mark in each precious store --------------------------------------------------------


def test_a_reservation_raises_the_mark_durably(open_store: StoreFactory) -> None:  # noqa: F811
    store = open_store()
    try:
        assert reserve_in(store, 0) == (0, BLOCK)
        assert reserve_in(store, 25_000) == (BLOCK, 25_000 + BLOCK)  # above what it was told
        assert reserve_in(store, 5, block=10) == (25_000 + BLOCK, 25_000 + BLOCK + 10)
    finally:
        store.close()
    store = open_store()  # what the next process finds
    try:
        with store.read() as view:
            assert view.get_meta(MSG_RESERVED) == 25_000 + BLOCK + 10
    finally:
        store.close()


def test_processes_reserving_at_once_each_get_a_block_of_their_own(
        open_store: StoreFactory) -> None:  # noqa: F811
    """Four reservers at once, each with a store of its own on PostgreSQL (as daemons
    have: their transactions conflict and one is run again), one shared on LMDB (one per
    process; its single writer, and LMDB's lock across processes, serialise them): no
    position is in two blocks."""
    first = open_store()
    shared = isinstance(first, LmdbIdentityStore)
    stores = [first] * 4 if shared else [first, *(open_store() for _ in range(3))]
    blocks: list[tuple[int, int]] = []
    start = threading.Barrier(4)

    def reserve_many(store: Any) -> None:
        start.wait()
        for _ in range(10):
            blocks.append(reserve_in(store, 0, block=100))

    threads = [threading.Thread(target=reserve_many, args=(store,)) for store in stores]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        for store in set(stores):
            store.close()
    assert sorted(blocks) == [(100 * i, 100 * (i + 1)) for i in range(40)]


# --- allocation within the blocks -----------------------------------------------------------


@pytest.fixture
def identity_store(tmp_path: Path) -> Iterator[LmdbIdentityStore]:
    store = LmdbIdentityStore(tmp_path / "openid-map.db")
    yield store
    store.close()


class Runtime:
    """One process's message ids on one backend, over the same precious store each time:
    msgid-map.db of the test's dir, or a Redis prefix of the test's own. ``lose`` throws
    the disposable store away (file moved aside / every key of the prefix deleted)."""

    def __init__(self, backend: str, identity: LmdbIdentityStore, tmp_path: Path,
                 request: pytest.FixtureRequest, clock: FakeClock) -> None:
        self.backend = backend
        self.identity = identity
        self.path = tmp_path / "msgid-map.db"
        self.clock = clock
        self.redis: RedisRuntime | None = (request.getfixturevalue("redis_runtime")
                                           if backend == "redis" else None)
        self.stores: list[LmdbMsgIdStore] = []
        self.blocks: list[IdBlocks] = []

    def start(self, block: int = BLOCK) -> MessageIds:
        """A process starting (its blocks not reserved yet)."""
        blocks = IdBlocks(partial(reserve_in, self.identity, block=block), block)
        self.blocks.append(blocks)
        if self.redis is not None:
            return RedisMsgIdMap(RedisMsgIds(self.redis), clock=self.clock, ttl_seconds=TTL,
                                 blocks=blocks)
        for running in self.stores:  # the process before it ended
            running.close()
        store = open_msgid_store(self.path)
        self.stores.append(store)
        return MsgIdMap(store, clock=self.clock, ttl_seconds=TTL, blocks=blocks)

    def lose(self) -> None:
        if self.redis is not None:
            self.redis.delete_all()
            return
        for store in self.stores:
            store.close()
        self.stores.clear()
        self.path.rename(self.path.with_name("msgid-map.db.aside"))
        self.path.with_name("msgid-map.db-lock").unlink(missing_ok=True)

    def close(self) -> None:
        for blocks in self.blocks:
            blocks.close()
        for store in self.stores:
            store.close()


@pytest.fixture(params=MSGID_BACKENDS)
def runtime(request: pytest.FixtureRequest, identity_store: LmdbIdentityStore,
            tmp_path: Path, clock: FakeClock) -> Iterator[Runtime]:
    found = Runtime(request.param, identity_store, tmp_path, request, clock)
    yield found
    found.close()


def store(msgids: MessageIds, *reals: str) -> list[int]:
    return [msgids.store_real_sync(real, GROUP) for real in reals]


def test_a_lost_store_and_a_restart_go_on_above_every_id_handed_out(
        runtime: Runtime) -> None:
    first = store(runtime.start(), "a", "b", "c")
    assert first == [1, 2, 3]
    runtime.lose()
    second = store(runtime.start(), "d", "e")  # a restart: the next block, above the mark
    assert second == [BLOCK + 1, BLOCK + 2]
    runtime.lose()
    third = run(runtime.start().store_many([("f", GROUP), ("g", GROUP)]))
    assert third == [2 * BLOCK + 1, 2 * BLOCK + 2]
    with runtime.identity.read() as view:
        assert view.get_meta(MSG_RESERVED) == 3 * BLOCK


def test_the_store_kept_loses_only_the_rest_of_the_block_at_a_restart(
        runtime: Runtime) -> None:
    msgids = runtime.start(block=10)
    assert store(msgids, *"abcdefghijkl") == list(range(1, 13))  # a block and more
    # the third block was reserved ahead, at 16: not yet. A restart starts above the
    # second (11-20), the ids left in it skipped: they may have been handed out
    assert store(runtime.start(block=10), "m") == [21]


def test_the_next_block_is_reserved_ahead_and_one_taken_meanwhile_is_stepped_over(
        runtime: Runtime) -> None:
    msgids = runtime.start(block=10)
    assert store(msgids, "a") == [1]
    assert reserve_in(runtime.identity, 0, block=10) == (10, 20)  # another process's block
    # the block asked for at 6, ahead, came after the other process's: 21-30
    assert store(msgids, *"bcdefghijk") == [*range(2, 11), 21]
    with runtime.identity.read() as view:
        assert view.get_meta(MSG_RESERVED) == 30


def test_a_precious_store_that_cannot_take_the_reservation_fails_the_store_naming_it(
        runtime: Runtime, tmp_path: Path) -> None:
    gone = LmdbIdentityStore(tmp_path / "other.db")
    gone.close()
    msgids = runtime.start()
    msgids_failing: Any = msgids
    msgids_failing._blocks = IdBlocks(partial(reserve_in, gone))
    with pytest.raises(StoreError, match="cannot be reserved in the identity store"):
        msgids.store_real_sync("a", GROUP)
    assert msgids.virtual_of("a") is None  # nothing written
    msgids_failing._blocks = runtime.blocks[0]
    assert store(msgids, "a") == [1]


def test_at_the_wrap_ids_start_again_at_1_skip_live_ones_and_a_loss_repeats_none(
        runtime: Runtime) -> None:
    msgids = runtime.start()
    assert store(msgids, "live") == [1]
    # the counter near the top of int32: the positions go on, their ids wrap
    runtime.identity.write_sync(lambda view: view.set_meta(MSG_RESERVED, INT32_MAX - 3))
    msgids = runtime.start()  # a restart: goes on above the mark
    wrapped = store(msgids, "a", "b", "c", "d")
    assert wrapped == [INT32_MAX - 2, INT32_MAX - 1, INT32_MAX, 2]  # 1 is alive: skipped
    runtime.lose()
    after = store(runtime.start(), "e", "f")
    assert after == [BLOCK - 2, BLOCK - 1]  # positions INT32_MAX - 3 + BLOCK + 1, …
    assert not set(after) & {1, *wrapped}


def test_no_id_of_a_block_is_handed_out_before_its_reservation_is_durable(
        runtime: Runtime) -> None:
    """The next block is asked for ahead, but an id from it only once the precious store
    has committed it (a daemon killed in between has handed out nothing above the mark). A
    store that waited too long fails, writing nothing; the next one gets the same block."""
    gate, asked = threading.Event(), threading.Event()
    calls: list[int] = []

    def gated(at_least: int) -> tuple[int, int]:
        calls.append(at_least)
        if len(calls) > 1:  # the block after the first: held until the test lets it go
            asked.set()
            assert gate.wait(30)
        return reserve_in(runtime.identity, at_least, block=4)

    msgids = runtime.start(block=4)
    found: Any = msgids
    found._blocks = IdBlocks(gated, 4, wait_seconds=0.05)
    assert store(msgids, "a", "b", "c") == [1, 2, 3]  # the next block asked for at 3
    assert asked.wait(30)
    assert store(msgids, "d") == [4]  # still the first block: no wait
    with pytest.raises(StoreError, match="not committed the reservation within 0.05 s"):
        msgids.store_real_sync("e", GROUP)  # its block is not durable yet: no id
    assert msgids.virtual_of("e") is None
    with runtime.identity.read() as view:
        assert view.get_meta(MSG_RESERVED) == 4
    gate.set()
    assert store(msgids, "e") == [5]
    assert calls == [0, 4]  # one reservation each: the one waited for was kept
    with runtime.identity.read() as view:
        assert view.get_meta(MSG_RESERVED) == 8


def test_two_daemons_on_one_redis_and_one_mark_never_share_an_id_across_flushes(
        open_store: StoreFactory, redis_runtime: RedisRuntime,  # noqa: F811
        clock: FakeClock) -> None:
    """Daemons sharing a Redis prefix and the graph (PostgreSQL: a store each; LMDB: one
    process's store) each take ids from blocks of their own: the prefix emptied while
    both run (what FLUSHALL does to it), or both restarted, repeats no id."""
    first = open_store()
    second = first if isinstance(first, LmdbIdentityStore) else open_store()
    running: list[IdBlocks] = []

    def daemon(mark: Any) -> MessageIds:
        blocks = IdBlocks(partial(reserve_in, mark))
        running.append(blocks)
        return RedisMsgIdMap(RedisMsgIds(redis_runtime), clock=clock, ttl_seconds=TTL,
                             blocks=blocks)

    handed: list[int] = []
    try:
        for restart in range(2):
            a, b = daemon(first), daemon(second)
            for flush in range(2):
                tag = f"{restart}.{flush}"
                handed += store(a, f"a{tag}x", f"a{tag}y") + store(b, f"b{tag}x", f"b{tag}y")
                redis_runtime.delete_all()
    finally:
        for blocks in running:
            blocks.close()
        for mark in {id(first): first, id(second): second}.values():
            mark.close()
    assert len(handed) == 16
    assert len(set(handed)) == 16, f"ids handed out twice: {handed}"
