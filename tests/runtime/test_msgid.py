"""Virtual message ids (DESIGN §2 msgid-map.db, issue 3) on a real LMDB file.

Time only moves when a test moves the FakeClock; nothing sleeps. Tables are checked through
the store's own read view, never through a mock.
"""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from gensokyo_idmap.errors import BadInputError, NotFoundError, StoreError
from gensokyo_idmap.runtime.msgid import (
    INT32_MAX,
    MAX_CONTENT_BYTES,
    MessageIds,
    MsgContext,
    MsgIdMap,
    check_virtual_id,
)
from gensokyo_idmap.runtime.redis.state import RedisMsgIdMap
from gensokyo_idmap.runtime.base import MsgContent, MsgRecord
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore

from ..conftest import MSGID_BACKENDS, FakeClock, msgid_map, run

TTL = 100.0  # seconds
TTL_MS = int(TTL * 1000)
APP = "102000001"
GROUP = MsgContext(APP, "group", "G1", "in")
OTHER_GROUP = MsgContext(APP, "group", "G2", "in")
OUT = MsgContext(APP, "group", "G1", "out")


@pytest.fixture
def db_path(msgid_db_path: Path) -> Path:
    return msgid_db_path


@pytest.fixture
def store(msgid_store: LmdbMsgIdStore) -> LmdbMsgIdStore:
    return msgid_store


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests of the public API run on every runtime backend; those that read LMDB's tables
    (``store``, ``db_path``) or its sweeps are LMDB's own."""
    if "msgids" not in metafunc.fixturenames:
        return
    lmdb_only = ({"store", "db_path"} & set(metafunc.fixturenames)
                 or "sweep" in metafunc.function.__name__)
    metafunc.parametrize("msgid_backend", ["lmdb"] if lmdb_only else list(MSGID_BACKENDS),
                         indirect=True)


@pytest.fixture
def msgids(msgid_backend: str, request: pytest.FixtureRequest, clock: FakeClock) -> MsgIdMap:
    return msgid_map(msgid_backend, request, clock, TTL)  # type: ignore[return-value]


def rewind(msgids: MessageIds) -> None:
    """Allocation goes on from position 0 again (id 1 next, if no live record holds it):
    msgid-map.db's counter, or the Redis map's own position (its blocks are in memory)."""
    if isinstance(msgids, MsgIdMap):
        msgids.store.write_sync(lambda view: view.set_msg_counter(0))
    else:
        assert isinstance(msgids, RedisMsgIdMap)
        msgids._position = 0


def now_ms(clock: FakeClock) -> int:
    return int(clock() * 1000)


def expired_keys(store: LmdbMsgIdStore, at_ms: int) -> list[tuple[int, int]]:
    with store.read() as view:
        found: list[tuple[int, int]] = view.expired(at_ms, 1_000_000)
    return found


def events(logs: list[MutableMapping[str, Any]], name: str) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry["event"] == name]


# --- allocation, hits, TTL refresh --------------------------------------------------------


def test_new_real_ids_get_virtual_ids_1_2_3(msgids: MsgIdMap) -> None:
    assert [msgids.store_real_sync(f"real-{i}") for i in range(3)] == [1, 2, 3]
    assert run(msgids.store_real("real-3")) == 4
    assert [msgids.real_id_of(v) for v in (1, 2, 3, 4)] == [f"real-{i}" for i in range(4)]
    assert msgids.counts().counter == 4
    assert msgids.counts().live_or_unswept == 4


def test_lookup_returns_the_whole_record(msgids: MsgIdMap, clock: FakeClock) -> None:
    vid = msgids.store_real_sync("R1", GROUP)
    record = msgids.lookup(vid)
    assert record == MsgRecord(vid, "R1", APP, "group", "G1", "in",
                               now_ms(clock), now_ms(clock) + TTL_MS)
    assert msgids.virtual_of("R1") == vid


def test_same_real_id_again_returns_the_same_id_and_refreshes_its_ttl(
    msgids: MsgIdMap, store: LmdbMsgIdStore, clock: FakeClock
) -> None:
    first = msgids.store_real_sync("R1", GROUP)
    other = msgids.store_real_sync("R2", GROUP)
    clock.advance(TTL * 0.75)
    assert msgids.store_real_sync("R1", GROUP) == first
    refreshed_at = now_ms(clock)
    clock.advance(TTL * 0.5)  # past R1's original expiry, inside the refreshed one
    assert msgids.real_id_of(first) == "R1"
    assert msgids.virtual_of("R1") == first
    assert msgids.lookup(first).expires_ms == refreshed_at + TTL_MS  # type: ignore[union-attr]
    assert msgids.lookup(other) is None  # not refreshed: gone
    # the old expiry key went with the refresh: one key per record, no orphan left behind
    with store.read() as view:
        assert view.expired(refreshed_at + TTL_MS, 100) == [
            (refreshed_at - int(TTL * 0.75 * 1000) + TTL_MS, other),
            (refreshed_at + TTL_MS, first),
        ]
    assert msgids.counts().counter == 2  # a hit allocates nothing


def test_one_real_id_of_two_bots_is_two_messages_each_with_its_bot(
        msgids: MsgIdMap) -> None:
    """Rule 10: two bots of one daemon given one platform message id each have their own
    virtual id and chat; each one's store again is its own hit."""
    bot_a = MsgContext("102000001", "group", "G1", "in")
    bot_b = MsgContext("102000002", "group", "G1", "in")
    first = msgids.store_real_sync("R1", bot_a)
    second = msgids.store_real_sync("R1", bot_b)
    assert first != second
    assert msgids.lookup(first).app_id == "102000001"  # type: ignore[union-attr]
    assert msgids.lookup(second).app_id == "102000002"  # type: ignore[union-attr]
    assert msgids.virtual_of("R1") == second  # the index names the newest
    assert msgids.store_real_sync("R1", bot_b) == second
    assert msgids.store_real_sync("R1", MsgContext()) == second  # no AppID: whichever
    assert msgids.counts().counter == 2


