"""msgid-map.db on LMDB: its own file, its tables, an expiry index, recovery from damage."""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from pathlib import Path

import lmdb
from structlog.testing import capture_logs

from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.runtime.msgid import MsgContext, MsgIdMap
from gensokyo_idmap.runtime.base import MsgContent, MsgIdWriter
from gensokyo_idmap.store.lmdb.codec import decode_value, encode_u64, encode_value
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import (
    MSGID_SCHEMA_VERSION,
    LmdbMsgIdStore,
    open_msgid_store,
)

from ..conftest import FakeClock

TTL = 100.0
APP = "102000001"
MSGID_TABLES = {b"meta", b"msg_to_virtual", b"virtual_to_msg", b"expires_at", b"chat_recent",
                b"claims", b"claims_expiry", b"msg_content", b"recent"}
IDENTITY_ONLY_TABLES = {b"identity_to_vuin", b"vuin_to_identity", b"last_seen"}
ALICE = OpenId(APP, "A11CE000000000000000000000000000")
MOVED_ASIDE = "[idmap] msgid-map.db unreadable, moved aside"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def raw_env(path: Path) -> lmdb.Environment:
    return lmdb.open(str(path), subdir=False, max_dbs=16, readonly=True, lock=False)


def table_names(path: Path) -> set[bytes]:
    env = raw_env(path)
    try:
        with env.begin() as txn:
            return {key for key, _ in txn.cursor()}
    finally:
        env.close()


def aside_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("msgid-map.db.corrupt-*"))


def stamp(clock: FakeClock) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(clock()))


def fill(path: Path, clock: FakeClock, count: int = 50) -> None:
    store = LmdbMsgIdStore(path)
    try:
        msgids = MsgIdMap(store, clock=clock, ttl_seconds=TTL)
        for i in range(count):
            msgids.store_real_sync(f"real-{i}", MsgContext(APP, "group", "G1", "in"))
    finally:
        store.close()


def make_identity_store(directory: Path, clock: FakeClock) -> Path:
    path = directory / "openid-map.db"
    store = LmdbIdentityStore(path)
    try:
        vuin = asyncio.run(IdentityGraph(store, clock=clock).resolve([ALICE])).vuin
        assert vuin == 1
    finally:
        store.close()
    return path


def assert_identity_still_there(path: Path, clock: FakeClock) -> None:
    store = LmdbIdentityStore(path)
    try:
        assert IdentityGraph(store, clock=clock).lookup(ALICE) == 1
    finally:
        store.close()


def assert_working_empty_store(store: LmdbMsgIdStore, clock: FakeClock) -> None:
    msgids = MsgIdMap(store, clock=clock, ttl_seconds=TTL)
    assert msgids.counts().live_or_unswept == 0
    assert msgids.counts().counter == 0
    assert msgids.virtual_of("real-0") is None
    vid = msgids.store_real_sync("fresh")
    assert vid == 1
    assert msgids.real_id_of(vid) == "fresh"


# --- files and tables ---------------------------------------------------------------------


def test_msgid_and_identity_stores_are_separate_files(tmp_path: Path, clock: FakeClock) -> None:
    identity_path = make_identity_store(tmp_path, clock)
    before = sha(identity_path)
    msgid_path = tmp_path / "msgid-map.db"
    fill(msgid_path, clock)

    assert msgid_path.is_file() and identity_path.is_file()
    assert not msgid_path.samefile(identity_path)
    assert sha(identity_path) == before  # message ids never touch the precious file
    assert MSGID_TABLES <= table_names(msgid_path)
    assert not (IDENTITY_ONLY_TABLES & table_names(msgid_path))
    assert not ({b"msg_to_virtual", b"virtual_to_msg", b"expires_at", b"chat_recent"}
                & table_names(identity_path))


def test_new_file_has_every_table_and_the_schema_version(
    tmp_path: Path, clock: FakeClock
) -> None:
    path = tmp_path / "msgid-map.db"
    LmdbMsgIdStore(path).close()
    assert MSGID_TABLES <= table_names(path)
    env = raw_env(path)
    try:
        with env.begin() as txn:
            meta = env.open_db(b"meta", txn=txn, create=False)
            raw = txn.get(b"schema_version", db=meta)
            assert raw is not None and decode_value(raw) == MSGID_SCHEMA_VERSION
    finally:
        env.close()


