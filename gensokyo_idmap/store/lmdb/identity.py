"""openid-map.db on LMDB: the embedded identity store.

One env file, named databases as docs/stores.md lists them, plus ``vuin_alias`` (old vUIN → the
vUIN it now resolves to, written by rebind and by legacy migration) and ``seen_by_scene``
(scene → the vUINs last seen there, dupsort: ``last_seen`` turned round, written with it in
the same transaction, so that the chats seen and their members are read a page at a time
and counted without a walk of the graph; schema_version 2 added it). Durability:
``sync=True`` and ``metasync=True``: a commit returns after fsync. Opening, schema
versions, reads, group commit and map growth are the shared :class:`LmdbEnv` machinery.
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, Final, TypeVar

import lmdb

from gensokyo_idmap.identity import MAX_SCENE_BYTES, MAX_VUIN
from gensokyo_idmap.recent_cache import RecentCache
from gensokyo_idmap.store.base import (
    IdentityWriter,
    LastSeen,
    LegacyCounts,
    LegacyWriter,
    TableCounts,
)
from gensokyo_idmap.store.lmdb.codec import decode_u64, decode_value, encode_u64, encode_value
from gensokyo_idmap.store.lmdb.env import CounterView, LmdbEnv, Table

__all__ = [
    "DEFAULT_MAP_SIZE", "RECOVERY", "SCHEMA_VERSION", "TABLES", "UPGRADES", "LmdbIdentityStore",
]


#: The schema this code writes. Older stores are upgraded by UPGRADES, newer ones refused.
SCHEMA_VERSION: Final = 2
DEFAULT_MAP_SIZE: Final = 64 * 1024 * 1024
#: What to do when openid-map.db is refused (missing, emptied, damaged): a new one would
#: hand vUIN 1, 2, ... to other people than the ones frameworks know by them.
RECOVERY: Final = (
    "stop the daemon; then restore a backup (copy it to {path} and run "
    "`gensokyo-idmap --data-dir {dir} verify`), or re-migrate from the old idmap.db "
    "(`gensokyo-idmap --data-dir {dir} --app-id <AppID> recover identities --from-legacy "
    "[PATH]`). A damaged file can be moved aside first; to start a new, empty identity "
    "graph, use a new data dir")

#: The tables of openid-map.db (ops opens the file with them to back it up or verify it).
TABLES: Final = (
    Table(b"meta", "meta"),
    Table(b"identity_to_vuin", "identity_to_vuin"),
    Table(b"vuin_to_identity", "vuin_to_identity", dupsort=True),
    Table(b"last_seen", "last_seen"),
    Table(b"vuin_alias", "vuin_alias"),
    Table(b"seen_by_scene", "seen_by_scene", dupsort=True),
    Table(b"config", "config"),
    Table(b"UserInfo", "user_info"),
)
_META_COUNTER: Final = b"vuin_counter"
T = TypeVar("T")
#: Entries each probe() cache holds at most (those not used lately are forgotten first).
_PROBE_CACHE: Final = 65_536
_U64_FROM: Final = struct.Struct(">Q").unpack
#: encode_u64 without the call around it: the writer packs five vUINs per new identity.
_U64: Final = struct.Struct(">Q").pack
#: cbor's double (major type 7, 0xfb) as cbor2 writes every finite float.
_CBOR_DOUBLE: Final = struct.Struct(">Bd").pack


def _last_seen_prefix(identity: bytes) -> bytes:
    """The first bytes of the cbor of ``[identity, since]``: array(2), then the text header."""
    return _prefix_head(len(identity)) + identity


def _prefix_head(size: int) -> bytes:
    """:func:`_last_seen_prefix` up to the identity's bytes, for an identity of ``size``."""
    if size < 24:
        return bytes((0x82, 0x60 + size))
    if size < 0x100:
        return bytes((0x82, 0x78, size))
    return b"\x82\x79" + size.to_bytes(2, "big")


def _names(seen: bytes, identity: bytes) -> bool:
    """Whether the last_seen value ``seen`` names ``identity`` (starts with
    :func:`_last_seen_prefix` of it), compared in place: no prefix is built."""
    head = _prefix_head(len(identity))
    return seen.startswith(head) and seen.startswith(identity, len(head))


