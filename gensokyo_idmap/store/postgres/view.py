"""Reads and writes of one PostgreSQL transaction over the identity graph's tables.

:class:`PgView` is what a write function (and ``with store.read()``) gets: the
:class:`~gensokyo_idmap.store.base.IdentityWriter` of :mod:`.identity`'s store. Writes
are held back (:mod:`.writes`) and sent before the next read of the server and before
commit; what the transaction read is remembered and kept true by its own writes, so a batch
of allocations asks the server a few times, not a few times per identity. Scene names are
held to 400 bytes by the database (and checked by the graph before any write).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, LiteralString

import psycopg
from psycopg.types.json import Jsonb

from gensokyo_idmap.identity import MAX_VUIN
from gensokyo_idmap.store.base import (
    IdentityWriter,
    LastSeen,
    LegacyCounts,
    LegacyWriter,
    TableCounts,
)
from gensokyo_idmap.store.postgres.writes import PendingWrites

__all__ = ["Conn", "PgView", "keys_looked_up"]

Conn = psycopg.Connection[tuple[Any, ...]]
_COUNTER: Final = "vuin_counter"
#: Rows a server-side cursor of a read fetches per round trip.
_ITER_ROWS: Final = 2000
#: The vUINs in use above a floor: those with an identity set, and aliases with targets.
_TAIL_ABOVE: Final = ("SELECT DISTINCT vuin, NULL::bigint FROM vuin_to_identity WHERE vuin > %s "
                      "UNION ALL SELECT old, new FROM vuin_alias WHERE old > %s")
_STORED_COUNTER: Final = ("coalesce((SELECT (value #>> '{}')::bigint FROM meta "
                          "WHERE name = 'vuin_counter'), 0)")
#: :data:`_TAIL_ABOVE` over the counter as stored (read in the same snapshot).
_TAIL_ABOVE_STORED: Final = _TAIL_ABOVE.replace("%s", _STORED_COUNTER)
_cursor_ids = itertools.count(1)
#: The scenes from a start (itself too unless strict) below an end (None: none), each with
#: its count: a recursive skip scan, one index probe per scene (a loose index scan).
_SCENES_AFTER: Final = """
WITH RECURSIVE bounds AS (SELECT %s::text COLLATE "C" AS start, %s::boolean AS strict,
                                 %s::text COLLATE "C" AS stop),