def test_key_layout_sorts_by_number_and_time(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "msgid-map.db"
    store = LmdbMsgIdStore(path)
    msgids = MsgIdMap(store, clock=clock, ttl_seconds=TTL)
    vid = msgids.store_real_sync("R1", MsgContext(APP, "group", "G1", "in"))
    msgids.store_real_sync("R2", MsgContext(APP, "group", "G1", "out"))
    created = int(clock() * 1000)
    store.close()

    env = raw_env(path)
    try:
        with env.begin() as txn:
            def table(name: bytes) -> list[tuple[bytes, bytes]]:
                return list(txn.cursor(env.open_db(name, txn=txn, create=False)))

            assert table(b"msg_to_virtual") == [(b"R1", vid.to_bytes(4, "big")),
                                                 (b"R2", (vid + 1).to_bytes(4, "big"))]
            keys = [key for key, _ in table(b"virtual_to_msg")]
            assert keys == [vid.to_bytes(4, "big"), (vid + 1).to_bytes(4, "big")]
            assert decode_value(table(b"virtual_to_msg")[0][1]) == [
                "R1", APP, "group", "G1", "in", created, created + int(TTL * 1000)]
            expiry = encode_u64(created + int(TTL * 1000))
            assert [key for key, _ in table(b"expires_at")] == [
                expiry + vid.to_bytes(4, "big"), expiry + (vid + 1).to_bytes(4, "big")]
            # only the inbound message is a reply target
            assert [key for key, _ in table(b"chat_recent")] == [
                f"{APP}\0group\0G1\0".encode() + encode_u64(created) + vid.to_bytes(4, "big")]
            meta = env.open_db(b"meta", txn=txn, create=False)
            raw = txn.get(b"msg_counter", db=meta)
            assert raw is not None and decode_value(raw) == vid + 1
    finally:
        env.close()


# --- the expiry index ---------------------------------------------------------------------


def test_expired_reads_only_what_expired(tmp_path: Path, clock: FakeClock) -> None:
    store = LmdbMsgIdStore(tmp_path / "msgid-map.db")
    try:
        msgids = MsgIdMap(store, clock=clock, ttl_seconds=TTL)

        async def load() -> tuple[list[int], list[int]]:
            old = list(await asyncio.gather(*(msgids.store_real(f"old{i}") for i in range(10))))
            clock.advance(TTL / 2)
            new = list(await asyncio.gather(*(msgids.store_real(f"new{i}") for i in range(1000))))
            return old, new

        old, new = asyncio.run(load())
        clock.advance(TTL / 2)  # the 10 are due now, the 1000 in TTL/2
        now = int(clock() * 1000)
        old_expiry = now
        with store.read() as view:
            assert view.counts().live_or_unswept == 1010
            assert view.expired(now, 10_000) == [(old_expiry, vid) for vid in sorted(old)]
            assert view.expired(now, 3) == [(old_expiry, vid) for vid in sorted(old)[:3]]
            assert view.expired(now - 1, 10_000) == []
            assert len(view.expired(now + int(TTL * 500), 10_000)) == 1010
        assert asyncio.run(msgids.sweep()) == 10
        with store.read() as view:
            assert view.counts().live_or_unswept == 1000
            records = [view.record(v) for v in new]
            assert {r.real_id for r in records if r is not None} == {
                f"new{i}" for i in range(1000)}
    finally:
        store.close()


# --- damage and recovery ------------------------------------------------------------------


def corrupt_head(path: Path, size: int = 8192) -> bytes:
    data = bytearray(path.read_bytes())
    data[:size] = os.urandom(size)
    path.write_bytes(bytes(data))
    return bytes(data)


def test_corrupt_file_is_moved_aside_and_replaced_leaving_identities_alone(
    tmp_path: Path, clock: FakeClock
) -> None:
    msgid_path = tmp_path / "msgid-map.db"
    fill(msgid_path, clock)
    identity_path = make_identity_store(tmp_path, clock)
    identity_sha = sha(identity_path)
    corrupt = corrupt_head(msgid_path)

    with capture_logs() as logs:
        store = open_msgid_store(msgid_path, clock=clock)
    try:
        [aside] = aside_files(tmp_path)
        assert aside.name == f"msgid-map.db.corrupt-{stamp(clock)}"
        assert aside.read_bytes() == corrupt  # kept as it was, for whoever wants to look
        assert_working_empty_store(store, clock)
    finally:
        store.close()
    [entry] = [e for e in logs if e["event"] == MOVED_ASIDE]
    assert entry["log_level"] == "error"
    assert entry["moved_to"] == str(aside)
    assert entry["path"] == str(msgid_path)
    assert entry["reason"] and entry["action"]
    assert sha(identity_path) == identity_sha
    assert_identity_still_there(identity_path, clock)


def test_truncated_file_is_moved_aside_too(tmp_path: Path, clock: FakeClock) -> None:
    msgid_path = tmp_path / "msgid-map.db"
    fill(msgid_path, clock)
    identity_path = make_identity_store(tmp_path, clock)
    identity_sha = sha(identity_path)
    truncated = msgid_path.read_bytes()[:100]
    msgid_path.write_bytes(truncated)

    with capture_logs() as logs:
        store = open_msgid_store(msgid_path, clock=clock)
    try:
        [aside] = aside_files(tmp_path)
        assert aside.read_bytes() == truncated
        assert_working_empty_store(store, clock)
    finally:
        store.close()
    assert [e["log_level"] for e in logs if e["event"] == MOVED_ASIDE] == ["error"]
    assert sha(identity_path) == identity_sha


def test_a_second_corruption_in_the_same_second_keeps_both_files(
    tmp_path: Path, clock: FakeClock
) -> None:
    msgid_path = tmp_path / "msgid-map.db"
    fill(msgid_path, clock)
    first = corrupt_head(msgid_path)
    open_msgid_store(msgid_path, clock=clock).close()
    fill(msgid_path, clock, count=5)
    second = corrupt_head(msgid_path)

    with capture_logs() as logs:
        store = open_msgid_store(msgid_path, clock=clock)  # the clock has not moved
    store.close()

    asides = aside_files(tmp_path)
    assert len(asides) == 2
    by_name = {p.name: p.read_bytes() for p in asides}
    assert by_name[f"msgid-map.db.corrupt-{stamp(clock)}"] == first
    [entry] = [e for e in logs if e["event"] == MOVED_ASIDE]
    second_name = Path(entry["moved_to"]).name
    assert second_name != f"msgid-map.db.corrupt-{stamp(clock)}"
    assert by_name[second_name] == second


def test_a_healthy_file_is_not_moved_aside(tmp_path: Path, clock: FakeClock) -> None:
    msgid_path = tmp_path / "msgid-map.db"
    fill(msgid_path, clock)
    with capture_logs() as logs:
        store = open_msgid_store(msgid_path, clock=clock)
    try:
        msgids = MsgIdMap(store, clock=clock, ttl_seconds=TTL)
        assert msgids.counts().live_or_unswept == 50
        assert msgids.real_id_of(1) == "real-0"
    finally:
        store.close()
    assert aside_files(tmp_path) == []
    assert not [e for e in logs if e.get("log_level") == "error"]


def test_a_missing_file_is_created_not_reported(tmp_path: Path, clock: FakeClock) -> None:
    msgid_path = tmp_path / "sub" / "msgid-map.db"
    with capture_logs() as logs:
        store = open_msgid_store(msgid_path, clock=clock)
    try:
        assert_working_empty_store(store, clock)
    finally:
        store.close()
    assert aside_files(msgid_path.parent) == []
    assert not [e for e in logs if e.get("log_level") == "error"]


def test_loop_batched_writes_grow_a_full_map_and_share_commits(tmp_path: Path) -> None:
    """msgid-map.db (no fsync, writemap) commits on the event loop: the writes of one loop
    turn share a transaction, and a full map grows under them like under the writer."""
    async def main() -> tuple[int, int, int]:
        with LmdbMsgIdStore(tmp_path / "m.db", map_size=256 * 1024) as store:
            msgids = MsgIdMap(store)
            ids = await asyncio.gather(*(msgids.store_real(f"r{n:05d}" + "x" * 300)
                                         for n in range(3000)))
            batches, writes = store.commit_stats
            assert msgids.lookup(ids[-1]) is not None
            return len(set(ids)), batches, store.map_size

    distinct, batches, map_size = asyncio.run(main())
    assert distinct == 3000
    assert batches < 3000  # one loop turn queued them all: far fewer commits than writes
    assert map_size > 256 * 1024  # it grew


def test_claims_keep_one_expiry_per_key_and_list_the_expired_oldest_first(
        tmp_path: Path) -> None:
    store = LmdbMsgIdStore(tmp_path / "msgid-map.db")
    try:
        def put(view: MsgIdWriter) -> None:
            view.put_claims(["msg:a"], 3_000)
            view.put_claims(["msg:b"], 1_000)
            view.put_claims(["msg:c", "msg:a"], 2_000)
            view.put_claims(["msg:a"], 5_000)  # claimed again: the old expiry key goes

        store.write_sync(put)
        with store.read() as view:
            assert [view.claim_expiry(k) for k in ("msg:a", "msg:b", "msg:x")] == [
                5_000, 1_000, None]
            assert view.expired_claims(2_000, 10) == [(1_000, "msg:b"), (2_000, "msg:c")]
            assert view.expired_claims(9_000, 1) == [(1_000, "msg:b")]
            assert len(view.expired_claims(9_000, 10)) == 3  # a's 3000 key is gone

        def sweep(view: MsgIdWriter) -> None:
            view.delete_claim("msg:b", 1_000)
            view.delete_claim("msg:a", 3_000)  # a stale expiry: a is not deleted

        store.write_sync(sweep)
        with store.read() as view:
            assert view.claim_expiry("msg:b") is None
            assert view.claim_expiry("msg:a") == 5_000
            assert view.expired_claims(9_000, 10) == [(2_000, "msg:c"), (5_000, "msg:a")]
    finally:
        store.close()


def test_a_file_from_before_the_claim_tables_opens_and_gains_them(tmp_path: Path) -> None:
    path = tmp_path / "msgid-map.db"
    old_tables = MSGID_TABLES - {b"claims", b"claims_expiry", b"msg_content", b"recent"}
    env = lmdb.open(str(path), subdir=False, max_dbs=8)
    try:
        with env.begin(write=True) as txn:
            dbs = {name: env.open_db(name, txn=txn) for name in old_tables}
            txn.put(b"schema_version", encode_value(MSGID_SCHEMA_VERSION), db=dbs[b"meta"])
    finally:
        env.close()
    assert table_names(path) == old_tables
    store = open_msgid_store(path)
    try:
        store.write_sync(lambda view: view.put_claims(["msg:a"], 1_000))
        with store.read() as view:
            assert view.claim_expiry("msg:a") == 1_000
    finally:
        store.close()
    assert table_names(path) == MSGID_TABLES and aside_files(tmp_path) == []


def old_file_with_one_message(path: Path, clock: FakeClock) -> int:
    """A msgid-map.db as a daemon from before msg_content wrote it: its tables, one live
    inbound message (the 7-field record of then); its virtual id."""
    now = int(clock() * 1000)
    env = lmdb.open(str(path), subdir=False, max_dbs=8)
    try:
        with env.begin(write=True) as txn:
            dbs = {name: env.open_db(name, txn=txn)
                   for name in MSGID_TABLES - {b"msg_content", b"recent"}}
            txn.put(b"schema_version", encode_value(MSGID_SCHEMA_VERSION), db=dbs[b"meta"])
            txn.put(b"msg_counter", encode_value(1), db=dbs[b"meta"])
            vid = (1).to_bytes(4, "big")
            txn.put(b"ROBOT1.0_old", vid, db=dbs[b"msg_to_virtual"])
            txn.put(vid, encode_value(["ROBOT1.0_old", APP, "group", "G1", "in", now,
                                       now + 600_000]), db=dbs[b"virtual_to_msg"])
            txn.put(encode_u64(now + 600_000) + vid, b"", db=dbs[b"expires_at"])
    finally:
        env.close()
    return 1


def test_a_file_from_before_message_content_is_read_as_it_is_and_gains_the_table(
        tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "msgid-map.db"
    vid = old_file_with_one_message(path, clock)
    before = sha(path)
    reader = LmdbMsgIdStore(path, readonly=True)  # the CLI's way: nothing written
    try:
        found = MsgIdMap(reader, clock=clock).lookup_content(vid)
        assert found is not None and found[0].real_id == "ROBOT1.0_old" and found[1] is None
        assert MsgIdMap(reader, clock=clock).recent(None, 10) == []  # no list in the file
    finally:
        reader.close()
    assert sha(path) == before and b"msg_content" not in table_names(path)

    store = open_msgid_store(path)
    try:
        msgids = MsgIdMap(store, clock=clock)
        assert msgids.lookup_content(vid)[1] is None  # type: ignore[index]
        new = msgids.store_real_sync("ROBOT1.0_new", MsgContext(APP, "group", "G1").about(
            7, "hello"))
        assert msgids.lookup_content(new)[1] == MsgContent(7, "hello")  # type: ignore[index]
        assert msgids.lookup_content(vid)[0].real_id == "ROBOT1.0_old"  # type: ignore[index]
        # listed from the day the file has its list on: what came before is not
        assert [record.real_id for record, _ in msgids.recent(None, 10)] == ["ROBOT1.0_new"]
    finally:
        store.close()
    assert table_names(path) == MSGID_TABLES and aside_files(tmp_path) == []