def test_a_hit_with_the_async_api_refreshes_too(msgids: MsgIdMap, clock: FakeClock) -> None:
    vid = run(msgids.store_real("R1"))
    clock.advance(TTL - 1)
    assert run(msgids.store_real("R1")) == vid
    clock.advance(TTL - 1)
    assert msgids.real_id_of(vid) == "R1"


def test_concurrent_stores_sharing_one_commit_agree(msgids: MsgIdMap) -> None:
    async def many() -> list[int]:
        reals = [f"R{i % 5}" for i in range(40)]
        return list(await asyncio.gather(*(msgids.store_real(r) for r in reals)))

    got = run(many())
    by_real: dict[str, set[int]] = {}
    for i, vid in enumerate(got):
        by_real.setdefault(f"R{i % 5}", set()).add(vid)
    assert all(len(v) == 1 for v in by_real.values())
    assert sorted(v for vids in by_real.values() for v in vids) == [1, 2, 3, 4, 5]


def test_a_store_alone_is_committed_when_it_returns_and_agrees_with_the_batch(
        msgids: MsgIdMap, store: LmdbMsgIdStore) -> None:
    async def mixed() -> tuple[int, list[int], int, bool]:
        batched = [asyncio.ensure_future(msgids.store_real(f"B{i}")) for i in range(3)]
        await asyncio.sleep(0)  # they run up to their wait: this turn's batch is pending
        alone = await msgids.store_real("A1", GROUP, alone=True)
        assert not any(task.done() for task in batched)  # the batch is not written yet
        # committed already: a fresh snapshot sees it before the turn's batch is written
        with store.read() as view:
            seen_now = view.virtual_of("A1") == alone
        again = await msgids.store_real("A1", GROUP, alone=True)  # a hit: same id
        return alone, list(await asyncio.gather(*batched)), again, seen_now

    alone, batched, again, seen_now = run(mixed())
    assert seen_now and again == alone
    assert sorted([alone, *batched]) == [1, 2, 3, 4]  # one counter: no id given twice
    assert msgids.real_id_of(alone) == "A1"
    assert [msgids.real_id_of(v) for v in batched] == ["B0", "B1", "B2"]


# --- logs ---------------------------------------------------------------------------------


def test_create_hit_and_lookup_are_logged(store: LmdbMsgIdStore, clock: FakeClock) -> None:
    with capture_logs() as logs:
        msgids = MsgIdMap(store, clock=clock, ttl_seconds=TTL)
        vid = msgids.store_real_sync("R1", GROUP)
        again = run(msgids.store_real("R1", GROUP))
        msgids.lookup(vid)
        msgids.lookup(vid + 1)
    assert again == vid
    [create] = events(logs, "[idmap] msg_id create")
    assert (create["real_id"], create["virtual_id"], create["log_level"]) == ("R1", vid, "debug")
    [hit] = events(logs, "[idmap] msg_id hit")
    assert (hit["real_id"], hit["virtual_id"]) == ("R1", vid)
    found, missing = events(logs, "[idmap] msg_id lookup")
    assert (found["virtual_id"], found["real_id"]) == (vid, "R1")
    assert (missing["virtual_id"], missing["real_id"]) == (vid + 1, None)


def test_sweep_is_logged_with_its_count(store: LmdbMsgIdStore, clock: FakeClock) -> None:
    with capture_logs() as logs:
        msgids = MsgIdMap(store, clock=clock, ttl_seconds=TTL)
        for i in range(3):
            msgids.store_real_sync(f"R{i}")
        clock.advance(TTL)
        assert run(msgids.sweep()) == 3
        assert run(msgids.sweep()) == 0
    deleted, nothing = events(logs, "[idmap] msg_id sweep")
    assert (deleted["swept"], deleted["log_level"]) == (3, "info")
    # the sweep that found nothing runs every minute of an idle day: a debug line
    assert (nothing["swept"], nothing["log_level"]) == (0, "debug")


# --- expiry -------------------------------------------------------------------------------


def test_expired_records_are_invisible_before_any_sweep(
    msgids: MsgIdMap, clock: FakeClock
) -> None:
    vid = msgids.store_real_sync("R1", GROUP)
    clock.advance(TTL - 0.001)
    assert msgids.lookup(vid) is not None  # one millisecond left
    clock.advance(0.001)  # expires_ms == now: expired
    assert msgids.lookup(vid) is None
    assert msgids.virtual_of("R1") is None
    with pytest.raises(NotFoundError, match=str(vid)):
        msgids.real_id_of(vid)
    assert msgids.latest_inbound(APP, "group", "G1", 10 * TTL) is None
    assert msgids.counts().live_or_unswept == 1  # still on disk: nobody swept


def test_newest_inbound_is_when_a_chat_last_spoke_while_the_map_knows(
    msgids: MsgIdMap, clock: FakeClock
) -> None:
    """Over its messages and its events, inbound only, ordered within one millisecond by
    virtual id; gone once expired."""
    kinds = ("group", "group-event")
    assert msgids.newest_inbound(APP, kinds, "G1") is None
    first = msgids.store_real_sync("R1", GROUP)
    started = now_ms(clock)
    [event, message] = run(msgids.store_many([("E1", MsgContext(APP, "group-event", "G1")),
                                              ("R2", GROUP)]))
    assert msgids.newest_inbound(APP, kinds, "G1") == (started, message) and message > first
    assert msgids.newest_inbound(APP, ("group-event",), "G1") == (started, event)
    clock.advance(1)
    msgids.store_real_sync("S1", OUT)  # what the bot sent is not the chat speaking
    msgids.store_real_sync("R3", OTHER_GROUP)
    assert msgids.newest_inbound(APP, kinds, "G1") == (started, message)
    assert msgids.newest_inbound("102000002", kinds, "G1") is None
    clock.advance(TTL)
    assert msgids.newest_inbound(APP, kinds, "G1") is None


