"""msgid-map.db on LMDB: the disposable message-id store.

Tables (docs/stores.md):

| table | key → value |
|---|---|
| ``meta`` | ``schema_version``, ``msg_counter`` (the position of the last virtual id handed out: it does not wrap, its id does, :func:`gensokyo_idmap.runtime.blocks.virtual_id_at`) |
| ``msg_to_virtual`` | real message id → virtual id (4-byte big-endian) |
| ``virtual_to_msg`` | virtual id → cbor [real id, AppID, chat kind, target, direction, created ms, expires ms] |
| ``expires_at`` | expires ms (8 bytes) + virtual id (4 bytes) → empty: a sweep reads only what expired |
| ``chat_recent`` | AppID NUL kind NUL target NUL + created ms + virtual id → empty (inbound only): the newest message of a chat is one cursor step away |
| ``claims`` | delivery key (``msg:<id>`` / ``evt:<id>``) → expires ms (8 bytes): events processed within the de-duplication window, so a repeat after a restart is known |
| ``claims_expiry`` | expires ms (8 bytes) + delivery key → empty: a sweep reads only what expired |
| ``msg_content`` | virtual id → cbor [author vUIN (0: unknown), OneBot content as CQ text or null] and, for a message with a ``msg_idx``, its alias key as a third item: what ``get_msg`` answers; written and deleted with the record |
| ``recent`` | created ms (8 bytes) + virtual id (4 bytes) → empty, every record (in and out): the newest messages are one cursor step away (the console's list); written and deleted with the record |

A message with a ``msg_idx`` has a second ``msg_to_virtual`` key, its alias
(:func:`gensokyo_idmap.runtime.msgid.quote_key`), pointing at the same virtual id: how a quote of
it is found. It is written and deleted with the record (the delete reads the alias from
``msg_content``).

The claim tables, ``msg_content`` and ``recent`` came after schema_version 1 and need no upgrade: LMDB
creates a named table that is missing when the store opens, and an older daemon never opens
them (a record without a ``msg_content`` entry, one written before, has no content). An
entry an older daemon left behind when it deleted a record is replaced or deleted when its
virtual id is handed out again; a ``recent`` entry left so names a record created at
another time, and the list steps over it.

Commits do not fsync (``sync=False``): after ``kill -9`` the page cache still holds them,
after a power cut the last seconds of reply context may be gone, and that is acceptable here
because identities never live in this file. A file that cannot be opened is moved aside and
replaced by an empty one (:func:`open_msgid_store`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import lmdb
import structlog

from gensokyo_idmap.errors import StoreError
from gensokyo_idmap.runtime.base import MsgContent, MsgIdCounts, MsgIdWriter, MsgRecord
from gensokyo_idmap.store.lmdb.codec import decode_u64, decode_value, encode_u64, encode_value
from gensokyo_idmap.store.lmdb.env import CounterView, LmdbEnv, Table

__all__ = ["MSGID_SCHEMA_VERSION", "LmdbMsgIdStore", "open_msgid_store"]

log = structlog.get_logger("gensokyo_idmap.store")

MSGID_SCHEMA_VERSION: Final = 1
DEFAULT_MSGID_MAP_SIZE: Final = 64 * 1024 * 1024

_TABLES: Final = (
    Table(b"meta", "meta"),
    Table(b"msg_to_virtual", "msg_to_virtual"),
    Table(b"virtual_to_msg", "virtual_to_msg"),
    Table(b"expires_at", "expires_at"),
    Table(b"chat_recent", "chat_recent"),
    Table(b"claims", "claims"),
    Table(b"claims_expiry", "claims_expiry"),
    Table(b"msg_content", "msg_content", added_later=True),
    Table(b"recent", "recent", added_later=True),
)
_META_COUNTER: Final = b"msg_counter"


def _u32(value: int) -> bytes:
    return value.to_bytes(4, "big")


def _chat_prefix(app_id: str, chat_kind: str, target: str) -> bytes:
    return f"{app_id}\0{chat_kind}\0{target}\0".encode()


class MsgIdView(CounterView, MsgIdWriter):
    """Reads (and, in a write transaction, writes) of one msgid-map.db transaction."""

    __slots__ = ()
    COUNTER_KEY = _META_COUNTER

    # reads
    def virtual_of(self, real_id: str) -> int | None:
        raw = self._txn.get(real_id.encode("utf-8"), db=self._t.msg_to_virtual)
        return None if raw is None else int.from_bytes(raw, "big")

    def record(self, virtual_id: int) -> MsgRecord | None:
        raw = self._txn.get(_u32(virtual_id), db=self._t.virtual_to_msg)
        if raw is None:
            return None
        real, app_id, kind, target, direction, created, expires = decode_value(raw)
        return MsgRecord(virtual_id, real, app_id, kind, target, direction, created, expires)

    def content(self, virtual_id: int) -> MsgContent | None:
        if self._t.msg_content is None:  # a file from before, opened read-only
            return None
        raw = self._txn.get(_u32(virtual_id), db=self._t.msg_content)
        if raw is None:
            return None
        author, message, *alias = decode_value(raw)
        return MsgContent(author, message, alias[0] if alias else None)

    def _expired_keys(self, table: Any, now_ms: int, limit: int) -> list[tuple[int, bytes]]:
        """(expires ms, the rest of the key) of an expiry index's keys due at ``now_ms``."""
        found: list[tuple[int, bytes]] = []
        cur = self._txn.cursor(table)
        if not cur.first():
            return found
        end = encode_u64(now_ms + 1)
        for key in cur.iternext(keys=True, values=False):
            if key >= end or len(found) >= limit:
                break
            found.append((decode_u64(key[:8]), key[8:]))
        return found

    def expired(self, now_ms: int, limit: int) -> list[tuple[int, int]]:
        return [(expires, int.from_bytes(vid, "big"))
                for expires, vid in self._expired_keys(self._t.expires_at, now_ms, limit)]

    def latest_inbound(
        self, app_id: str, chat_kind: str, target: str, now_ms: int, since_ms: int,
        before: MsgRecord | None = None,
    ) -> MsgRecord | None:
        walk = self.inbound_walk(app_id, chat_kind, target, now_ms, since_ms)
        return walk(None if before is None else (before.created_ms, before.virtual_id))

    def inbound_walk(self, app_id: str, chat_kind: str, target: str, now_ms: int,
                     since_ms: int) -> Callable[[tuple[int, int] | None], MsgRecord | None]:
        """:meth:`latest_inbound` of one chat below a position ((created ms, virtual id);
        None: the newest), as often as a reply choice asks: the chat's keys and one cursor
        are made once for all of its steps."""
        prefix = _chat_prefix(app_id, chat_kind, target)
        cur = self._txn.cursor(self._t.chat_recent)
        newest = prefix + encode_u64(now_ms + 1)
        oldest = prefix + encode_u64(max(since_ms, 0))
        record = self.record

        def below(at: tuple[int, int] | None) -> MsgRecord | None:
            bound = newest if at is None else prefix + encode_u64(at[0]) + _u32(at[1])
            moved = cur.prev() if cur.set_range(bound) else cur.last()
            while moved:
                key = cur.key()
                if key < oldest or not key.startswith(prefix):
                    return None
                found = record(int.from_bytes(key[-4:], "big"))
                if found is not None and found.expires_ms > now_ms:
                    return found  # newest alive; expired-unswept ones are stepped over
                moved = cur.prev()
            return None

        return below

    def msg_counter(self) -> int:
        return self._get_counter()

    def recent(self, before: tuple[int, int] | None, now_ms: int, limit: int,
               scanned: int) -> list[MsgRecord]:
        found: list[MsgRecord] = []
        if self._t.recent is None:  # a file from before, opened read-only
            return found
        cur = self._txn.cursor(self._t.recent)
        if before is None:
            moved = cur.last()
        else:
            bound = encode_u64(before[0]) + _u32(before[1])
            moved = cur.prev() if cur.set_range(bound) else cur.last()
        while moved and len(found) < limit and scanned > 0:
            scanned -= 1
            key = cur.key()
            record = self.record(int.from_bytes(key[8:12], "big"))
            if record is not None and record.created_ms == decode_u64(key[:8]) \
                    and record.expires_ms > now_ms:
                found.append(record)
            moved = cur.prev()
        return found

    def claim_expiry(self, key: str) -> int | None:
        raw = self._txn.get(key.encode("utf-8"), db=self._t.claims)
        return None if raw is None else decode_u64(raw)

    def expired_claims(self, now_ms: int, limit: int) -> list[tuple[int, str]]:
        return [(expires, key.decode("utf-8"))
                for expires, key in self._expired_keys(self._t.claims_expiry, now_ms, limit)]

    def last_claim_expiry(self) -> int | None:
        cur = self._txn.cursor(self._t.claims_expiry)
        return decode_u64(cur.key()[:8]) if cur.last() else None

    def counts(self) -> MsgIdCounts:
        return MsgIdCounts(
            live_or_unswept=int(self._txn.stat(self._t.virtual_to_msg)["entries"]),
            counter=self.msg_counter(),
        )

    # writes
    def put_record(self, record: MsgRecord, content: MsgContent | None = None) -> None:
        vid = _u32(record.virtual_id)
        value = encode_value([record.real_id, record.app_id, record.chat_kind, record.target,
                              record.direction, record.created_ms, record.expires_ms])
        self._txn.put(record.real_id.encode("utf-8"), vid, db=self._t.msg_to_virtual)
        self._txn.put(vid, value, db=self._t.virtual_to_msg)
        if content is not None:
            kept = [content.author, content.message]
            if content.alias is not None:
                kept.append(content.alias)
                self._txn.put(content.alias.encode("utf-8"), vid, db=self._t.msg_to_virtual)
            self._txn.put(vid, encode_value(kept), db=self._t.msg_content)
        else:  # an entry an older daemon left for an earlier holder of this id
            self._txn.delete(vid, db=self._t.msg_content)
        self._txn.put(encode_u64(record.expires_ms) + vid, b"", db=self._t.expires_at)
        self._txn.put(encode_u64(record.created_ms) + vid, b"", db=self._t.recent)
        if record.direction == "in":
            chat = _chat_prefix(record.app_id, record.chat_kind, record.target)
            self._txn.put(chat + encode_u64(record.created_ms) + vid, b"", db=self._t.chat_recent)

    def delete_record(self, record: MsgRecord) -> None:
        vid = _u32(record.virtual_id)
        real = record.real_id.encode("utf-8")
        if self._txn.get(real, db=self._t.msg_to_virtual) == vid:
            self._txn.delete(real, db=self._t.msg_to_virtual)
        kept = self.content(record.virtual_id)
        if kept is not None and kept.alias is not None:
            alias = kept.alias.encode("utf-8")
            if self._txn.get(alias, db=self._t.msg_to_virtual) == vid:
                self._txn.delete(alias, db=self._t.msg_to_virtual)
        self._txn.delete(vid, db=self._t.virtual_to_msg)
        self._txn.delete(vid, db=self._t.msg_content)
        self._txn.delete(encode_u64(record.expires_ms) + vid, db=self._t.expires_at)
        self._txn.delete(encode_u64(record.created_ms) + vid, db=self._t.recent)
        if record.direction == "in":
            chat = _chat_prefix(record.app_id, record.chat_kind, record.target)
            self._txn.delete(chat + encode_u64(record.created_ms) + vid, db=self._t.chat_recent)

    def delete_expiry(self, expires_ms: int, virtual_id: int) -> None:
        """Drop an ``expires_at`` key whose record is gone or was refreshed (an orphan)."""
        self._txn.delete(encode_u64(expires_ms) + _u32(virtual_id), db=self._t.expires_at)

    def set_msg_counter(self, value: int) -> None:
        self._set_counter(value)

    def put_claims(self, keys: Sequence[str], expires_ms: int) -> None:
        txn, claims, index = self._txn, self._t.claims, self._t.claims_expiry
        expires = encode_u64(expires_ms)
        for key in keys:
            raw = key.encode("utf-8")
            earlier = txn.replace(raw, expires, db=claims)
            if earlier is not None:
                txn.delete(earlier + raw, db=index)
            txn.put(expires + raw, b"", db=index)

    def delete_claim(self, key: str, expires_ms: int) -> None:
        raw = key.encode("utf-8")
        expires = encode_u64(expires_ms)
        if self._txn.get(raw, db=self._t.claims) == expires:
            self._txn.delete(raw, db=self._t.claims)
        self._txn.delete(expires + raw, db=self._t.claims_expiry)


