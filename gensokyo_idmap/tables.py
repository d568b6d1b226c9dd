"""The daemon's in-memory tables keyed by chat, person or message, in one registry.

Every such table (reply counts, delivery keys, member names, the caches of the hot paths)
has a bound on its entries and forgets on the clock of the rule it serves: a group's reply
window, the de-duplication window, a console session's idle time (docs/operations.md,
*Memory*, lists them all). A table forgets as it is used; what nobody uses any more is
forgotten by the memory chore (:func:`gensokyo_idmap.memory.run_trimmer`), which
calls :meth:`Tables.sweep` once a minute, so memory follows the traffic of the last window
even when a flood has moved on and nothing touches the flood's entries again.

Rules:

1. **A table is a cache or its rule's memory, never the truth.** Whatever a framework has
   seen lives in the stores (LMDB, PostgreSQL, Redis); an entry forgotten is asked of the
   store again, computed again, or (member names, reply counts of a message out of its
   window) no longer needed.
2. **Forgetting costs what is forgotten** (each table keeps its entries in the order they
   lapse), so a sweep of a quiet table is a few comparisons.
3. **Sizes are estimates**: a table's bytes are its containers' and those of a sample of
   its entries (what they hold, objects shared with other tables counted in each), scaled
   to its count. Enough to see which table holds the memory, cheap enough for each
   ``/v1/stats`` and scrape.

The figures are read by ``/v1/stats`` (``memory``) and, with metrics, as
``gensokyo_memory_table_entries`` and ``gensokyo_memory_table_bytes``.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice
from typing import Final, Protocol, TypeAlias, TypeVar, runtime_checkable

import structlog

__all__ = ["SAMPLE", "HasTables", "Named", "Table", "TableFigures", "Tables", "compacted",
           "entry_bytes", "estimate"]

log = structlog.get_logger("gensokyo_idmap.memory")

#: Entries a size estimate looks at (the oldest ones) and scales to the table's count.
SAMPLE: Final = 16
#: How deep an entry's objects are followed (an entry is a few nested tuples at most).
_DEPTH: Final = 6
#: Objects no entry owns: singletons, types, functions, modules; counted as nothing.
_SHARED: Final = (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                  types.ModuleType)

D = TypeVar("D", bound=dict)  # type: ignore[type-arg]


class Table(Protocol):
    """What the registry needs of a table."""

    def __len__(self) -> int:
        """Entries held."""
        ...

    def forget(self) -> None:
        """Drop now whatever the table's rule lets it drop (by the table's own clock)."""
        ...

    def footprint(self) -> int:
        """Estimated bytes held (module rule 3)."""
        ...


#: A table and the name it is shown by.
Named: TypeAlias = tuple[str, Table]


@runtime_checkable
class HasTables(Protocol):
    """A part of the daemon that holds tables (its own, and those of its parts)."""

    def memory_tables(self) -> list[Named]:
        ...


@dataclass(frozen=True, slots=True)
class TableFigures:
    """One table's figures: its name, entries and estimated bytes (of every table
    registered under that name: each bot's own, added up)."""

    name: str
    entries: int
    bytes: int


class Tables:
    """The registry of a daemon's tables, in the order they were added."""

    def __init__(self) -> None:
        self._tables: list[tuple[str, Table]] = []

    def add(self, name: str, table: Table) -> None:
        """Register ``table`` under ``name`` (several may share a name: one per bot; one
        registered before, by another part that shares it, is not added again)."""
        if not any(table is known for _, known in self._tables):
            self._tables.append((name, table))

    def add_all(self, named: Iterable[Named]) -> None:
        for name, table in named:
            self.add(name, table)

    def add_from(self, *parts: object) -> None:
        """The tables of each of ``parts`` that holds some (:class:`HasTables`)."""
        for part in parts:
            if isinstance(part, HasTables):
                self.add_all(part.memory_tables())

    def sweep(self) -> None:
        """Let every table forget what its rule lets it (the memory chore). A table whose
        forgetting fails is logged and skipped: the others still forget."""
        for name, table in self._tables:
            try:
                table.forget()
            except Exception as exc:  # noqa: BLE001 - a bug in one table stops no other
                log.error("[app] memory table not swept", table=name,
                          error=type(exc).__name__, reason=str(exc)[:200])

    def figures(self) -> list[TableFigures]:
        """(name, entries, estimated bytes) per name, in the order of registration."""
        found: dict[str, tuple[int, int]] = {}
        for name, table in self._tables:
            entries, size = found.get(name, (0, 0))
            found[name] = (entries + len(table), size + table.footprint())
        return [TableFigures(name, entries, size) for name, (entries, size) in found.items()]


def entry_bytes(obj: object) -> int:
    """The bytes of ``obj`` and of what it holds (tuples, lists, sets, dicts, the slots and
    attributes of objects), each object once; types, functions and modules count nothing."""
    return _size(obj, set(), _DEPTH)


def _size(obj: object, seen: set[int], depth: int) -> int:
    if obj is None or isinstance(obj, (bool, *_SHARED)) or id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if depth == 0 or isinstance(obj, str | bytes | bytearray | int | float):
        return size
    depth -= 1
    if isinstance(obj, dict):  # not the Mapping ABC: each new type would join its caches
        return size + sum(_size(key, seen, depth) + _size(value, seen, depth)
                          for key, value in obj.items())
    if isinstance(obj, tuple | list | set | frozenset):
        return size + sum(_size(item, seen, depth) for item in obj)
    for kind in type(obj).__mro__:
        for slot in kind.__dict__.get("__slots__", ()):
            size += _size(getattr(obj, slot, None), seen, depth)
    held = getattr(obj, "__dict__", None)
    if isinstance(held, dict):
        size += _size(held, seen, depth)
    return size


def estimate(count: int, containers: Iterable[object], entries: Iterable[object]) -> int:
    """The estimated bytes of a table of ``count`` entries: its ``containers`` (the dicts
    and lists holding them, without what they hold) and the mean size of the first
    :data:`SAMPLE` of ``entries`` (each a key and value, or whatever one entry is) times
    ``count``."""
    size = sum(sys.getsizeof(container) for container in containers)
    try:
        sample = list(islice(entries, SAMPLE))
        if sample and count:
            size += sum(entry_bytes(entry) for entry in sample) * count // len(sample)
    except RuntimeError:  # a worker thread changed the table meanwhile: no sample this time
        pass
    return size


def compacted(table: D) -> D:
    """``table`` itself, or a copy of it (same type and order) when it holds far less than
    its hash table was grown for: a dict never shrinks as entries are deleted, so a table
    that forgot a flood would otherwise keep the flood's size until it grows again."""
    if sys.getsizeof(table) > 4096 + 256 * len(table):
        return type(table)(table)
    return table
