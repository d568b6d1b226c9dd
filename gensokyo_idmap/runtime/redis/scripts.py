"""Message ids, delivery claims and reply counts on Redis (``idmap.runtime_backend: redis``).

Keys, each under the prefix (``gsk:`` by default):

| key | type | what |
|---|---|---|
| ``m:ctr`` | string | the last virtual id handed out, by any daemon (for ``msgid stats``: each daemon allocates from a block of positions of its own, :mod:`gensokyo_idmap.runtime.blocks`) |
| ``m:v:<virtual id>`` | hash | the record: ``r`` real id, ``a`` AppID, ``k`` chat kind, ``t`` target, ``d`` direction, ``c`` created ms, ``e`` expires ms; and what ``get_msg`` answers: ``u`` the author's vUIN (0: unknown), ``m`` the OneBot content as CQ text (absent: not kept), ``x`` the alias key of a message with a ``msg_idx`` (what a quote of it names). A record written before these were kept has none |
| ``m:r:<real id>`` | string | the virtual id of a real id; also ``m:r:<alias>`` (:func:`gensokyo_idmap.runtime.msgid.quote_key`), written, refreshed and purged with the record |
| ``m:c:<AppID>\\0<kind>\\0<target>`` | sorted set | inbound messages of a chat, members ``<created ms, 16 hex><virtual id, 8 hex>`` (lexical order is time order), the newest 256 |
| ``d:<delivery key>`` | string | a delivery claim: its expiry ms; while a daemon delivers the event, ``<that daemon's token>:<until ms>``: a lease of a few seconds that daemon renews while the delivery lasts |
| ``m:l`` | sorted set | every message (in and out) created within the TTL, members as in ``m:c``, the newest :data:`LISTED` at most: the recent messages, newest first (the console's list) |
| ``m:a:<AppID>\\0<kind>\\0<target>`` | sorted set | the chat's inbound messages within their reply window that may have replies left (members as in ``m:c``): what a send answers |
| ``b:<msg_id or event_id>`` | string | replies sent to that id (all daemons together); with ``bots``, ``b:<AppID>:<msg_id or event_id>``: each bot's replies apart (two bots given one platform message id each have its five) |

Every key carries a native TTL (``PX``): nothing needs sweeping. The record keeps its
expiry too, so a lookup compares it with the caller's clock exactly as on LMDB (an
expired record is invisible whether or not Redis dropped it yet) and tests move time
without sleeping.

Allocation is one Lua script per batch, so it is atomic across every daemon on this
Redis: a virtual id is taken only if no live record holds it (an expired one in the way
is purged first), and the real → virtual mapping is written in the same step. The
positions come from the calling daemon's block, reserved in the precious store and held in
its memory (:mod:`gensokyo_idmap.runtime.blocks`), not from Redis: after a ``FLUSHALL``, a
Redis restarted empty or from an older snapshot, each daemon goes on where it was, and a
daemon that starts goes on above every block reserved before, so no id is handed out
twice. The scripts build their keys from the
prefix they are given, which a Redis Cluster would refuse; a single Redis (or a
replicated pair) is what this is for.

The reply choice is one script too (:meth:`RedisMsgIds.take_newest`): the newest member of
the chat's ``m:a`` set whose record lives and whose count is below the limit takes the
reply, and a member found spent (or gone) leaves the set, whichever daemon spent it. So a
message is stepped over once in its life, the count and the choice are one atomic step
across daemons (two daemons never both take a message's fifth reply), and ``m:a`` holds no
more than the messages of the last window (trimmed by time on every store and choice; the
key lapses with the window), however many a busy chat receives: unlike ``m:c``, whose
newest 256 serve the reverse path's recency.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from gensokyo_idmap.runtime.base import MsgContent, MsgIdCounts, MsgRecord
from gensokyo_idmap.runtime.blocks import INT32_MAX
from gensokyo_idmap.runtime.msgid import MAX_PROBES
from gensokyo_idmap.runtime.redis.connection import RedisRuntime
from gensokyo_idmap.runtime.redis.trips import ScriptTrips

__all__ = ["CHAT_KEPT", "LISTED", "RedisMsgIds", "Stored"]

#: Inbound messages kept per chat for "the newest one with replies left": far more than
#: a send ever steps back over.
CHAT_KEPT: Final = 256
#: Messages the ``m:l`` list of recent messages holds at most (a bound on its memory; those
#: created longer than the TTL ago leave it anyway).
LISTED: Final = 100_000

_LUA_COMMON: Final = r"""
local p = ARGV[1]
local function chat_key(app, kind, target, set)
  return p .. (set or 'm:c:') .. app .. '\0' .. kind .. '\0' .. target