def _is_empty(txn: lmdb.Transaction[bytes], tables: Any) -> bool:
    return int(txn.stat(tables.virtual_to_msg)["entries"]) == 0


class LmdbMsgIdStore(LmdbEnv[MsgIdView]):
    """msgid-map.db. Open one per process and path (the rest comes from :class:`LmdbEnv`)."""

    def __init__(
        self, path: str | os.PathLike[str], *, map_size: int = DEFAULT_MSGID_MAP_SIZE,
        readonly: bool = False,
    ) -> None:
        super().__init__(
            path,
            tables=_TABLES,
            make_view=MsgIdView,
            is_empty=_is_empty,
            durable=False,
            map_size=map_size,
            schema_version=MSGID_SCHEMA_VERSION,
            upgrades={},
            readonly=readonly,
        )

    def check(self) -> None:
        """Walk every table once: damage that LMDB can see surfaces here, not mid-traffic."""
        try:
            with self.read() as view:
                for table in _TABLES:
                    handle = getattr(view._t, table.attr)
                    if handle is None:  # added later, absent from a file opened read-only
                        continue
                    cur = view._txn.cursor(handle)
                    for _ in cur.iternext(keys=True, values=False):
                        pass
        except lmdb.Error as exc:
            raise StoreError(f"{self.path}: unreadable: {exc}") from exc