scenes(scene) AS (
    (SELECT scene FROM last_seen, bounds
      WHERE (scene > start OR (scene = start AND NOT strict))
        AND (stop IS NULL OR scene < stop)
      ORDER BY scene LIMIT 1)
    UNION ALL
    SELECT (SELECT l.scene FROM last_seen l, bounds
             WHERE l.scene > s.scene AND (stop IS NULL OR l.scene < stop)
             ORDER BY l.scene LIMIT 1)
      FROM scenes s WHERE s.scene IS NOT NULL
)
SELECT scene, (SELECT count(*) FROM last_seen l WHERE l.scene = scenes.scene)
  FROM scenes WHERE scene IS NOT NULL LIMIT %s"""


def _prefix_end(prefix: str) -> str | None:
    """The least text above every text that starts with ``prefix`` (None: no bound): its
    last character one up, in the byte order of COLLATE "C" (UTF-8's order is code point
    order)."""
    while prefix and ord(prefix[-1]) >= 0x10FFFF:
        prefix = prefix[:-1]
    return prefix[:-1] + chr(ord(prefix[-1]) + 1) if prefix else None


@dataclass(slots=True)
class _Tail:
    """The vUINs above ``floor`` (the counter when first asked) that have an identity set or
    are an alias, as one transaction read them and changed them since."""

    floor: int
    sets: set[int] = field(default_factory=set)
    aliases: dict[int, int] = field(default_factory=dict)
    uncertain: set[int] = field(default_factory=set)  # sets it removed from: ask again

    @classmethod
    def read(cls, floor: int, rows: list[tuple[Any, ...]]) -> _Tail:
        """From the rows of :data:`_TAIL_ABOVE`: (vUIN, None) or (alias, its target)."""
        tail = cls(floor)
        for number, target in rows:
            if target is None:
                tail.sets.add(int(number))
            else:
                tail.aliases[int(number)] = int(target)
        return tail


class PgView(IdentityWriter, LegacyWriter):
    """Reads (and, in a write transaction, writes) of one PostgreSQL transaction.

    ``streaming`` views (reads) walk tables through server-side cursors, so a listing of
    millions of keys is not held in memory and other reads may run while it is walked;
    write views run in pipeline mode, which server-side cursors do not support, and fetch
    listings whole (writers list only what they are about to change).
    """

    __slots__ = ("_conn", "_counter", "_counter_dirty", "_pending", "_prepare", "_streaming",
                 "_tail", "_vuins")

    def __init__(self, conn: Conn, *, streaming: bool) -> None:
        self._conn = conn
        self._streaming = streaming
        # no server-side prepared statements in pipeline mode: after an aborted pipeline
        # (a conflict) psycopg would believe in statements the server never prepared
        self._prepare: bool | None = None if streaming else False
        self._counter: int | None = None
        self._counter_dirty = False
        # What this transaction read, kept true by its own writes, so a batch asks the
        # server once: key → vUIN (None: no such key), and what is in use above the counter
        self._vuins: dict[str, int | None] = {}
        self._tail: _Tail | None = None
        self._pending = PendingWrites()  # graph writes not sent yet (.writes)

    def _execute(self, query: LiteralString, params: Sequence[Any]) -> psycopg.Cursor[Any]:
        if self._pending:
            self._pending.send(self._conn, self._prepare)  # reads see the writes so far
        return self._conn.execute(query, params, prepare=self._prepare)

    def _one(self, query: LiteralString, params: Sequence[Any]) -> tuple[Any, ...] | None:
        return self._execute(query, params).fetchone()

    def _all(self, query: LiteralString, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._execute(query, params).fetchall()

    def _rows(self, query: LiteralString, params: Sequence[Any] = ()) -> Iterator[tuple[Any, ...]]:
        if not self._streaming:
            yield from self._all(query, params)
            return
        with self._conn.cursor(name=f"gsk_walk_{next(_cursor_ids)}") as cursor:
            cursor.itersize = _ITER_ROWS
            cursor.execute(query, params)
            yield from cursor

    def _write(self, query: LiteralString, params: Sequence[Any]) -> None:
        self._execute(query, params)

    # reads
    def prefetch(self, keys: Sequence[str]) -> None:
        """Read the vUINs of ``keys`` (the keys a batch will look up) and, since some are
        likely new, the counter and what is in use above it: three statements sent
        together, answered in one round trip (pipeline mode)."""
        wanted = [key for key in dict.fromkeys(keys) if key not in self._vuins]
        if not wanted:
            return
        by_key = self._execute("SELECT key, vuin FROM identity_to_vuin WHERE key = ANY(%s)",
                               (wanted,))
        allocating = self._counter is None and self._tail is None
        if allocating:
            counter = self._execute("SELECT " + _STORED_COUNTER, ())
            tail = self._execute(_TAIL_ABOVE_STORED, ())
        found = dict(by_key.fetchall())
        for key in wanted:
            vuin = found.get(key)
            self._vuins[key] = None if vuin is None else int(vuin)
        if allocating:
            row = counter.fetchone()
            self._counter = int(row[0]) if row else 0
            self._tail = _Tail.read(self._counter, tail.fetchall())

    def vuin_of(self, key: str) -> int | None:
        try:
            return self._vuins[key]
        except KeyError:
            pass
        row = self._one("SELECT vuin FROM identity_to_vuin WHERE key = %s", (key,))
        found = self._vuins[key] = None if row is None else int(row[0])
        return found

    def identities_of(self, vuin: int) -> list[str]:
        return [str(r[0]) for r in self._all(
            "SELECT key FROM vuin_to_identity WHERE vuin = %s ORDER BY key", (vuin,))]

    def _tail_over(self, vuin: int) -> _Tail | None:
        """What is in use above the counter, if ``vuin`` is up there and known for sure.

        Allocation asks "in use?" of the numbers above the counter, one by one; they are
        nearly always free, so one read of everything above the counter (an operator's
        binds to high numbers, if any) answers the whole batch.
        """
        tail = self._tail
        if tail is None:
            floor = self.vuin_counter()
            if vuin <= floor:
                return None
            tail = self._tail = _Tail.read(floor, self._all(_TAIL_ABOVE, (floor, floor)))
        return tail if vuin > tail.floor and vuin not in tail.uncertain else None

    def has_identities(self, vuin: int) -> bool:
        tail = self._tail_over(vuin)
        if tail is not None:
            return vuin in tail.sets
        row = self._one("SELECT EXISTS (SELECT 1 FROM vuin_to_identity WHERE vuin = %s)",
                        (vuin,))
        return row is not None and bool(row[0])

    def alias_target(self, vuin: int) -> int | None:
        tail = self._tail_over(vuin)
        if tail is not None:
            return tail.aliases.get(vuin)
        row = self._one("SELECT new FROM vuin_alias WHERE old = %s", (vuin,))
        return None if row is None else int(row[0])

    def aliases_to(self, vuin: int) -> list[int]:
        return [int(r[0]) for r in self._all(
            "SELECT old FROM vuin_alias WHERE new = %s ORDER BY old", (vuin,))]

    def last_seen(self, vuin: int, scene: str) -> LastSeen | None:
        row = self._one("SELECT identity, since FROM last_seen WHERE vuin = %s AND scene = %s",
                        (vuin, scene))
        return None if row is None else LastSeen(str(row[0]), float(row[1]))

    def last_seen_all(self, vuin: int) -> list[tuple[str, LastSeen]]:
        return [(str(scene), LastSeen(str(identity), float(since))) for scene, identity, since
                in self._all("SELECT scene, identity, since FROM last_seen WHERE vuin = %s "
                             "ORDER BY scene", (vuin,))]

    def vuin_counter(self) -> int:
        if self._counter is None:
            found = self.get_meta(_COUNTER)
            self._counter = 0 if found is None else int(found)
        return self._counter

    def get_meta(self, name: str) -> Any:
        row = self._one("SELECT value FROM meta WHERE name = %s", (name,))
        return None if row is None else row[0]

    def iter_identities(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        # key >= prefix lets the primary key's order start the walk; starts_with ends it
        for key, vuin in self._rows("SELECT key, vuin FROM identity_to_vuin WHERE key >= %s "
                                    "AND starts_with(key, %s) ORDER BY key", (prefix, prefix)):
            yield str(key), int(vuin)

    def iter_vuin_sets(self) -> Iterator[tuple[int, str]]:
        for vuin, key in self._rows("SELECT vuin, key FROM vuin_to_identity ORDER BY vuin, key"):
            yield int(vuin), str(key)

    def iter_aliases(self) -> Iterator[tuple[int, int]]:
        for old, new in self._rows("SELECT old, new FROM vuin_alias ORDER BY old"):
            yield int(old), int(new)

    def counts(self) -> TableCounts:
        row = self._one(
            "SELECT (SELECT count(*) FROM identity_to_vuin), "
            "(SELECT count(DISTINCT vuin) FROM vuin_to_identity), "
            "(SELECT count(*) FROM last_seen), (SELECT count(*) FROM vuin_alias)", ())
        assert row is not None
        identities, vuins, last_seen, aliases = (int(n) for n in row)
        return TableCounts(identities=identities, vuins=vuins, last_seen=last_seen,
                           aliases=aliases)

    def vuins_below(self, below: int | None, limit: int) -> list[int]:
        # the primary key (vuin, key) walked backwards; DISTINCT reads a set's few keys
        rows = self._all("SELECT DISTINCT vuin FROM vuin_to_identity WHERE vuin < %s "
                         "ORDER BY vuin DESC LIMIT %s",
                         (MAX_VUIN + 1 if below is None else below, limit))
        return [int(r[0]) for r in rows]

    def scenes_after(self, prefix: str, after: str | None, limit: int) -> list[tuple[str, int]]:
        # a skip scan of last_seen_by_scene (schema/0004): each step one index probe for the
        # next scene, then its count from the index; bounded above by the prefix's end
        start = prefix if after is None or after < prefix else after
        strict = after is not None and start == after
        rows = self._all(_SCENES_AFTER, (start, strict, _prefix_end(prefix), limit))
        return [(str(scene), int(count)) for scene, count in rows]

    def seen_in(self, scene: str, above: int | None, limit: int) -> list[tuple[int, LastSeen]]:
        rows = self._all("SELECT vuin, identity, since FROM last_seen WHERE scene = %s "
                         "AND vuin > %s ORDER BY vuin LIMIT %s",
                         (scene, 0 if above is None else above, limit))
        return [(int(vuin), LastSeen(str(identity), float(since)))
                for vuin, identity, since in rows]

    # writes
    def set_vuin(self, key: str, vuin: int) -> None:
        self._vuins[key] = vuin
        self._pending.forward[key] = vuin

    def add_identity(self, vuin: int, key: str) -> None:
        if self._tail is not None and vuin > self._tail.floor:
            self._tail.sets.add(vuin)
        self._pending.sets[vuin, key] = True

    def remove_identity(self, vuin: int, key: str) -> None:
        if self._tail is not None and vuin > self._tail.floor:
            self._tail.uncertain.add(vuin)  # its set may be empty now: ask the server
        self._pending.sets[vuin, key] = False

    def set_alias(self, old: int, new: int) -> None:
        if self._tail is not None and old > self._tail.floor:
            self._tail.aliases[old] = new
        self._pending.aliases[old] = new

    def set_last_seen(self, vuin: int, scene: str, seen: LastSeen) -> None:
        self._pending.last_seen[vuin, scene] = seen

    def delete_last_seen(self, vuin: int, scene: str) -> None:
        self._pending.last_seen[vuin, scene] = None

    def set_vuin_counter(self, value: int) -> None:
        """Kept in the view and written once by :meth:`flush` (a batch of 64 allocations
        updates the row once)."""
        self._counter = value
        self._counter_dirty = True

    def set_meta(self, name: str, value: Any) -> None:
        self._write("INSERT INTO meta (name, value) VALUES (%s, %s) "
                    "ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value",
                    (name, Jsonb(value)))

    def flush(self) -> None:
        """Send what the view holds back (the counter, the graph's writes); called just
        before commit."""
        if self._counter_dirty and self._counter is not None:
            self.set_meta(_COUNTER, self._counter)
            self._counter_dirty = False
        if self._pending:
            self._pending.send(self._conn, self._prepare)

    # LegacyReader / LegacyWriter: the old daemon's config and UserInfo, byte for byte
    # (their own tables, schema/0002; written at once, not held back like the graph's)
    def legacy_counts(self) -> LegacyCounts:
        row = self._one("SELECT (SELECT count(*) FROM config), "
                        "(SELECT count(*) FROM user_info)", ())
        assert row is not None
        return LegacyCounts(config=int(row[0]), user_info=int(row[1]))

    def get_config(self, key: bytes) -> bytes | None:
        row = self._one("SELECT value FROM config WHERE key = %s", (key,))
        return None if row is None else bytes(row[0])

    def iter_config(self) -> Iterator[tuple[bytes, bytes]]:
        for key, value in self._rows("SELECT key, value FROM config ORDER BY key"):
            yield bytes(key), bytes(value)

    def put_config(self, key: bytes, value: bytes) -> None:
        self._write("INSERT INTO config (key, value) VALUES (%s, %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (key, value))

    def delete_config(self, key: bytes) -> bool:
        return self._one("DELETE FROM config WHERE key = %s RETURNING 1", (key,)) is not None

    def put_user_info(self, key: bytes, value: bytes) -> None:
        self._write("INSERT INTO user_info (key, value) VALUES (%s, %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (key, value))

    def iter_user_info(self) -> Iterator[tuple[bytes, bytes]]:
        for key, value in self._rows("SELECT key, value FROM user_info ORDER BY key"):
            yield bytes(key), bytes(value)


def keys_looked_up(fns: Sequence[Callable[[PgView], Any]]) -> list[str]:
    """The identity keys the functions of a batch name as their ``keys`` argument.

    ``IdentityGraph.resolve`` submits ``partial(_apply_resolution, keys=[...], ...)``, whose
    first reads are those keys' vUINs; reading them for the whole batch in one statement
    saves a round trip per new identity. Only a hint: a function that names no keys, or
    other ones, is served one read at a time as before.
    """
    keys: list[str] = []
    for fn in fns:
        named = fn.keywords.get("keys") if isinstance(fn, partial) else None
        if isinstance(named, list | tuple):
            keys.extend(key for key in named if isinstance(key, str))
    return keys