end
local function member(created, vid)
  return string.format('%016x%08x', created, vid)
end
local function rec_of(vid)
  return redis.call('HMGET', p .. 'm:v:' .. vid, 'r', 'a', 'k', 't', 'd', 'c', 'e')
end
"""

_STORE_LUA: Final = _LUA_COMMON + f"local listed = {LISTED}\n" + r"""
-- ARGV: prefix, now ms, ttl ms, int32 max, probes, chat kept, the calling daemon's last
-- position and the end of its reserved block, then per item real id, AppID, chat kind,
-- target, direction, reply window ms (0: none), author vUIN, content kept ('1' / '0'),
-- content, alias key ('': none). Returns the last position used, then per item
-- {virtual id, hit} ({0, 0}: no free id within the probes; nothing written for it); the
-- items after the one that reached the block's end are left out (the caller sends them
-- again with its next block). A hit keeps the author and content of the first store, and
-- its alias key points at it again (as on LMDB).
local now, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
local top, probes, kept = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local pos, lim = tonumber(ARGV[7]), tonumber(ARGV[8])
local last = nil
local function extend(key)
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
end
local function purge(vid, rec)
  local alias = redis.call('HGET', p .. 'm:v:' .. vid, 'x')
  redis.call('DEL', p .. 'm:v:' .. vid)
  if rec[1] and redis.call('GET', p .. 'm:r:' .. rec[1]) == tostring(vid) then
    redis.call('DEL', p .. 'm:r:' .. rec[1])
  end
  if alias and redis.call('GET', p .. 'm:r:' .. alias) == tostring(vid) then
    redis.call('DEL', p .. 'm:r:' .. alias)
  end
  if rec[5] == 'in' then
    redis.call('ZREM', chat_key(rec[2], rec[3], rec[4]), member(tonumber(rec[6]), vid))
  end
  if rec[6] then redis.call('ZREM', p .. 'm:l', member(tonumber(rec[6]), vid)) end