def open_msgid_store(
    path: str | os.PathLike[str],
    *,
    map_size: int = DEFAULT_MSGID_MAP_SIZE,
    clock: Callable[[], float] = time.time,
) -> LmdbMsgIdStore:
    """Open msgid-map.db; a file that cannot be opened is moved aside and started afresh.

    Losing this file loses reply context, never identities, so a damaged one must not keep
    the daemon from starting. The old file is kept (``msgid-map.db.corrupt-<time>``) for
    whoever wants to look at it.
    """
    target = Path(path)
    try:
        store = LmdbMsgIdStore(target, map_size=map_size)
    except Exception as exc:  # any way of not opening: schema, header, cbor garbage
        if not target.is_file():
            raise
        reason = exc.message if isinstance(exc, StoreError) else f"{type(exc).__name__}: {exc}"
    else:
        try:
            store.check()
            return store
        except StoreError as exc:
            store.close()
            reason = exc.message
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(clock()))
    aside = target.with_name(f"{target.name}.corrupt-{stamp}")
    suffix = 1
    while aside.exists():  # two bad starts within a second keep both files
        aside = target.with_name(f"{target.name}.corrupt-{stamp}-{suffix}")
        suffix += 1
    os.replace(target, aside)
    lock = target.with_name(target.name + "-lock")
    if lock.exists():
        lock.unlink()
    log.error(
        "[idmap] msgid-map.db unreadable, moved aside",
        path=str(target),
        moved_to=str(aside),
        reason=reason,
        effect="reply context of earlier messages is lost; identities are not affected",
        action=f"nothing to do; delete {aside.name} once you no longer need it",
    )
    return LmdbMsgIdStore(target, map_size=map_size)
