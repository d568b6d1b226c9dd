"""Property test of the message-id map against a real msgid-map.db, and against Redis.

A hypothesis state machine runs random store / lookup / advance-clock / sweep / reopen /
counter-jump steps and keeps an exact model of what the file must hold:
``records`` (virtual id → real id, expiry, context) including expired-but-unswept ones, and
the counter. After every step it reads every table of the file and checks:

- the tables agree with each other: every ``virtual_to_msg`` record has
  ``msg_to_virtual[real] == vid``, its ``expires_at`` key and (inbound only) its
  ``chat_recent`` key; every ``msg_to_virtual``, ``expires_at`` and ``chat_recent`` key points
  back at a record that says the same; so no virtual id maps to two real ids and no real id
  to two virtual ids;
- the file holds exactly the model's records and counter (so allocation, TTL refresh, purge
  on reuse and the sweep do exactly what the rules say);
- lookups agree with the model: a live record is found, an expired one is not;
- the author and content kept beside a record are the ones its first store gave (a hit
  keeps them) and go with it: no ``msg_content`` entry outlives its record;
- a message's ``msg_idx`` alias (rule 8) is in the index exactly as the model says (the
  last store or hit of a record holding it took it; deleting that record removed it), no
  alias key outlives its record, and :meth:`MsgIdMap.quoted` finds what the model does.

Orphans: none are allowed. ``delete_record`` removes every index key of a record (the
``expires_at`` key with the record's own expiry, the ``chat_recent`` key with its own
creation time, and ``msg_to_virtual`` when it still names this vid), a TTL refresh is
delete-then-put inside one transaction, and every put goes to a vid that ``_allocate``
found empty or purged first. So no sequence of our own operations leaves an ``expires_at``
key without its record; ``_apply_sweep``'s ``delete_expiry`` branch is only a guard for
files written otherwise, and any orphan here is a bug.
"""

from __future__ import annotations

import asyncio
import math
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from gensokyo_idmap.errors import NotFoundError
from gensokyo_idmap.runtime.msgid import INT32_MAX, MsgContext, MsgIdMap, quote_key
from gensokyo_idmap.runtime.redis.state import RedisMsgIdMap
from gensokyo_idmap.runtime.base import MsgContent
from gensokyo_idmap.store.lmdb.codec import decode_u64, decode_value
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore, open_msgid_store
from gensokyo_idmap.runtime.redis.scripts import RedisMsgIds
from gensokyo_idmap.runtime.redis.connection import RedisRuntime

from ..conftest import REDIS_URL, FakeClock, test_prefix

TTL = 100.0
TTL_MS = int(TTL * 1000)
REALS = [f"real-{i}" for i in range(6)]
IDXS = ["I1", "I2"]  # msg_idx values: few, so chats reuse them
ALIAS = "\0idx\0"
CONTEXTS = [
    MsgContext("102", "group", "G1", "in"),
    MsgContext("102", "group", "G1", "out"),
    MsgContext("102", "c2c", "U1", "in"),
]


@dataclass(frozen=True)
class Rec:
    real: str
    app_id: str
    chat_kind: str
    target: str
    direction: str
    created_ms: int
    expires_ms: int


def chat_key(rec: Rec, vid: int) -> bytes:
    prefix = f"{rec.app_id}\0{rec.chat_kind}\0{rec.target}\0".encode()
    return prefix + rec.created_ms.to_bytes(8, "big") + vid.to_bytes(4, "big")


class MsgIdMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="msgid-stateful-"))
        self.path = self.dir / "msgid-map.db"
        self.clock = FakeClock()
        self.store = LmdbMsgIdStore(self.path, map_size=1024 * 1024)
        self.msgids = MsgIdMap(self.store, clock=self.clock, ttl_seconds=TTL)
        self.records: dict[int, Rec] = {}  # the model: every record the file must hold
        self.contents: dict[int, MsgContent | None] = {}  # what each record keeps beside it
        self.aliases: dict[str, int] = {}  # the model of the alias keys of the index
        self.counter = 0  # the position of the last id handed out
        self.last_vid = 0

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # model helpers
    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def live_vid_of(self, real: str) -> int | None:
        now = self.now_ms()
        for vid, rec in self.records.items():
            if rec.real == real and rec.expires_ms > now:
                return vid
        return None

    def model_delete(self, vid: int) -> None:
        """A record goes, its content and (if it still holds it) its alias key with it."""
        del self.records[vid]
        kept = self.contents.pop(vid, None)
        if kept is not None and kept.alias is not None and self.aliases.get(kept.alias) == vid:
            del self.aliases[kept.alias]

    def model_allocate(self) -> int:
        now = self.now_ms()
        position = self.counter  # positions grow; their ids wrap at INT32_MAX
        while True:
            position += 1
            candidate = (position - 1) % INT32_MAX + 1
            held = self.records.get(candidate)
            if held is None:
                break
            if held.expires_ms <= now:
                self.model_delete(candidate)  # purged before reuse
                break
        self.counter = position
        self.last_vid = candidate
        return candidate

    # rules
    @rule(real=st.sampled_from(REALS), ctx=st.sampled_from(CONTEXTS), use_async=st.booleans(),
          author=st.integers(0, 2), idx=st.none() | st.sampled_from(IDXS))
    def store_real(self, real: str, ctx: MsgContext, use_async: bool, author: int,
                   idx: str | None) -> None:
        if author or idx:  # a message with its author, content, msg_idx (else a bare context)
            ctx = ctx.about(author, f"said [{author}]" if author else None, idx)
        now = self.now_ms()
        live = self.live_vid_of(real)
        if live is not None:
            expected = live
            old = self.records[live]
            self.records[live] = Rec(old.real, old.app_id, old.chat_kind, old.target,
                                     old.direction, old.created_ms, now + TTL_MS)
            kept = self.contents.get(live)
            if kept is not None and kept.alias is not None:
                self.aliases[kept.alias] = live  # a hit takes its alias (again)
        else:
            expected = self.model_allocate()
            for vid in [v for v, r in self.records.items() if r.real == real]:
                self.model_delete(vid)  # an expired record of the same real id starts afresh
            self.records[expected] = Rec(real, ctx.app_id, ctx.chat_kind, ctx.target,
                                         ctx.direction, now, now + TTL_MS)
            self.contents[expected] = ctx.content()
            if ctx.alias is not None:
                self.aliases[ctx.alias] = expected
        if use_async:
            got = asyncio.run(self.msgids.store_real(real, ctx))
        else:
            got = self.msgids.store_real_sync(real, ctx)
        assert got == expected

    @rule(data=st.data())
    def lookup(self, data: st.DataObject) -> None:
        known = sorted(self.records)
        choices = st.integers(1, INT32_MAX)
        if known:
            choices = st.sampled_from(known) | choices
        vid = data.draw(choices, label="vid")
        rec = self.records.get(vid)
        live = rec is not None and rec.expires_ms > self.now_ms()
        found = self.msgids.lookup(vid)
        if live:
            assert rec is not None and found is not None
            assert (found.real_id, found.expires_ms, found.created_ms) == (
                rec.real, rec.expires_ms, rec.created_ms)
            assert self.msgids.real_id_of(vid) == rec.real
        else:
            assert found is None
            try:
                self.msgids.real_id_of(vid)
            except NotFoundError:
                pass
            else:
                raise AssertionError(f"expired or unknown vid {vid} still resolves")

    @rule(ms=st.integers(0, 2 * TTL_MS))
    def advance_clock(self, ms: int) -> None:
        self.clock.advance(ms / 1000)

    @precondition(lambda self: bool(self.records))
    @rule(data=st.data())
    def advance_to_an_expiry(self, data: st.DataObject) -> None:
        """Stand exactly on a record's expiry: the millisecond where it stops being live."""
        target = data.draw(st.sampled_from(sorted({r.expires_ms for r in self.records.values()})),
                           label="expires_ms")
        if target <= self.now_ms():
            return  # time never goes back
        now = target / 1000
        while int(now * 1000) < target:
            now = math.nextafter(now, math.inf)
        while int(now * 1000) > target:
            now = math.nextafter(now, -math.inf)
        self.clock.now = now
        assert self.now_ms() == target

    @rule(use_async=st.booleans())
    def sweep(self, use_async: bool) -> None:
        now = self.now_ms()
        expired = [vid for vid, rec in self.records.items() if rec.expires_ms <= now]
        for vid in expired:
            self.model_delete(vid)
        swept = asyncio.run(self.msgids.sweep()) if use_async else self.msgids.sweep_sync()
        assert swept == len(expired)

    @rule(via_open_msgid_store=st.booleans())
    def reopen(self, via_open_msgid_store: bool) -> None:
        self.store.close()
        if via_open_msgid_store:
            self.store = open_msgid_store(self.path, map_size=1024 * 1024, clock=self.clock)
            assert not list(self.dir.glob("*.corrupt-*")), "a healthy file was moved aside"
        else:
            self.store = LmdbMsgIdStore(self.path, map_size=1024 * 1024)
        self.msgids = MsgIdMap(self.store, clock=self.clock, ttl_seconds=TTL)

    @rule(below=st.integers(0, 4))
    def jump_counter_near_int32_max(self, below: int) -> None:
        value = INT32_MAX - below
        self.store.write_sync(lambda view: view.set_msg_counter(value))
        self.counter = value

    # invariants
    @invariant()
    def tables_agree_with_each_other_and_the_model(self) -> None:
        with self.store.read() as view:
            txn, t = view._txn, view._t
            m2v = {k.decode(): int.from_bytes(v, "big")
                   for k, v in txn.cursor(t.msg_to_virtual)}
            aliases = {key: m2v.pop(key) for key in list(m2v) if key.startswith(ALIAS)}
            v2m: dict[int, Rec] = {}
            for k, v in txn.cursor(t.virtual_to_msg):
                assert len(k) == 4
                v2m[int.from_bytes(k, "big")] = Rec(*decode_value(v))
            expiry_keys = [(decode_u64(k[:8]), int.from_bytes(k[8:], "big"))
                           for k, _ in txn.cursor(t.expires_at)]
            chat_keys = {k for k, _ in txn.cursor(t.chat_recent)}
            content_keys = {int.from_bytes(k, "big") for k, _ in txn.cursor(t.msg_content)}
            counter = view.msg_counter()

        # every record has all its index entries
        for vid, rec in v2m.items():
            assert 1 <= vid <= INT32_MAX
            assert m2v.get(rec.real) == vid, f"msg_to_virtual[{rec.real}] != {vid}"
            assert (rec.expires_ms, vid) in expiry_keys
            if rec.direction == "in":
                assert chat_key(rec, vid) in chat_keys
        # every index entry points back at a record that says the same (no orphans)
        for real, vid in m2v.items():
            assert vid in v2m and v2m[vid].real == real, f"{real} -> {vid} is stale"
        assert len(set(m2v.values())) == len(m2v), "one vid maps to two real ids"
        assert len(expiry_keys) == len(set(expiry_keys)) == len(v2m)
        for expires, vid in expiry_keys:
            assert vid in v2m and v2m[vid].expires_ms == expires, f"orphan expiry {vid}"
        expected_chat = {chat_key(rec, vid) for vid, rec in v2m.items() if rec.direction == "in"}
        assert chat_keys == expected_chat
        assert content_keys == {vid for vid, kept in self.contents.items() if kept is not None}
        assert aliases == self.aliases

        # ... and the file holds exactly the model
        assert v2m == self.records
        assert counter == self.counter

        # no live vid is shared: live real ids are distinct
        now = self.now_ms()
        live_reals = [rec.real for rec in v2m.values() if rec.expires_ms > now]
        assert len(live_reals) == len(set(live_reals))

    @invariant()
    def lookups_agree_with_the_model(self) -> None:
        for real in REALS:
            assert self.msgids.virtual_of(real) == self.live_vid_of(real)

    @invariant()
    def quotes_agree_with_the_model(self) -> None:
        now = self.now_ms()
        for ctx in CONTEXTS:
            for idx in IDXS:
                key = quote_key(ctx.app_id, ctx.chat_kind, ctx.target, idx)
                assert key is not None
                holder = self.aliases.get(key)
                live = holder is not None and self.records[holder].expires_ms > now
                assert self.msgids.quoted(ctx.app_id, ctx.chat_kind, ctx.target, idx) == (
                    holder if live else None)

    @invariant()
    def contents_agree_with_the_model(self) -> None:
        now = self.now_ms()
        for vid, rec in self.records.items():
            found = self.msgids.lookup_content(vid)
            if rec.expires_ms > now:
                assert found is not None and found[1] == self.contents[vid], vid
            else:
                assert found is None