end
local out = {0}
for i = 9, #ARGV, 10 do
  local real, app, kind, target, dir = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local window = tonumber(ARGV[i + 5])
  local author, has_text, text, alias = ARGV[i + 6], ARGV[i + 7], ARGV[i + 8], ARGV[i + 9]
  local rkey = p .. 'm:r:' .. real
  local known = redis.call('GET', rkey)
  local result = nil
  if known then
    local rec = rec_of(known)
    local live = rec[1] == real and tonumber(rec[7]) > now
    if live and app ~= '' and rec[2] ~= app then
      -- another bot's message of this id (rule 10): it lives on, this one gets its own id
    elseif live then
      local vkey = p .. 'm:v:' .. known
      redis.call('HSET', vkey, 'e', now + ttl)
      redis.call('PEXPIRE', vkey, ttl)
      redis.call('PEXPIRE', rkey, ttl)
      local kept = redis.call('HGET', vkey, 'x')
      if kept then redis.call('SET', p .. 'm:r:' .. kept, known, 'PX', ttl) end
      if rec[5] == 'in' then extend(chat_key(rec[2], rec[3], rec[4])) end
      result = {tonumber(known), 1}
    elseif rec[1] == real then
      purge(known, rec)
    end
  end
  if not result then
    local vid = nil
    for _ = 1, probes do
      if pos >= lim then break end
      pos = pos + 1
      local c = (pos - 1) % top + 1
      local held = rec_of(c)
      if not held[1] then vid = c break end
      if tonumber(held[7]) <= now then purge(c, held) vid = c break end
    end
    if vid then
      local vkey = p .. 'm:v:' .. vid
      redis.call('HSET', vkey, 'r', real, 'a', app, 'k', kind, 't', target, 'd', dir,
                 'c', now, 'e', now + ttl, 'u', author)
      if has_text == '1' then redis.call('HSET', vkey, 'm', text) end
      redis.call('PEXPIRE', vkey, ttl)
      redis.call('SET', rkey, vid, 'PX', ttl)
      if alias ~= '' then
        redis.call('HSET', vkey, 'x', alias)
        redis.call('SET', p .. 'm:r:' .. alias, vid, 'PX', ttl)
      end
      local lkey = p .. 'm:l'
      redis.call('ZADD', lkey, 0, member(now, vid))
      redis.call('ZREMRANGEBYLEX', lkey, '-', '(' .. member(math.max(now - ttl, 0), 0))
      if redis.call('ZCARD', lkey) > listed then
        redis.call('ZREMRANGEBYRANK', lkey, 0, -(listed + 1))
      end
      redis.call('PEXPIRE', lkey, ttl)
      if dir == 'in' then
        local ckey = chat_key(app, kind, target)
        redis.call('ZADD', ckey, 0, member(now, vid))
        extend(ckey)
        if redis.call('ZCARD', ckey) > kept then
          redis.call('ZREMRANGEBYRANK', ckey, 0, -(kept + 1))
        end
        if window > 0 then
          local akey = chat_key(app, kind, target, 'm:a:')
          redis.call('ZADD', akey, 0, member(now, vid))
          redis.call('ZREMRANGEBYLEX', akey, '-', '(' .. member(math.max(now - window, 0), 0))
          redis.call('PEXPIRE', akey, window)
        end
      end
      result = {vid, 0}
      last = vid
    elseif pos >= lim then
      break
    else
      result = {0, 0}
    end
  end
  out[#out + 1] = result
end
out[1] = pos
if last then redis.call('SET', p .. 'm:ctr', last) end
return out
"""

_LATEST_LUA: Final = _LUA_COMMON + r"""
-- ARGV: prefix, AppID, kind, target, now ms, since ms, upper bound (exclusive member
-- prefix). Returns {virtual id, record fields...} of the newest live inbound message
-- created in [since, now] below the bound, or nil; members whose record is gone are
-- dropped on the way.
local ckey = chat_key(ARGV[2], ARGV[3], ARGV[4])
local now, since = tonumber(ARGV[5]), tonumber(ARGV[6])
local members = redis.call('ZREVRANGEBYLEX', ckey, '(' .. ARGV[7], '-')
for _, m in ipairs(members) do
  local created = tonumber(string.sub(m, 1, 16), 16)
  if created < since then return nil end
  local vid = tonumber(string.sub(m, 17, 24), 16)
  local rec = rec_of(vid)
  if not rec[1] or tonumber(rec[6]) ~= created then
    redis.call('ZREM', ckey, m)
  elseif tonumber(rec[7]) > now then
    return {vid, rec[1], rec[2], rec[3], rec[4], rec[5], rec[6], rec[7]}
  end
end
return nil
"""

_TAKE_NEWEST_LUA: Final = _LUA_COMMON + r"""
-- ARGV: prefix, AppID, kind, target, now ms, since ms, limit, window ms, the budget's
-- scope (what its b: keys start with after b:). The newest member of the chat's m:a set
-- created in [since, now] whose record lives and that has fewer than limit replies takes
-- one more: returns {real id, replies after it}, or nil. Members out of the window, gone,
-- or spent (here or by a reply elsewhere) leave the set on the way.
local akey = chat_key(ARGV[2], ARGV[3], ARGV[4], 'm:a:')
local now, since = tonumber(ARGV[5]), tonumber(ARGV[6])
local limit, window = tonumber(ARGV[7]), tonumber(ARGV[8])
redis.call('ZREMRANGEBYLEX', akey, '-', '(' .. member(since, 0))
while true do
  local top = redis.call('ZREVRANGEBYLEX', akey, '+', '-', 'LIMIT', 0, 1)[1]
  if not top then return nil end
  local created = tonumber(string.sub(top, 1, 16), 16)
  local vid = tonumber(string.sub(top, 17, 24), 16)
  local real = redis.call('HGET', p .. 'm:v:' .. vid, 'r')
  local rec = real and redis.call('HMGET', p .. 'm:v:' .. vid, 'c', 'e')
  if rec and tonumber(rec[1]) == created and tonumber(rec[2]) > now then
    local bkey = p .. 'b:' .. ARGV[9] .. real
    local used = tonumber(redis.call('GET', bkey) or '0')
    if used < limit then
      used = redis.call('INCR', bkey)
      redis.call('PEXPIRE', bkey, window)
      if used >= limit then redis.call('ZREM', akey, top) end
      return {real, used}
    end
  end
  redis.call('ZREM', akey, top)
end
"""

_START_LUA: Final = r"""
-- ARGV: prefix, now ms, in-flight ms, this daemon's token, then delivery keys. Returns
-- {done, busy}: keys claimed (delivered) until after now, and keys another daemon has in
-- flight until after now; every other key is marked in flight here ("<token>:<until ms>").
local p, now, inflight, token = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local done, busy = {}, {}
for i = 5, #ARGV do
  local key = p .. 'd:' .. ARGV[i]
  local value = redis.call('GET', key)
  local expires = value and tonumber(value)
  local owner, till = nil, nil
  if value and not expires then owner, till = string.match(value, '^(.*):(%d+)$') end
  if expires and expires > now then
    done[#done + 1] = ARGV[i]
  elseif owner and owner ~= token and tonumber(till) > now then
    busy[#busy + 1] = ARGV[i]
  else
    redis.call('SET', key, token .. ':' .. (now + inflight), 'PX', inflight)
  end
end
return {done, busy}
"""

_ABANDON_LUA: Final = r"""
-- ARGV: prefix, token, then delivery keys: drop the in-flight marks this daemon holds.
for i = 3, #ARGV do
  local key = ARGV[1] .. 'd:' .. ARGV[i]
  local value = redis.call('GET', key)
  if value and string.match(value, '^(.*):%d+$') == ARGV[2] then redis.call('DEL', key) end
end
return 0
"""

_RENEW_LUA: Final = r"""
-- ARGV: prefix, now ms, lease ms, this daemon's token, then delivery keys: extend each
-- in-flight mark this daemon still holds; returns the keys it no longer holds (claimed,
-- dropped, lapsed or taken over by another daemon), which stay as they are.
local p, now, lease, token = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local lost = {}
for i = 5, #ARGV do
  local key = p .. 'd:' .. ARGV[i]
  local value = redis.call('GET', key)
  if value and string.match(value, '^(.*):%d+$') == token then
    redis.call('SET', key, token .. ':' .. (now + lease), 'PX', lease)
  else
    lost[#lost + 1] = ARGV[i]
  end
end
return lost
"""

_PUT_CLAIMS_LUA: Final = r"""
-- ARGV: prefix, expiry ms (the value), TTL ms, then delivery keys: claim each.
for i = 4, #ARGV do
  redis.call('SET', ARGV[1] .. 'd:' .. ARGV[i], ARGV[2], 'PX', ARGV[3])
end
return 0
"""

_RECORD_FIELDS: Final = (b"r", b"a", b"k", b"t", b"d", b"c", b"e")
_CONTENT_FIELDS: Final = (b"u", b"m", b"x")


def _member(created_ms: int, virtual_id: int) -> str:
    return f"{created_ms:016x}{virtual_id:08x}"


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _record(virtual_id: int, fields: Sequence[bytes | str | None]) -> MsgRecord | None:
    real, app_id, kind, target, direction, created, expires = fields
    if real is None or created is None or expires is None:
        return None
    return MsgRecord(virtual_id, _text(real), _text(app_id or b""), _text(kind or b""),
                     _text(target or b""), _text(direction or b""), int(created), int(expires))


def _content(fields: Sequence[bytes | str | None]) -> MsgContent | None:
    author, message, alias = fields
    if message is None and alias is None and (author is None or int(author) == 0):
        return None  # nothing known (or a record from before authors were kept)
    return MsgContent(0 if author is None else int(author),
                      None if message is None else _text(message),
                      None if alias is None else _text(alias))


#: The last position a store script used, and (virtual id, hit) per item it stored (None:
#: no free id within the probes).
Stored = tuple[int, list[tuple[int, bool] | None]]


def _stored(raw: list[Any]) -> Stored:
    return int(raw[0]), [None if vid == 0 else (int(vid), bool(hit)) for vid, hit in raw[1:]]


#: real id, AppID, chat kind, target, direction, reply window ms (0: not replied to),
#: author vUIN (0: unknown), content kept (1 / 0), content, alias key ('': none)
StoreItem = tuple[str, str, str, str, str, int, int, int, str, str]


class RedisMsgIds:
    """The Redis commands of message ids, claims and reply counts (the rules on top live in
    :mod:`gensokyo_idmap.runtime.redis.state`). Errors are redis-py's: the caller decides what a
    Redis that does not answer means for it."""

    def __init__(self, runtime: RedisRuntime) -> None:
        self.runtime = runtime
        self._prefix = runtime.prefix
        # the asyncio scripts: those asked for while one round trip is out share the next
        self._trips = ScriptTrips(runtime)
        self._store_sync = runtime.sync.register_script(_STORE_LUA)
        self._latest = runtime.sync.register_script(_LATEST_LUA)
        self._take_newest = runtime.sync.register_script(_TAKE_NEWEST_LUA)
        self._abandon = runtime.sync.register_script(_ABANDON_LUA)

    async def _run_aio(self, lua: str, args: list[str | int]) -> Any:
        """``lua`` on the asyncio client of the running loop (``EVALSHA``, loaded once),
        in one round trip with the other scripts asked for meanwhile."""
        return await self._trips.run(lua, args)

    # --- message ids ----------------------------------------------------------------------

    def _store_args(self, items: Sequence[StoreItem], now_ms: int, ttl_ms: int,
                    block: tuple[int, int]) -> list[str | int]:
        args: list[str | int] = [self._prefix, now_ms, ttl_ms, INT32_MAX, MAX_PROBES,
                                 CHAT_KEPT, *block]
        for item in items:
            args.extend(item)
        return args

    async def store(self, items: Sequence[StoreItem], now_ms: int, ttl_ms: int,
                    block: tuple[int, int]) -> Stored:
        """(virtual id, whether it was a hit) per item, in one atomic script; None for an
        item no free id was found for. ``block`` is (the last position used, the last one
        reserved): the answer says where it stopped, and leaves out the items after the one
        the block ran out at."""
        return _stored(await self._run_aio(_STORE_LUA, self._store_args(items, now_ms,
                                                                         ttl_ms, block)))

    def store_sync(self, items: Sequence[StoreItem], now_ms: int, ttl_ms: int,
                   block: tuple[int, int]) -> Stored:
        return _stored(self._store_sync(args=self._store_args(items, now_ms, ttl_ms, block)))

    def record(self, virtual_id: int) -> MsgRecord | None:
        fields = self.runtime.sync.hmget(self.runtime.key("m:v", virtual_id), _RECORD_FIELDS)
        return _record(virtual_id, fields)

    def record_and_content(self, virtual_id: int
                           ) -> tuple[MsgRecord | None, MsgContent | None]:
        """The record of ``virtual_id`` and the author and content kept with it (one
        ``HMGET``)."""
        fields = self.runtime.sync.hmget(self.runtime.key("m:v", virtual_id),
                                         _RECORD_FIELDS + _CONTENT_FIELDS)
        record = _record(virtual_id, fields[:len(_RECORD_FIELDS)])
        return record, None if record is None else _content(fields[len(_RECORD_FIELDS):])

    def virtual_of(self, real_id: str) -> int | None:
        raw = self.runtime.sync.get(self._prefix + "m:r:" + real_id)
        return None if raw is None else int(raw)

    def latest_inbound(self, app_id: str, chat_kind: str, target: str, now_ms: int,
                       since_ms: int, before: MsgRecord | None = None) -> MsgRecord | None:
        bound = (f"{now_ms + 1:016x}" if before is None
                 else _member(before.created_ms, before.virtual_id))
        found = self._latest(args=[self._prefix, app_id, chat_kind, target, now_ms,
                                   max(since_ms, 0), bound])
        return None if not found else _record(int(found[0]), found[1:])

    def recent(self, before: tuple[int, int] | None, now_ms: int, limit: int,
               scanned: int) -> list[tuple[MsgRecord, MsgContent | None]]:
        """:meth:`~gensokyo_idmap.runtime.base.MsgIdReader.recent` on ``m:l``, with the
        content kept: members read a page at a time, their records in one pipeline each."""
        found: list[tuple[MsgRecord, MsgContent | None]] = []
        bound = "+" if before is None else "(" + _member(*before)
        sync = self.runtime.sync
        while len(found) < limit and scanned > 0:
            want = min(max(limit - len(found), 16), scanned)
            members = [_text(m) for m in sync.zrevrangebylex(
                self._prefix + "m:l", bound, "-", start=0, num=want)]
            if not members:
                break
            scanned -= len(members)
            with sync.pipeline(transaction=False) as pipe:
                for m in members:
                    pipe.hmget(self.runtime.key("m:v", int(m[16:24], 16)),
                               _RECORD_FIELDS + _CONTENT_FIELDS)
                rows = pipe.execute()
            for m, fields in zip(members, rows, strict=True):
                record = _record(int(m[16:24], 16), fields[:len(_RECORD_FIELDS)])
                if record is not None and record.created_ms == int(m[:16], 16) \
                        and record.expires_ms > now_ms and len(found) < limit:
                    found.append((record, _content(fields[len(_RECORD_FIELDS):])))
            bound = "(" + members[-1]
            if len(members) < want:
                break
        return found

    def counts(self) -> MsgIdCounts:
        counter = self.runtime.sync.get(self._prefix + "m:ctr")
        live = sum(1 for _ in self.runtime.scan("m:v:*"))
        return MsgIdCounts(live_or_unswept=live, counter=0 if counter is None else int(counter))

    # --- delivery claims ------------------------------------------------------------------

    def _claim_key(self, key: str) -> str:
        return self._prefix + "d:" + key

    async def claims_alive(self, keys: Sequence[str], now_ms: int) -> set[str]:
        """Those of ``keys`` claimed until after ``now_ms`` (one ``MGET``)."""
        if not keys:
            return set()
        client = await self.runtime.aio()
        values = await client.mget([self._claim_key(key) for key in keys])
        return {key for key, value in zip(keys, values, strict=True)
                if value is not None and value.isdigit() and int(value) > now_ms}

    async def start_claims(self, keys: Sequence[str], now_ms: int, in_flight_ms: int,
                           token: str) -> tuple[set[str], set[str]]:
        """(claimed, in flight on another daemon) of ``keys``; the others are marked in
        flight under ``token`` for ``in_flight_ms`` (one atomic script, awaited: it is on
        the path of every event, and a blocking round trip there stalled the loop)."""
        if not keys:
            return set(), set()
        done, busy = await self._run_aio(_START_LUA, [self._prefix, now_ms,
                                                      max(in_flight_ms, 1), token, *keys])
        return {_text(key) for key in done}, {_text(key) for key in busy}

    def abandon_claims(self, keys: Sequence[str], token: str) -> None:
        """Drop the in-flight marks under ``token`` of ``keys`` (deliveries that failed)."""
        if keys:
            self._abandon(args=[self._prefix, token, *keys])

    async def renew_claims(self, keys: Sequence[str], now_ms: int, lease_ms: int,
                           token: str) -> set[str]:
        """Extend the in-flight marks under ``token`` of ``keys`` to ``lease_ms`` from now
        (one atomic script, sharing its round trip); those of ``keys`` no longer marked
        under ``token``, left as they are."""
        if not keys:
            return set()
        lost = await self._run_aio(_RENEW_LUA, [self._prefix, now_ms, max(lease_ms, 1),
                                                token, *keys])
        return {_text(key) for key in lost}

    async def put_claims(self, keys: Sequence[str], expires_ms: int, ttl_ms: int) -> None:
        """Claim each of ``keys`` until ``expires_ms`` (Redis drops it after ``ttl_ms``):
        one script, which costs redis-py less than a pipeline of a ``SET`` each."""
        if keys:
            await self._run_aio(_PUT_CLAIMS_LUA, [self._prefix, expires_ms, max(ttl_ms, 1),
                                                  *keys])

    # --- reply counts ---------------------------------------------------------------------

    def _budget_key(self, reference: str) -> str:
        return self._prefix + "b:" + reference

    def replies_used(self, reference: str) -> int:
        raw = self.runtime.sync.get(self._budget_key(reference))
        return 0 if raw is None else int(raw)

    def take_reply(self, reference: str, window_ms: int) -> int:
        """Count one more reply to ``reference``; the count after it."""
        with self.runtime.sync.pipeline(transaction=True) as pipe:
            pipe.incr(self._budget_key(reference))
            pipe.pexpire(self._budget_key(reference), max(window_ms, 1))
            used, _ = pipe.execute()
        return int(used)

    def take_newest(self, app_id: str, chat_kind: str, target: str, now_ms: int,
                    since_ms: int, limit: int, window_ms: int, scope: str = ""
                    ) -> tuple[str, int] | None:
        """The newest live message of a chat created in [``since_ms``, ``now_ms``] with
        fewer than ``limit`` replies, counted one more (its count lapses ``window_ms``
        after): (its real id, the count after this reply), or None. One atomic script.
        ``scope``: what the counts' keys start with (:meth:`replies_used`'s references)."""
        found = self._take_newest(args=[self._prefix, app_id, chat_kind, target, now_ms,
                                        max(since_ms, 0), limit, max(window_ms, 1), scope])
        return None if not found else (_text(found[0]), int(found[1]))

    def set_replies(self, reference: str, used: int, window_ms: int) -> None:
        self.runtime.sync.set(self._budget_key(reference), used, px=max(window_ms, 1))