def test_storing_an_expired_real_id_gives_a_fresh_virtual_id(
    msgids: MsgIdMap, store: LmdbMsgIdStore, clock: FakeClock
) -> None:
    old = msgids.store_real_sync("R1", GROUP)
    clock.advance(TTL + 1)
    new = msgids.store_real_sync("R1", GROUP)
    assert new != old
    assert msgids.lookup(old) is None
    assert msgids.real_id_of(new) == "R1"
    with store.read() as view:
        assert view.record(old) is None  # the old triple was purged, not left for the sweep
        assert view.virtual_of("R1") == new
        assert view.counts().live_or_unswept == 1
    assert expired_keys(store, now_ms(clock) + TTL_MS) == [(now_ms(clock) + TTL_MS, new)]


def test_sweep_deletes_exactly_the_expired_triples(
    store: LmdbMsgIdStore, clock: FakeClock
) -> None:
    msgids = MsgIdMap(store, clock=clock, ttl_seconds=TTL)
    doomed = {f"old{i}": msgids.store_real_sync(f"old{i}", GROUP) for i in range(4)}
    refreshed = msgids.store_real_sync("refreshed", GROUP)
    clock.advance(TTL / 2)
    kept = {f"new{i}": msgids.store_real_sync(f"new{i}", OUT) for i in range(3)}
    assert msgids.store_real_sync("refreshed", GROUP) == refreshed
    kept["refreshed"] = refreshed
    clock.advance(TTL / 2)  # exactly the expiry of the first batch

    swept = run(msgids.sweep())

    assert swept == len(doomed)
    now = now_ms(clock)
    with store.read() as view:
        for real, vid in doomed.items():
            assert view.virtual_of(real) is None
            assert view.record(vid) is None
        for real, vid in kept.items():
            assert view.virtual_of(real) == vid
            record = view.record(vid)
            assert record is not None and record.real_id == real and record.expires_ms > now
        assert view.expired(now, 1_000) == []
        assert len(view.expired(now + TTL_MS, 1_000)) == len(kept)
        assert view.counts().live_or_unswept == len(kept)
        # the swept inbound ones left chat_recent too; the refreshed one is still there
        latest = view.latest_inbound(APP, "group", "G1", now, 0)
        assert latest is not None and latest.virtual_id == refreshed
    assert run(msgids.sweep()) == 0


def test_sweep_sync_does_the_same(msgids: MsgIdMap, clock: FakeClock) -> None:
    msgids.store_real_sync("R1")
    clock.advance(TTL / 2)
    live = msgids.store_real_sync("R2")
    clock.advance(TTL / 2)
    assert msgids.sweep_sync() == 1
    assert msgids.counts().live_or_unswept == 1
    assert msgids.real_id_of(live) == "R2"


def test_a_sweep_larger_than_one_batch_takes_everything(
    msgids: MsgIdMap, store: LmdbMsgIdStore, clock: FakeClock
) -> None:
    from gensokyo_idmap.runtime import msgid as msgid_module

    batch = msgid_module._SWEEP_BATCH

    def fill(view: Any) -> None:  # bulk-load through the store's own writer view
        for vid in range(1, batch + 6):
            view.put_record(MsgRecord(vid, f"bulk{vid}", APP, "group", "G1", "in",
                                      now_ms(clock), now_ms(clock) + vid))
        view.set_msg_counter(batch + 5)

    store.write_sync(fill)
    clock.advance(TTL)
    assert run(msgids.sweep()) == batch + 5
    assert msgids.counts().live_or_unswept == 0


def test_a_sweep_deletes_in_small_transactions(
    msgids: MsgIdMap, store: LmdbMsgIdStore, clock: FakeClock
) -> None:
    """LMDB keeps the pages its largest transaction dirtied for the life of the environment
    (module note on ``_SWEEP_BATCH``): the sweep of a flood's messages must not be one
    transaction, nor a few large ones."""
    def fill(view: Any) -> None:
        for vid in range(1, 301):
            view.put_record(MsgRecord(vid, f"flood{vid}", APP, "group", f"G{vid}", "in",
                                      now_ms(clock), now_ms(clock) + 1000))
        view.set_msg_counter(300)

    store.write_sync(fill)
    clock.advance(TTL)
    deleted: list[int] = []
    write_sync = store.write_sync

    def counted(fn: Any) -> Any:
        done = write_sync(fn)
        if isinstance(done, int):
            deleted.append(done)
        return done

    store.write_sync = counted  # type: ignore[method-assign]
    assert msgids.sweep_sync() == 300
    assert sum(deleted) == 300
    assert max(deleted) <= 128


# --- authors and content (get_msg) -------------------------------------------------------


def test_the_author_and_content_are_kept_beside_the_record(msgids: MsgIdMap,
                                                           clock: FakeClock) -> None:
    said = GROUP.about(42, "hi [CQ:at,qq=7] &#91;x&#93;")
    vid = msgids.store_real_sync("R1", said)
    found = msgids.lookup_content(vid)
    assert found == (MsgRecord(vid, "R1", APP, "group", "G1", "in", now_ms(clock),
                               now_ms(clock) + TTL_MS),
                     MsgContent(42, "hi [CQ:at,qq=7] &#91;x&#93;"))
    assert msgids.lookup(vid) == found[0]  # type: ignore[index]
    # the chat's context itself stays without them: it is reused for every message
    assert (GROUP.author, GROUP.message) == (0, None)
    assert msgids.lookup_content(msgids.store_real_sync("R2", GROUP))[1] is None  # type: ignore[index]


