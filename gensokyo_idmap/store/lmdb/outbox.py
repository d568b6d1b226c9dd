"""outbox.db on LMDB: OneBot events accepted from the platform but not yet confirmed by a
framework, kept durably (``sync=True``) only while that framework is away, slow or behind.

| table | key → value |
|---|---|
| ``meta`` | ``schema_version``, ``outbox_counter`` (the highest entry id written) |
| ``outbox`` | sink name NUL + entry id (u64) → the event as JSON bytes |

Entry ids are handed out in the order events are published, so one sink's entries sit in that
order under its prefix. The file is small and short-lived in the normal case (entries are
deleted once confirmed); it is not the identity store and may be deleted when no framework
needs what it holds.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, Final

import lmdb

from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.store.lmdb.codec import decode_u64, encode_u64
from gensokyo_idmap.store.lmdb.env import CounterView, LmdbEnv, Table

__all__ = ["OUTBOX_SCHEMA_VERSION", "RECOVERY", "LmdbOutboxStore", "OutboxView", "sink_of_key"]

OUTBOX_SCHEMA_VERSION: Final = 1
DEFAULT_OUTBOX_MAP_SIZE: Final = 16 * 1024 * 1024
_MAX_SINK_NAME: Final = 400
#: What to do when outbox.db is refused (missing, emptied, damaged): a new one would forget
#: the events owed to frameworks that were away, after the platform was told they arrived.
RECOVERY: Final = (
    "stop the daemon; then put the file back if you have a copy, or accept that the events "
    "it owed are lost and start an empty one (`gensokyo-idmap --data-dir {dir} recover "
    "outbox`; a damaged file is moved aside)")

_TABLES: Final = (
    Table(b"meta", "meta"),
    Table(b"outbox", "outbox"),
)


def _prefix(sink: str) -> bytes:
    raw = sink.encode("utf-8")
    if not raw or b"\0" in raw or len(raw) > _MAX_SINK_NAME:
        raise BadInputError("sink", sink, f"a sink name is 1 to {_MAX_SINK_NAME} bytes, no NUL")
    return raw + b"\0"


def sink_of_key(key: bytes) -> str:
    """The sink name an ``outbox`` key starts with (the inverse of the key layout)."""
    return key.split(b"\0", 1)[0].decode("utf-8", "replace")


class OutboxView(CounterView):
    """Reads and writes of one transaction."""

    COUNTER_KEY = b"outbox_counter"
    __slots__ = ()

    def add(self, sink: str, body: bytes) -> int:
        """Add an entry under the next id (tests and tools; the daemon hands ids out when it
        publishes, :meth:`put`); the id."""
        entry = self._get_counter() + 1
        self.put(sink, entry, body)
        return entry

    def put(self, sink: str, entry: int, body: bytes) -> None:
        """Write an entry under an id handed out before (the counter keeps the highest)."""
        if entry > self._get_counter():
            self._set_counter(entry)
        self._txn.put(_prefix(sink) + encode_u64(entry), body, db=self._t.outbox)

    def counter(self) -> int:
        """The highest entry id ever written."""
        return self._get_counter()

    def remove(self, sink: str, entry: int) -> None:
        self._txn.delete(_prefix(sink) + encode_u64(entry), db=self._t.outbox)

    def entries(self, sink: str, after: int = 0) -> Iterator[tuple[int, bytes]]:
        """(entry id, body) of one sink with an id above ``after``, oldest first."""
        prefix = _prefix(sink)
        cur = self._txn.cursor(self._t.outbox)
        if not cur.set_range(prefix + encode_u64(after + 1) if after else prefix):
            return
        for key, value in cur:
            if not key.startswith(prefix):
                return
            yield decode_u64(key[len(prefix):]), bytes(value)

    def sinks(self) -> dict[str, int]:
        """Every sink name that has entries, with how many (in name order): a walk of
        every entry (the file holds what frameworks that were away are owed: little)."""
        found: dict[str, int] = {}
        cur = self._txn.cursor(self._t.outbox)
        for key in cur.iternext(values=False):
            sink = sink_of_key(key)
            found[sink] = found.get(sink, 0) + 1
        return found

    def trim(self, sink: str, keep: int) -> int:
        """Delete the oldest entries of ``sink`` beyond the newest ``keep``; how many."""
        ids = [entry for entry, _ in self.entries(sink)]
        surplus = ids[: max(0, len(ids) - keep)]
        for entry in surplus:
            self.remove(sink, entry)
        return len(surplus)

    def count(self) -> int:
        return int(self._txn.stat(self._t.outbox)["entries"])


def _is_empty(txn: lmdb.Transaction[bytes], tables: Any) -> bool:
    return int(txn.stat(tables.outbox)["entries"]) == 0


class LmdbOutboxStore(LmdbEnv[OutboxView]):
    """outbox.db: durable commits, group commit (the rest comes from :class:`LmdbEnv`)."""

    def __init__(self, path: str | os.PathLike[str], *,
                 map_size: int = DEFAULT_OUTBOX_MAP_SIZE, recreate: bool = False) -> None:
        super().__init__(path, tables=_TABLES, make_view=OutboxView, is_empty=_is_empty,
                         durable=True, map_size=map_size,
                         schema_version=OUTBOX_SCHEMA_VERSION, upgrades={},
                         recovery=RECOVERY, recreate=recreate)