MsgIdMachine.TestCase.settings = settings(
    max_examples=50,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestMsgIdMap = MsgIdMachine.TestCase


# --- the same machine on Redis ------------------------------------------------------------


def chat_member(rec: Rec, vid: int) -> tuple[str, str]:
    """(chat key after the prefix, member) of an inbound record in the Redis layout."""
    return (f"m:c:{rec.app_id}\0{rec.chat_kind}\0{rec.target}",
            f"{rec.created_ms:016x}{vid:08x}")


class RedisMsgIdMachine(MsgIdMachine):
    """The same steps and model on a Redis prefix of its own. Redis has no sweep (native
    TTL drops keys in real time, far beyond these fake-clock steps), so the model keeps
    expired records until a reuse purges them, and "reopen" is a new map on the same
    prefix (what a restarted daemon sees)."""

    def __init__(self) -> None:  # noqa: D107 - no LMDB file: the state lives in Redis
        RuleBasedStateMachine.__init__(self)
        self.clock = FakeClock()
        self.runtime = RedisRuntime(REDIS_URL, test_prefix())
        self.msgids = RedisMsgIdMap(RedisMsgIds(self.runtime), clock=self.clock,
                                    ttl_seconds=TTL)  # type: ignore[assignment]
        self.records = {}
        self.contents = {}
        self.aliases = {}
        self.counter = 0  # the map's own position (no high-water mark here)
        self.last_vid = 0

    def teardown(self) -> None:
        self.runtime.delete_all()
        self.runtime.sync.close()

    @rule(use_async=st.booleans())
    def sweep(self, use_async: bool) -> None:
        swept = asyncio.run(self.msgids.sweep()) if use_async else self.msgids.sweep_sync()
        assert swept == 0  # Redis expires keys by itself; expired records stay invisible

    @rule(via_open_msgid_store=st.booleans())
    def reopen(self, via_open_msgid_store: bool) -> None:
        self.msgids = RedisMsgIdMap(RedisMsgIds(self.runtime), clock=self.clock,
                                    ttl_seconds=TTL)  # type: ignore[assignment]
        self.counter = 0  # a daemon without a mark starts from position 0 (skipping live ids)

    @rule(below=st.integers(0, 4))
    def jump_counter_near_int32_max(self, below: int) -> None:
        value = INT32_MAX - below
        self.msgids._position = value  # type: ignore[attr-defined]  # in the daemon's memory
        self.counter = value

    @invariant()
    def tables_agree_with_each_other_and_the_model(self) -> None:
        sync, prefix = self.runtime.sync, self.runtime.prefix
        v2m: dict[int, Rec] = {}
        m2v: dict[str, int] = {}
        chats: set[tuple[str, str]] = set()
        for raw in self.runtime.scan("m:*"):
            key = raw.decode()[len(prefix):]
            if key.startswith("m:v:"):
                h = {k.decode(): v.decode() for k, v in sync.hgetall(raw).items()}
                v2m[int(key[4:])] = Rec(h["r"], h["a"], h["k"], h["t"], h["d"], int(h["c"]),
                                        int(h["e"]))
                assert sync.pttl(raw) > 0, "a record without a TTL"
            elif key.startswith("m:r:"):
                m2v[key[4:]] = int(sync.get(raw))
                assert sync.pttl(raw) > 0, "a real id without a TTL"
            elif key.startswith("m:c:"):
                chats |= {(key, m.decode()) for m in sync.zrange(raw, 0, -1)}
        last_vid = int(sync.get(prefix + "m:ctr") or 0)

        for vid, rec in v2m.items():
            assert 1 <= vid <= INT32_MAX
            assert m2v.get(rec.real) == vid, f"m:r:{rec.real} != {vid}"
        aliases = {key: m2v.pop(key) for key in list(m2v) if key.startswith(ALIAS)}
        for real, vid in m2v.items():
            assert vid in v2m and v2m[vid].real == real, f"{real} -> {vid} is stale"
        assert aliases == self.aliases
        assert chats == {chat_member(rec, vid) for vid, rec in v2m.items()
                         if rec.direction == "in"}
        assert v2m == self.records
        assert self.msgids._position == self.counter  # type: ignore[attr-defined]
        assert last_vid == self.last_vid


RedisMsgIdMachine.TestCase.settings = MsgIdMachine.TestCase.settings
TestRedisMsgIdMap = RedisMsgIdMachine.TestCase