def test_a_hit_keeps_the_first_content_and_it_expires_with_the_record(
        msgids: MsgIdMap, clock: FakeClock) -> None:
    vid = msgids.store_real_sync("R1", GROUP.about(42, "first"))
    clock.advance(TTL * 0.75)
    assert run(msgids.store_many([("R1", GROUP.about(43, "again"))])) == [vid]
    clock.advance(TTL * 0.5)  # past the first expiry, inside the refreshed one
    assert msgids.lookup_content(vid)[1] == MsgContent(42, "first")  # type: ignore[index]
    clock.advance(TTL)
    assert msgids.lookup_content(vid) is None


def test_an_id_handed_out_again_does_not_carry_the_content_of_its_earlier_holder(
        msgids: MsgIdMap, clock: FakeClock) -> None:
    assert msgids.store_real_sync("old", GROUP.about(42, "secret")) == 1
    clock.advance(TTL + 1)  # expired, not swept
    rewind(msgids)
    assert msgids.store_real_sync("new", OUT) == 1
    assert msgids.lookup_content(1) == (msgids.lookup(1), None)
    assert msgids.store_real_sync("new2", OUT.about(9, "mine")) == 2
    assert msgids.lookup_content(2)[1] == MsgContent(9, "mine")  # type: ignore[index]


@pytest.mark.parametrize("msgid_backend", list(MSGID_BACKENDS), indirect=True)
def test_keep_content_off_keeps_the_author_and_no_text(
        msgid_backend: str, request: pytest.FixtureRequest, clock: FakeClock) -> None:
    msgids = msgid_map(msgid_backend, request, clock, TTL, keep_content=False)
    vid = msgids.store_real_sync("R1", GROUP.about(42, "private words"))
    [other] = run(msgids.store_many([("R2", OUT.about(7, "mine too"))]))
    assert msgids.lookup_content(vid)[1] == MsgContent(42, None)  # type: ignore[index]
    assert msgids.lookup_content(other)[1] == MsgContent(7, None)  # type: ignore[index]


def test_the_sweep_deletes_the_content_with_the_record(
        msgids: MsgIdMap, store: LmdbMsgIdStore, clock: FakeClock) -> None:
    vid = msgids.store_real_sync("R1", GROUP.about(42, "hi"))
    clock.advance(TTL + 1)
    assert msgids.sweep_sync() == 1
    with store.read() as view:
        assert view.content(vid) is None


@pytest.mark.parametrize(("author", "message", "field"), [
    (-1, None, "author"), (True, None, "author"), ("42", None, "author"),
    (1, "x" * 4097, "message"), (1, "é" * 2049, "message"), (1, "\ud800", "message"),
    (1, b"bytes", "message"),
])
def test_a_bad_author_or_content_is_refused_naming_it(author: Any, message: Any,
                                                      field: str) -> None:
    with pytest.raises(BadInputError) as err:
        GROUP.about(author, message)
    assert err.value.field == field