def _last_seen_value(identity: str, since: float) -> bytes:
    """``encode_value([identity, since])``, byte for byte, built by hand for the usual
    finite float ``since`` (a new identity writes one; cbor2 costs as much as the three
    puts around it); anything else goes through cbor2."""
    return _last_seen_bytes(identity.encode("utf-8"), since)


def _last_seen_bytes(identity: bytes, since: float) -> bytes:
    """:func:`_last_seen_value` of an identity already encoded."""
    if type(since) is float and math.isfinite(since):
        return _last_seen_prefix(identity) + _CBOR_DOUBLE(0xFB, since)
    return encode_value([identity.decode("utf-8"), since])


def _scene_bytes(scene: str) -> bytes:
    raw = scene.encode("utf-8")
    if len(raw) > MAX_SCENE_BYTES:
        raise ValueError(f"scene name longer than {MAX_SCENE_BYTES} bytes")
    return raw


def _scene_key(vuin: int, scene: str) -> bytes:
    return _U64(vuin) + _scene_bytes(scene)


#: :meth:`LmdbView.unused_from` once a bulk loader holds the tables: past every vUIN, so
#: allocation asks number by number (what the loader writes is not followed).
_UNTRACKED: Final = MAX_VUIN + 1


class LmdbView(CounterView, IdentityWriter, LegacyWriter):
    """Reads (and, in a write transaction, writes) of one LMDB transaction."""

    __slots__ = ("_unused_from",)
    COUNTER_KEY = _META_COUNTER

    def __init__(self, txn: lmdb.Transaction[bytes], tables: Any) -> None:
        super().__init__(txn, tables)
        self._unused_from: int | None = None  # not read yet in this transaction

    def bulk_handles(self) -> tuple[lmdb.Transaction[bytes], Any]:
        """(transaction, table handles) for bulk loaders (legacy migration) that write
        millions of entries and cannot afford a method call per put; they must keep the
        tables' invariants themselves."""
        self._unused_from = _UNTRACKED
        return self._txn, self._t

    def unused_from(self) -> int:
        """One past the highest vUIN of the identity sets and the aliases: both tables are
        keyed by the big-endian vUIN, so that is their last keys, read once per
        transaction and then moved up by this view's own writes."""
        if self._unused_from is None:
            self._unused_from = 1 + max(self._last_vuin(self._t.vuin_to_identity),
                                        self._last_vuin(self._t.vuin_alias))
        return self._unused_from

    def _last_vuin(self, db: Any) -> int:
        cur = self._txn.cursor(db)
        return _U64_FROM(cur.key())[0] if cur.last() else 0

    def _in_use(self, vuin: int) -> None:
        """``vuin`` has an identity or an alias now."""
        unused = self._unused_from
        if unused is not None and vuin >= unused:
            self._unused_from = vuin + 1

    # reads
    def vuin_of(self, key: str) -> int | None:
        raw = self._txn.get(key.encode("utf-8"), db=self._t.identity_to_vuin)
        return None if raw is None else _U64_FROM(raw)[0]

    def identities_of(self, vuin: int) -> list[str]:
        cur = self._txn.cursor(self._t.vuin_to_identity)
        if not cur.set_key(encode_u64(vuin)):
            return []
        return [bytes(v).decode("utf-8") for v in cur.iternext_dup()]

    def has_identities(self, vuin: int) -> bool:
        return self._txn.get(_U64(vuin), db=self._t.vuin_to_identity) is not None

    def alias_target(self, vuin: int) -> int | None:
        raw = self._txn.get(_U64(vuin), db=self._t.vuin_alias)
        return None if raw is None else _U64_FROM(raw)[0]

    def aliases_to(self, vuin: int) -> list[int]:
        target = encode_u64(vuin)
        cur = self._txn.cursor(self._t.vuin_alias)
        return [decode_u64(k) for k, v in cur if v == target]

    def last_seen(self, vuin: int, scene: str) -> LastSeen | None:
        raw = self._txn.get(_scene_key(vuin, scene), db=self._t.last_seen)
        if raw is None:
            return None
        identity, since = decode_value(raw)
        return LastSeen(identity=identity, since=since)

    def last_seen_all(self, vuin: int) -> list[tuple[str, LastSeen]]:
        prefix = encode_u64(vuin)
        cur = self._txn.cursor(self._t.last_seen)
        found: list[tuple[str, LastSeen]] = []
        if cur.set_range(prefix):
            for k, v in cur:
                if not k.startswith(prefix):
                    break
                identity, since = decode_value(v)
                found.append((bytes(k[8:]).decode("utf-8"), LastSeen(identity, since)))
        return found

    def vuin_counter(self) -> int:
        return self._get_counter()

    def iter_identities(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        cur = self._txn.cursor(self._t.identity_to_vuin)
        start = prefix.encode("utf-8")
        if start and not cur.set_range(start):
            return
        for k, v in cur:
            if start and not k.startswith(start):
                return
            yield bytes(k).decode("utf-8"), decode_u64(v)

    def iter_vuin_sets(self) -> Iterator[tuple[int, str]]:
        for k, v in self._txn.cursor(self._t.vuin_to_identity):
            yield decode_u64(k), bytes(v).decode("utf-8")

    def iter_aliases(self) -> Iterator[tuple[int, int]]:
        for k, v in self._txn.cursor(self._t.vuin_alias):
            yield decode_u64(k), decode_u64(v)

    def vuins_below(self, below: int | None, limit: int) -> list[int]:
        cur = self._txn.cursor(self._t.vuin_to_identity)
        found: list[int] = []
        if below is None:
            placed = cur.last()
        elif cur.set_range(_U64(below)):
            placed = cur.prev_nodup()  # the first key at or above ``below``: step below it
        else:
            placed = cur.last()  # nothing at or above: the highest is below
        while placed and len(found) < limit:
            found.append(_U64_FROM(cur.key())[0])
            placed = cur.prev_nodup()
        return found

    def scenes_after(self, prefix: str, after: str | None, limit: int) -> list[tuple[str, int]]:
        cur = self._txn.cursor(self._t.seen_by_scene)
        start = prefix.encode("utf-8")
        found: list[tuple[str, int]] = []
        if after is not None and after.encode("utf-8") >= start:
            placed = cur.set_range(after.encode("utf-8"))
            if placed and cur.key() == after.encode("utf-8"):
                placed = cur.next_nodup()
        else:
            placed = cur.set_range(start)
        while placed and len(found) < limit:
            key = bytes(cur.key())
            if not key.startswith(start):
                break
            found.append((key.decode("utf-8"), cur.count()))
            placed = cur.next_nodup()
        return found

    def seen_in(self, scene: str, above: int | None, limit: int) -> list[tuple[int, LastSeen]]:
        cur = self._txn.cursor(self._t.seen_by_scene)
        raw_scene = _scene_bytes(scene)
        if above is None:
            placed = cur.set_key(raw_scene)
        else:
            placed = cur.set_range_dup(raw_scene, _U64(above))
            if placed and cur.value() == _U64(above):
                placed = cur.next_dup()
        found: list[tuple[int, LastSeen]] = []
        while placed and len(found) < limit:
            vuin = _U64_FROM(cur.value())[0]
            seen = self.last_seen(vuin, scene)
            if seen is not None:
                found.append((vuin, seen))
            placed = cur.next_dup()
        return found

    def counts(self) -> TableCounts:
        def entries(db: Any) -> int:
            return int(self._txn.stat(db)["entries"])

        vuins = 0
        cur = self._txn.cursor(self._t.vuin_to_identity)
        if cur.first():
            vuins = 1
            while cur.next_nodup():
                vuins += 1
        return TableCounts(
            identities=entries(self._t.identity_to_vuin),
            vuins=vuins,
            last_seen=entries(self._t.last_seen),
            aliases=entries(self._t.vuin_alias),
        )

    def legacy_counts(self) -> LegacyCounts:
        return LegacyCounts(config=int(self._txn.stat(self._t.config)["entries"]),
                            user_info=int(self._txn.stat(self._t.user_info)["entries"]))

    # writes
    def set_vuin(self, key: str, vuin: int) -> None:
        self._txn.put(key.encode("utf-8"), _U64(vuin), db=self._t.identity_to_vuin)

    def add_identity(self, vuin: int, key: str) -> None:
        self._txn.put(_U64(vuin), key.encode("utf-8"), db=self._t.vuin_to_identity)
        self._in_use(vuin)

    def remove_identity(self, vuin: int, key: str) -> None:
        self._txn.delete(encode_u64(vuin), key.encode("utf-8"), db=self._t.vuin_to_identity)

    def set_alias(self, old: int, new: int) -> None:
        self._txn.put(encode_u64(old), encode_u64(new), db=self._t.vuin_alias)
        self._in_use(old)

    def set_last_seen(self, vuin: int, scene: str, seen: LastSeen) -> None:
        raw_scene = _scene_bytes(scene)
        packed = _U64(vuin)
        self._txn.put(packed + raw_scene, _last_seen_value(seen.identity, seen.since),
                      db=self._t.last_seen)
        self._txn.put(raw_scene, packed, db=self._t.seen_by_scene)  # once: dupsort keeps a pair

    def add_person(self, key: str, vuin: int, scene: str | None, since: float) -> None:
        """:meth:`IdentityWriter.add_person` with the key encoded and the vUIN packed once."""
        raw = key.encode("utf-8")
        packed = _U64(vuin)
        put, tables = self._txn.put, self._t
        seen = None if scene is None else packed + _scene_bytes(scene)  # before any write
        put(raw, packed, db=tables.identity_to_vuin)
        put(packed, raw, db=tables.vuin_to_identity)
        unused = self._unused_from
        if unused is not None and vuin >= unused:
            self._unused_from = vuin + 1  # _in_use, inline: once per new person
        if seen is not None:
            put(seen, _last_seen_bytes(raw, since), db=tables.last_seen)
            put(seen[8:], packed, db=tables.seen_by_scene)

    def delete_last_seen(self, vuin: int, scene: str) -> None:
        raw_scene = _scene_bytes(scene)
        self._txn.delete(_U64(vuin) + raw_scene, db=self._t.last_seen)
        self._txn.delete(raw_scene, _U64(vuin), db=self._t.seen_by_scene)

    def set_vuin_counter(self, value: int) -> None:
        self._set_counter(value)

    # meta and the legacy-compatible tables
    def get_meta(self, name: str) -> Any:
        raw = self._txn.get(name.encode("utf-8"), db=self._t.meta)
        return None if raw is None else decode_value(raw)

    def set_meta(self, name: str, value: Any) -> None:
        self._txn.put(name.encode("utf-8"), encode_value(value), db=self._t.meta)

    def put_config(self, key: bytes, value: bytes) -> None:
        """``config``: ``<section>:<key>`` → text, byte for byte as the old bucket held it."""
        self._txn.put(key, value, db=self._t.config)

    def put_user_info(self, key: bytes, value: bytes) -> None:
        """``UserInfo``: the old bucket's keys and values, byte for byte."""
        self._txn.put(key, value, db=self._t.user_info)

    def iter_config(self) -> Iterator[tuple[bytes, bytes]]:
        for k, v in self._txn.cursor(self._t.config):
            yield bytes(k), bytes(v)

    def get_config(self, key: bytes) -> bytes | None:
        raw = self._txn.get(key, db=self._t.config)
        return None if raw is None else bytes(raw)

    def delete_config(self, key: bytes) -> bool:
        return bool(self._txn.delete(key, db=self._t.config))

    def iter_user_info(self) -> Iterator[tuple[bytes, bytes]]:
        for k, v in self._txn.cursor(self._t.user_info):
            yield bytes(k), bytes(v)


# Schema upgrades: UPGRADES[v] turns a version-v store into version v+1, inside the
# transaction that opens it. Version 0 is a store written without a schema_version: only
# identity_to_vuin is trusted; the reverse sets and the counter are rebuilt from it.
def _upgrade_0_to_1(view: LmdbView) -> None:
    highest = view.vuin_counter()
    for key, vuin in list(view.iter_identities()):
        view.add_identity(vuin, key)
        highest = max(highest, vuin)
    for old, new in list(view.iter_aliases()):
        highest = max(highest, old, new)
    view.set_vuin_counter(highest)


def _upgrade_1_to_2(view: LmdbView) -> None:
    """``seen_by_scene``, the scene index of ``last_seen``, built from it (one walk, once)."""
    txn, tables = view._txn, view._t
    for key in txn.cursor(tables.last_seen).iternext(keys=True, values=False):
        txn.put(bytes(key[8:]), bytes(key[:8]), db=tables.seen_by_scene)


UPGRADES: dict[int, Callable[[LmdbView], None]] = {0: _upgrade_0_to_1, 1: _upgrade_1_to_2}


def _is_empty(txn: lmdb.Transaction[bytes], tables: Any) -> bool:
    return int(txn.stat(tables.identity_to_vuin)["entries"]) == 0


class LmdbIdentityStore(LmdbEnv[LmdbView]):
    """openid-map.db. Open one per process and path (LMDB forbids two in one process).

    Reads, group-committed writes (durable on return), ``transact`` and ``close`` come from
    :class:`LmdbEnv`; this class adds the tables, the schema history and the probe.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        map_size: int = DEFAULT_MAP_SIZE,
        schema_version: int = SCHEMA_VERSION,
        upgrades: dict[int, Callable[[LmdbView], None]] | None = None,
        readonly: bool = False,
        recreate: bool = False,
    ) -> None:
        """``recreate``: create the file even though this data dir held one (migration and
        recovery do so on purpose; anything else is refused, see :class:`LmdbEnv`)."""
        super().__init__(
            path,
            tables=TABLES,
            make_view=LmdbView,
            is_empty=_is_empty,
            durable=True,
            map_size=map_size,
            schema_version=schema_version,
            upgrades=UPGRADES if upgrades is None else upgrades,
            readonly=readonly,
            recovery=RECOVERY,
            recreate=recreate,
        )
        self._forward = self.tables.identity_to_vuin  # the two handles probe() needs
        self._last_seen = self.tables.last_seen
        # The answers read from one snapshot, by transaction id: key → (scene, vUIN, last
        # seen there). A later read whose snapshot has the same id sees exactly the same
        # data (LMDB numbers every commit, of any process), so an answer stands without
        # touching the tables; one read from an older snapshot never does, so the answers
        # go as soon as a read sees a newer one (an identity or last_seen committed): what
        # they hold is what was asked since the last commit, not since a flood of new
        # people began. One entry per person, the scene last asked about (a person talks
        # in one chat at a time; an entry per (person, scene) held a copy of each scene's
        # name for every person in it).
        self._answers: tuple[int, RecentCache[str, tuple[str | None, int, bool]]] = (
            -1, RecentCache(_PROBE_CACHE))

    def probe(self, key: str, scene: str | None) -> tuple[int | None, bool]:
        """The vUIN of ``key``, and whether ``key`` is already last seen in ``scene``.

        The hot path of resolve: a known identity in a known scene costs exactly this. The
        last_seen value is compared as bytes (its cbor starts with the identity), which
        saves decoding it; and while nothing is committed to the file, a question asked
        before is answered from memory (the snapshot's transaction id proves the data is
        the same). The key's and the scene's bytes are encoded each time: a cache of them
        cost more memory per person than the encoding costs time.
        """
        self._check_mapped()
        self.read_lock.acquire()
        try:
            txn = self.env.begin()
        except BaseException:  # noqa: BLE001 - the slow path below raises what is real
            self.read_lock.release()
            txn = self.begin_read()  # the slow path: adopts a map grown elsewhere, or raises
        try:
            snapshot = txn.id()
            held_at, answers_held = self._answers
            answers: RecentCache[str, tuple[str | None, int, bool]] | None = answers_held
            if snapshot != held_at:
                if snapshot > held_at:  # something was committed: every answer is stale
                    answers = RecentCache(_PROBE_CACHE)
                    self._answers = (snapshot, answers)
                else:  # another thread moved on to a newer snapshot meanwhile
                    answers = None
            answer = None if answers is None else answers.young.get(key) or answers.get(key)
            if answer is not None and answer[0] == scene:
                return answer[1], answer[2]  # nothing was committed since: the same data
            encoded = key.encode("utf-8")
            raw = txn.get(encoded, db=self._forward)
            if raw is None:
                # Nobody has this key: the caller goes on to write it, after which the
                # snapshot differs anyway. Nothing is kept for it (a new person per event
                # would fill the cache with one-off entries).
                return (None, False)
            seen = (None if scene is None
                    else txn.get(raw + scene.encode("utf-8"), db=self._last_seen))
        finally:
            txn.abort()
            self.read_lock.release()
        vuin, here = _U64_FROM(raw)[0], seen is not None and _names(seen, encoded)
        if answers is not None:
            if answer is None:
                answers.put(key, (scene, vuin, here))
            else:  # renewed by the get: in young
                answers.young[key] = (scene, vuin, here)
        return vuin, here

    # LegacyTables: the old buckets are tables of this same file, read and written in the
    # same transactions as the graph (the view serves both).
    def read_legacy(self) -> AbstractContextManager[LmdbView]:
        return self.read()

    def write_legacy(self, fn: Callable[[LmdbView], T]) -> Awaitable[T]:
        return self.write(fn)