def test_content_of_exactly_the_bound_is_kept(msgids: MsgIdMap) -> None:
    text = "é" * (MAX_CONTENT_BYTES // 2)
    vid = msgids.store_real_sync("R1", GROUP.about(1, text))
    assert msgids.lookup_content(vid)[1] == MsgContent(1, text)  # type: ignore[index]


def test_a_record_written_before_content_was_kept_answers_without_it(
        msgids: MsgIdMap, clock: FakeClock, request: pytest.FixtureRequest) -> None:
    """What an older daemon wrote (LMDB: no msg_content entry; Redis: no u / m fields)."""
    record = MsgRecord(5, "OLD", APP, "group", "G1", "in", now_ms(clock), now_ms(clock) + TTL_MS)
    if isinstance(msgids, MsgIdMap):
        msgids.store.write_sync(lambda view: view.put_record(record))
    else:
        runtime = request.getfixturevalue("redis_runtime")
        runtime.sync.hset(runtime.prefix + "m:v:5", mapping={
            "r": "OLD", "a": APP, "k": "group", "t": "G1", "d": "in",
            "c": record.created_ms, "e": record.expires_ms})
    assert msgids.lookup_content(5) == (record, None)


# --- quotes: a message found by its chat and msg_idx (rule 8) ----------------------------


def test_a_message_is_found_by_its_chat_and_msg_idx_while_it_lives(
        msgids: MsgIdMap, clock: FakeClock) -> None:
    vid = msgids.store_real_sync("R1", GROUP.about(42, "hi", "REFIDX_1"))
    other = msgids.store_real_sync("R2", OTHER_GROUP.about(43, "yo", "REFIDX_1"))
    assert msgids.quoted(APP, "group", "G1", "REFIDX_1") == vid
    assert msgids.quoted(APP, "group", "G2", "REFIDX_1") == other  # per chat
    assert msgids.quoted(APP, "c2c", "G1", "REFIDX_1") is None
    assert msgids.quoted("102000002", "group", "G1", "REFIDX_1") is None  # per AppID
    assert msgids.quoted(APP, "group", "G1", "REFIDX_2") is None
    # the alias is no second message: the record and its real id are as before
    assert msgids.lookup_content(vid) == (
        MsgRecord(vid, "R1", APP, "group", "G1", "in", now_ms(clock),
                  now_ms(clock) + TTL_MS),
        MsgContent(42, "hi", f"\0idx\0{APP}\0group\0G1\0REFIDX_1"))
    assert msgids.virtual_of("R1") == vid
    clock.advance(TTL * 0.75)
    assert msgids.store_real_sync("R1", GROUP.about(42, "hi", "REFIDX_1")) == vid  # a hit
    clock.advance(TTL * 0.5)  # past the first expiry: the hit refreshed the alias too
    assert msgids.quoted(APP, "group", "G1", "REFIDX_1") == vid
    clock.advance(TTL)
    assert msgids.quoted(APP, "group", "G1", "REFIDX_1") is None


def test_an_id_handed_out_again_is_not_found_by_its_earlier_holders_msg_idx(
        msgids: MsgIdMap, clock: FakeClock) -> None:
    assert msgids.store_real_sync("old", GROUP.about(42, "quoted", "REFIDX_old")) == 1
    clock.advance(TTL + 1)  # expired, not swept
    rewind(msgids)
    assert msgids.store_real_sync("new", GROUP.about(7, "other")) == 1
    assert msgids.quoted(APP, "group", "G1", "REFIDX_old") is None


@pytest.mark.parametrize("msgid_backend", list(MSGID_BACKENDS), indirect=True)
def test_keep_content_off_still_finds_a_quoted_message(
        msgid_backend: str, request: pytest.FixtureRequest, clock: FakeClock) -> None:
    msgids = msgid_map(msgid_backend, request, clock, TTL, keep_content=False)
    vid = msgids.store_real_sync("R1", GROUP.about(0, "private words", "REFIDX_1"))
    assert msgids.quoted(APP, "group", "G1", "REFIDX_1") == vid
    assert msgids.lookup_content(vid)[1].message is None  # type: ignore[index]


def test_the_sweep_and_a_purge_delete_the_alias_with_the_record(
        msgids: MsgIdMap, store: LmdbMsgIdStore, clock: FakeClock) -> None:
    alias = f"\0idx\0{APP}\0group\0G1\0REFIDX_1".encode()
    msgids.store_real_sync("R1", GROUP.about(42, "hi", "REFIDX_1"))
    clock.advance(TTL + 1)
    assert msgids.sweep_sync() == 1
    with store.read() as view:
        assert view._txn.get(alias, db=view._t.msg_to_virtual) is None
    msgids.store_real_sync("R2", GROUP.about(42, "hi", "REFIDX_1"))
    clock.advance(TTL + 1)
    set_counter(store, 1)  # the next store purges the expired record in its way
    assert msgids.store_real_sync("R3", GROUP) == 2
    with store.read() as view:
        assert view._txn.get(alias, db=view._t.msg_to_virtual) is None


@pytest.mark.parametrize("msg_idx", ["", "x" * 400, "\ud800"])
def test_a_msg_idx_that_cannot_be_a_key_is_not_kept_and_finds_nothing(
        msgids: MsgIdMap, msg_idx: str) -> None:
    vid = msgids.store_real_sync("R1", GROUP.about(42, "hi", msg_idx))
    assert msgids.lookup_content(vid)[1] == MsgContent(42, "hi")  # type: ignore[index]
    assert msgids.quoted(APP, "group", "G1", msg_idx) is None


# --- wrap-around at int32 -----------------------------------------------------------------


def set_counter(store: LmdbMsgIdStore, value: int) -> None:
    store.write_sync(lambda view: view.set_msg_counter(value))


def test_counter_wraps_from_int32_max_to_1(msgids: MsgIdMap, store: LmdbMsgIdStore) -> None:
    set_counter(store, INT32_MAX - 1)
    assert [msgids.store_real_sync(f"R{i}") for i in range(3)] == [INT32_MAX, 1, 2]
    assert msgids.real_id_of(INT32_MAX) == "R0"
    assert msgids.counts().counter == 2


def test_wrap_skips_live_ids_and_reuses_expired_unswept_ones(
    msgids: MsgIdMap, store: LmdbMsgIdStore, clock: FakeClock
) -> None:
    assert msgids.store_real_sync("alive", GROUP) == 1
    assert msgids.store_real_sync("stale", GROUP) == 2
    assert msgids.store_real_sync("alive3", GROUP) == 3
    clock.advance(TTL / 2)
    msgids.store_real_sync("alive", GROUP)  # refresh 1
    msgids.store_real_sync("alive3", GROUP)  # refresh 3
    clock.advance(TTL / 2 + 1)  # 2 expired (unswept); 1 and 3 alive
    set_counter(store, INT32_MAX - 1)

    got = [msgids.store_real_sync(f"N{i}") for i in range(3)]

    assert got == [INT32_MAX, 2, 4]
    assert msgids.real_id_of(1) == "alive"
    assert msgids.real_id_of(3) == "alive3"
    assert msgids.real_id_of(2) == "N1"
    assert msgids.virtual_of("stale") is None  # the old real id no longer maps to 2
    with store.read() as view:
        assert view.virtual_of("stale") is None
        assert view.expired(now_ms(clock), 100) == []  # stale's expiry key went too
        assert view.counts().live_or_unswept == 5
    # the stale record's chat_recent entry went with it: no old message answers for the chat
    latest = msgids.latest_inbound(APP, "group", "G1", 10 * TTL)
    assert latest is not None and latest.real_id in {"alive", "alive3"}


def test_store_many_keeps_the_order_and_agrees_with_itself(msgids: MsgIdMap) -> None:
    assert run(msgids.store_many([("x", GROUP), ("y", OTHER_GROUP), ("x", GROUP)])) == [1, 2, 1]
    assert msgids.real_id_of(2) == "y"
    assert run(msgids.store_many([])) == []


def test_store_many_raises_the_store_that_failed_and_keeps_the_others(
    msgids: MsgIdMap, store: LmdbMsgIdStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No free id for one real id: it writes nothing, the batch raises, the others stand."""
    assert [msgids.store_real_sync(r, GROUP) for r in ("a", "b")] == [1, 2]
    monkeypatch.setattr("gensokyo_idmap.runtime.msgid.MAX_PROBES", 2)
    set_counter(store, INT32_MAX)  # next candidates 1 and 2: both live
    with pytest.raises(StoreError, match="no free virtual message id"):
        run(msgids.store_many([("b", GROUP), ("new", GROUP)]))
    assert msgids.virtual_of("new") is None
    assert msgids.real_id_of(2) == "b"


# --- latest inbound -----------------------------------------------------------------------


def test_latest_inbound_is_the_newest_inbound_message_in_the_window(
    msgids: MsgIdMap, clock: FakeClock
) -> None:
    msgids.store_real_sync("in1", GROUP)
    clock.advance(1)
    newest = msgids.store_real_sync("in2", GROUP)
    clock.advance(1)
    msgids.store_real_sync("out1", OUT)  # sent by us: never a reply target
    msgids.store_real_sync("elsewhere", OTHER_GROUP)
    msgids.store_real_sync("other-app", MsgContext("999", "group", "G1", "in"))
    msgids.store_real_sync("other-kind", MsgContext(APP, "c2c", "G1", "in"))
    clock.advance(1)

    record = msgids.latest_inbound(APP, "group", "G1", 10)
    assert record is not None and (record.virtual_id, record.real_id) == (newest, "in2")
    other = msgids.latest_inbound(APP, "group", "G2", 10)
    assert other is not None and other.real_id == "elsewhere"
    assert msgids.latest_inbound(APP, "group", "nobody", 10) is None
    assert msgids.latest_inbound(APP, "group", "G", 10) is None  # a prefix is another chat


def test_latest_inbound_ignores_messages_outside_the_window(
    msgids: MsgIdMap, clock: FakeClock
) -> None:
    msgids.store_real_sync("in1", GROUP)
    clock.advance(30)
    assert msgids.latest_inbound(APP, "group", "G1", 31) is not None
    assert msgids.latest_inbound(APP, "group", "G1", 30) is not None  # the edge is inside
    assert msgids.latest_inbound(APP, "group", "G1", 29) is None


def test_latest_inbound_ignores_outbound_only_chats(msgids: MsgIdMap) -> None:
    msgids.store_real_sync("out1", OUT)
    assert msgids.latest_inbound(APP, "group", "G1", 10) is None


def test_latest_inbound_ignores_expired_messages(msgids: MsgIdMap, clock: FakeClock) -> None:
    msgids.store_real_sync("in1", GROUP)
    clock.advance(TTL)
    assert msgids.latest_inbound(APP, "group", "G1", 10 * TTL) is None


def test_latest_inbound_skips_an_expired_newest_message_for_a_live_older_one(
    msgids: MsgIdMap, clock: FakeClock
) -> None:
    # "in1" is older but its TTL was refreshed (a hit); "in2" is newer and has expired.
    # Expired entries are invisible even before the sweep, so the answer must be the same
    # before and after sweeping: "in1".
    older = msgids.store_real_sync("in1", GROUP)  # t = 0
    clock.advance(TTL * 0.5)
    msgids.store_real_sync("in2", GROUP)  # t = 0.5 TTL, expires at 1.5 TTL
    clock.advance(TTL * 0.4)
    assert msgids.store_real_sync("in1", GROUP) == older  # t = 0.9 TTL: alive until 1.9 TTL
    clock.advance(TTL * 0.7)  # t = 1.6 TTL: in2 expired (unswept), in1 alive
    assert msgids.lookup(older) is not None

    before_sweep = msgids.latest_inbound(APP, "group", "G1", 10 * TTL)
    msgids.sweep_sync()
    after_sweep = msgids.latest_inbound(APP, "group", "G1", 10 * TTL)

    assert after_sweep is not None and after_sweep.real_id == "in1"
    assert before_sweep == after_sweep


def walk(msgids: MsgIdMap, at: tuple[int, int] | None = None) -> str | None:
    """The real id a reply choice's walk of group G1 finds below ``at``."""
    with msgids.inbound_walk(APP, "group", "G1", 10 * TTL) as below:
        found = below(at)
    return None if found is None else found.real_id


def test_a_walk_sees_the_message_stored_since_the_last_walk(msgids: MsgIdMap) -> None:
    msgids.store_real_sync("in1", GROUP)
    assert walk(msgids) == "in1"
    run(msgids.store_real("in2", GROUP))  # the clock stands still: only the store tells
    msgids.store_real_sync("out1", OUT)
    assert walk(msgids) == "in2"
    msgids.store_real_sync("in3", OTHER_GROUP)
    assert walk(msgids) == "in2"


def test_a_walk_steps_over_the_answer_of_the_last_walk_once_it_expired(
    msgids: MsgIdMap, clock: FakeClock
) -> None:
    msgids.store_real_sync("in1", GROUP)  # t = 0
    clock.advance(1)
    msgids.store_real_sync("in2", GROUP)  # expires at TTL + 1
    clock.advance(1)
    msgids.store_real_sync("in1", GROUP)  # refreshed: expires at TTL + 2
    clock.advance(TTL - 1.5)
    assert walk(msgids) == "in2"
    clock.advance(0.6)  # in2 expired, within a second of the last walk
    assert walk(msgids) == "in1"


def test_a_walk_sees_what_another_writer_stored_within_a_second(
    store: LmdbMsgIdStore, clock: FakeClock
) -> None:
    msgids, other = MsgIdMap(store, clock=clock), MsgIdMap(store, clock=clock)
    msgids.store_real_sync("in1", GROUP)
    assert walk(msgids) == "in1"
    other.store_real_sync("in2", GROUP)  # e.g. ``msgid store`` in another process
    clock.advance(1)
    assert walk(msgids) == "in2"


def test_the_memory_chore_forgets_the_walks_past_their_second(
    store: LmdbMsgIdStore, clock: FakeClock
) -> None:
    """Rule 7's walks answer for a second: the memory chore drops those past it (chats no
    one sends to any more), and keeps the fresh ones, which still answer."""
    msgids = MsgIdMap(store, clock=clock)
    msgids.store_real_sync("in1", GROUP)
    msgids.store_real_sync("in2", OTHER_GROUP)
    assert walk(msgids) == "in1"
    clock.advance(0.6)
    with msgids.inbound_walk(APP, "group", OTHER_GROUP.target, 10 * TTL) as below:
        assert below(None) is not None
    [(_, walks)] = msgids.memory_tables()
    assert len(walks) == 2
    clock.advance(0.6)  # G1's walk is past its second, the other's is not
    walks.forget()
    assert list(walks) == [(APP, "group", OTHER_GROUP.target)]
    assert walks.footprint() > 0
    clock.advance(1)
    walks.forget()
    assert len(walks) == 0


# --- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize("real_id", ["", "x" * 401, "é" * 201, None, 42, b"bytes"])
def test_bad_real_id_is_rejected_and_nothing_is_written(
    msgids: MsgIdMap, store: LmdbMsgIdStore, real_id: Any
) -> None:
    msgids.store_real_sync("seed")
    before = (store.commit_stats, msgids.counts())
    with pytest.raises(BadInputError) as sync_err:
        msgids.store_real_sync(real_id)
    with pytest.raises(BadInputError) as async_err:
        run(msgids.store_real(real_id))
    with pytest.raises(BadInputError) as read_err:
        msgids.virtual_of(real_id)
    for err in (sync_err, async_err, read_err):
        assert err.value.field == "message_id"
        assert "message_id" in str(err.value)
    assert (store.commit_stats, msgids.counts()) == before


def test_real_id_of_exactly_400_bytes_is_fine(msgids: MsgIdMap) -> None:
    for real in ("x" * 400, "é" * 200):
        vid = msgids.store_real_sync(real)
        assert msgids.real_id_of(vid) == real


def test_real_id_that_is_not_encodable_is_bad_input(
    msgids: MsgIdMap, store: LmdbMsgIdStore
) -> None:
    # A lone surrogate survives json.loads("\"\\ud800\"") but has no UTF-8 form.
    before = (store.commit_stats, msgids.counts())
    with pytest.raises(BadInputError) as err:
        msgids.store_real_sync("\ud800")
    assert err.value.field == "message_id"
    assert (store.commit_stats, msgids.counts()) == before


def test_context_that_is_not_encodable_is_bad_input(
    msgids: MsgIdMap, store: LmdbMsgIdStore
) -> None:
    before = (store.commit_stats, msgids.counts())
    with pytest.raises(BadInputError) as err:
        msgids.store_real_sync("R1", MsgContext(APP, "group", "\udc80"))
    assert err.value.field == "target"
    assert msgids.counts() == before[1]


@pytest.mark.parametrize("vid", [0, -1, 2**31, "abc", True, False, "", " ", "+5", "1e3", None,
                                 1.5])
def test_bad_virtual_id_is_rejected_naming_the_field(msgids: MsgIdMap, vid: Any) -> None:
    msgids.store_real_sync("seed")
    with pytest.raises(BadInputError) as err:
        msgids.lookup(vid)
    assert err.value.field == "message_id"
    assert "message_id" in str(err.value)
    with pytest.raises(BadInputError):
        msgids.real_id_of(vid)
    with pytest.raises(BadInputError) as named:
        check_virtual_id(vid, "rowid")
    assert named.value.field == "rowid"


@pytest.mark.parametrize(("value", "expected"), [(1, 1), ("7", 7), (INT32_MAX, INT32_MAX),
                                                 (str(INT32_MAX), INT32_MAX)])
def test_good_virtual_ids_pass(value: Any, expected: int) -> None:
    assert check_virtual_id(value) == expected


def test_bad_direction_is_rejected() -> None:
    with pytest.raises(BadInputError) as err:
        MsgContext(APP, "group", "G1", "x")  # type: ignore[arg-type]
    assert err.value.field == "direction"


@pytest.mark.parametrize("field", ["app_id", "chat_kind", "target"])
def test_nul_or_overlong_context_is_rejected(field: str) -> None:
    for bad in ("a\0b", "x" * 129):
        with pytest.raises(BadInputError) as err:
            MsgContext(**{field: bad})
        assert err.value.field == field


def test_bad_context_writes_nothing(msgids: MsgIdMap, store: LmdbMsgIdStore) -> None:
    msgids.store_real_sync("seed")
    before = (store.commit_stats, msgids.counts())
    with pytest.raises(BadInputError):
        msgids.store_real_sync("R1", MsgContext(APP, "group", "G\0"))
    with pytest.raises(BadInputError):
        msgids.store_real_sync("R1", MsgContext(APP, "group", "G1", "x"))  # type: ignore[arg-type]
    assert (store.commit_stats, msgids.counts()) == before
    assert msgids.virtual_of("R1") is None


def test_ttl_must_be_positive(store: LmdbMsgIdStore) -> None:
    for ttl in (0, -1):
        with pytest.raises(BadInputError) as err:
            MsgIdMap(store, ttl_seconds=ttl)
        assert err.value.field == "msgid_ttl_seconds"


# --- reopen -------------------------------------------------------------------------------


def test_reopen_keeps_mappings_and_the_counter(db_path: Path, clock: FakeClock) -> None:
    store = LmdbMsgIdStore(db_path)
    msgids = MsgIdMap(store, clock=clock, ttl_seconds=TTL)
    ids = {f"R{i}": msgids.store_real_sync(f"R{i}", GROUP) for i in range(3)}
    set_counter(store, 1000)
    store.close()

    store = LmdbMsgIdStore(db_path)
    try:
        msgids = MsgIdMap(store, clock=clock, ttl_seconds=TTL)
        assert {real: msgids.virtual_of(real) for real in ids} == ids
        assert all(msgids.real_id_of(vid) == real for real, vid in ids.items())
        assert msgids.counts().counter == 1000
        assert msgids.store_real_sync("R0") == ids["R0"]  # still a hit
        assert msgids.store_real_sync("next") == 1001
    finally:
        store.close()


# --- the sweeper task ---------------------------------------------------------------------


def test_run_sweeper_removes_expired_entries_and_stops_when_told(
    store: LmdbMsgIdStore, clock: FakeClock
) -> None:
    async def main() -> None:
        sweeps: asyncio.Queue[int] = asyncio.Queue()

        def watch(
            _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
        ) -> MutableMapping[str, Any]:
            if event_dict["event"] == "[idmap] msg_id sweep":
                sweeps.put_nowait(event_dict["swept"])
            return event_dict

        with capture_logs(processors=[watch]):
            msgids = MsgIdMap(store, clock=clock, ttl_seconds=TTL)
            for i in range(5):
                await msgids.store_real(f"R{i}")
            stop = asyncio.Event()
            task = asyncio.create_task(msgids.run_sweeper(stop, interval_seconds=0.01))
            try:
                # a sweep while nothing has expired removes nothing
                assert await asyncio.wait_for(sweeps.get(), timeout=5) == 0
                assert msgids.counts().live_or_unswept == 5
                clock.advance(TTL + 1)
                while await asyncio.wait_for(sweeps.get(), timeout=5) == 0:
                    pass
                assert msgids.counts().live_or_unswept == 0
                stop.set()
                await asyncio.wait_for(task, timeout=1)
            finally:
                stop.set()
                if not task.done():
                    task.cancel()

    run(main())


def test_run_sweeper_wakes_up_at_once_when_stopped(
    msgids: MsgIdMap,
) -> None:
    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(msgids.run_sweeper(stop, interval_seconds=3600))
        await asyncio.sleep(0)  # let it start waiting (one loop turn, no time passes)
        assert not task.done()
        stop.set()
        await asyncio.wait_for(task, timeout=1)

    run(main())


def test_run_sweeper_returns_at_once_if_already_stopped(msgids: MsgIdMap) -> None:
    async def main() -> None:
        stop = asyncio.Event()
        stop.set()
        await asyncio.wait_for(msgids.run_sweeper(stop, interval_seconds=3600), timeout=1)

    run(main())


def test_the_sweep_also_deletes_expired_delivery_claims(store: LmdbMsgIdStore,
                                                        clock: FakeClock) -> None:
    """The de-duplication claims (``runtime.claims``) live in this store; its sweeper clears them."""
    msgids = MsgIdMap(store, clock=clock, ttl_seconds=TTL)
    old = [f"msg:old{i}" for i in range(2_500)]  # more than one sweep batch
    store.write_sync(lambda view: view.put_claims(old, now_ms(clock) + 10_000))
    clock.advance(5)
    store.write_sync(lambda view: view.put_claims(["msg:new"], now_ms(clock) + 10_000))
    clock.advance(5)  # the old ones' window is over, the new one's is not
    with capture_logs() as logs:
        assert run(msgids.sweep()) == 0  # no message ids
    assert [e["claims_swept"] for e in logs if e["event"] == "[idmap] msg_id sweep"] == [2_500]
    with store.read() as view:
        assert view.expired_claims(now_ms(clock) + 10_000, 10) == [
            (now_ms(clock) + 5_000, "msg:new")]


# --- the recent messages, a page at a time (the console's list) ------------------------------


def test_recent_lists_live_messages_newest_first_a_page_at_a_time(
        msgids: MsgIdMap, clock: FakeClock) -> None:
    for n in range(5):
        msgids.store_real_sync(f"R{n}", (GROUP if n % 2 else OUT).about(40 + n, f"text {n}"))
        clock.advance(1)
    msgids.store_real_sync("R9", OTHER_GROUP)  # nothing known of it: no content
    page = msgids.recent(None, 3)
    assert [record.real_id for record, _ in page] == ["R9", "R4", "R3"]
    assert page[0][1] is None
    assert page[1][1] == MsgContent(44, "text 4")
    assert (page[1][0].direction, page[2][0].direction) == ("out", "in")
    at = (page[-1][0].created_ms, page[-1][0].virtual_id)
    assert [record.real_id for record, _ in msgids.recent(at, 3)] == ["R2", "R1", "R0"]
    assert msgids.store_real_sync("R1", GROUP) == page[-1][0].virtual_id - 2  # a hit
    assert [record.real_id for record, _ in msgids.recent(None, 10)] == [
        "R9", "R4", "R3", "R2", "R1", "R0"]  # a hit keeps its place (created when first seen)
    clock.advance(TTL - 3.5)  # R0, R1 (created first) expire; R1's hit kept it alive
    assert [record.real_id for record, _ in msgids.recent(None, 10)] == [
        "R9", "R4", "R3", "R2", "R1"]


def test_recent_steps_over_records_whose_id_was_handed_on(msgids: MsgIdMap,
                                                          clock: FakeClock) -> None:
    """An expired record's id handed to a new message: the list names the new one once,
    at its own time, not the old one at the old time."""
    first = msgids.store_real_sync("old", GROUP)
    clock.advance(TTL + 1)
    rewind(msgids)
    assert msgids.store_real_sync("new", GROUP) == first
    listed = msgids.recent(None, 10)
    assert [(record.real_id, record.virtual_id) for record, _ in listed] == [("new", first)]
