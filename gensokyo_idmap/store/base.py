"""The storage interface the identity graph is written against.

The domain code (``idmap.py``) never imports a backend. It reads through an
:class:`IdentityReader` (a consistent snapshot) and writes by handing a function to
:meth:`IdentityStore.write`; the backend runs that function inside one write transaction,
batched with others (group commit), and returns only once the transaction is durable.

Contract for write functions: a function that raises an :class:`~gensokyo_idmap.errors.IdmapError`
must do so before its first write, so the batch it shares can still commit. Any other
exception makes the backend re-run the batch one function per transaction, so one broken
call never takes its neighbours down with it.

Keys cross this interface as canonical key text (``openid:QQ:…``) and vUINs as ints.

The old daemon's ``config`` and ``UserInfo`` buckets are not part of the identity graph: a
store that keeps them (for ``compat``, ``/getid`` and the migration) says so by also being
:class:`LegacyTables`; a backend written against :class:`IdentityStore` alone need not.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar, runtime_checkable

__all__ = [
    "MIGRATION_MARKER",
    "IdentityReader",
    "IdentityStore",
    "IdentityWriter",
    "LastSeen",
    "LegacyCounts",
    "LegacyReader",
    "LegacyTables",
    "LegacyWriter",
    "MappedFile",
    "OutboxReader",
    "OutboxStore",
    "OutboxWriter",
    "ProbesTogether",
    "TableCounts",
]

T = TypeVar("T")

#: The ``meta`` entry a migration from the old idmap.db leaves (what it read and wrote, the
#: old file's sha256): while it is there, the old file is never read again.
MIGRATION_MARKER: Final = "migrated_from_legacy"


@dataclass(frozen=True, slots=True)
class LastSeen:
    """The identity a vUIN last used in one scene, and since when."""

    identity: str
    since: float


@dataclass(frozen=True, slots=True)
class TableCounts:
    identities: int
    vuins: int
    last_seen: int
    aliases: int


class IdentityReader(Protocol):
    """A consistent read-only view of the identity graph."""

    def vuin_of(self, key: str) -> int | None: ...
    def identities_of(self, vuin: int) -> list[str]: ...
    def has_identities(self, vuin: int) -> bool: ...
    def alias_target(self, vuin: int) -> int | None: ...
    def aliases_to(self, vuin: int) -> list[int]: ...
    def last_seen(self, vuin: int, scene: str) -> LastSeen | None: ...
    def last_seen_all(self, vuin: int) -> list[tuple[str, LastSeen]]: ...
    def vuin_counter(self) -> int: ...
    def get_meta(self, name: str) -> Any:
        """A value of the ``meta`` table (``schema_version``, the migration marker …)."""
        ...
    def iter_identities(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        """(key, vUIN) in key order; only keys starting with ``prefix`` when given."""
        ...
    def iter_vuin_sets(self) -> Iterator[tuple[int, str]]: ...
    def iter_aliases(self) -> Iterator[tuple[int, int]]: ...
    def counts(self) -> TableCounts: ...

    # pages of the graph for people browsing it (the console): each reads about ``limit``
    # entries of an index, whatever the size of the graph (docs/stores.md, "Browsing")
    def vuins_below(self, below: int | None, limit: int) -> list[int]:
        """Up to ``limit`` vUINs that have an identity set, the highest first, each below
        ``below`` (None: from the highest): the newest people first, as numbers are handed
        out in order (``vuin_to_identity``'s key order, walked backwards)."""
        ...
    def scenes_after(self, prefix: str, after: str | None, limit: int) -> list[tuple[str, int]]:
        """Up to ``limit`` scenes in which some vUIN is last seen, in scene order, each
        starting with ``prefix`` and coming after ``after`` (None: from the first), with
        how many vUINs are last seen there (the ``last_seen`` scene index)."""
        ...
    def seen_in(self, scene: str, above: int | None, limit: int) -> list[tuple[int, LastSeen]]:
        """Up to ``limit`` vUINs last seen in ``scene``, in vUIN order above ``above``
        (None: from the lowest), with what they used there (the scene index)."""
        ...


class IdentityWriter(IdentityReader, Protocol):
    """The view a write function gets: reads see the writes made so far in the batch."""

    def set_vuin(self, key: str, vuin: int) -> None: ...
    def add_identity(self, vuin: int, key: str) -> None: ...
    def remove_identity(self, vuin: int, key: str) -> None: ...
    def set_alias(self, old: int, new: int) -> None: ...
    def set_last_seen(self, vuin: int, scene: str, seen: LastSeen) -> None: ...
    def delete_last_seen(self, vuin: int, scene: str) -> None: ...
    def set_vuin_counter(self, value: int) -> None: ...
    def set_meta(self, name: str, value: Any) -> None:
        """Write a value of the ``meta`` table (the message ids' high-water mark …)."""
        ...

    def unused_from(self) -> int | None:
        """A vUIN from which on no number is in use (in no identity set, no alias), as far
        as this transaction knows, or None where that is not cheap to tell: allocation then
        asks number by number. Allocating a new person is what the writer does most under a
        flood of new users, and above the highest number in use there is nothing to ask."""
        return None

    def add_person(self, key: str, vuin: int, scene: str | None, since: float) -> None:
        """The writes of a new person: ``key`` → ``vuin`` (a number just allocated), the set
        of ``vuin`` holding ``key``, and ``key`` as ``vuin``'s ``last_seen`` in ``scene``
        since ``since`` (none without a scene). Spelled here as the three writes; a store may
        do them at once (the LMDB view encodes each part once), being what the writer does
        most under a flood of new users."""
        self.set_vuin(key, vuin)
        self.add_identity(vuin, key)
        if scene is not None:
            self.set_last_seen(vuin, scene, LastSeen(key, since))


class IdentityStore(Protocol):
    """openid-map.db: the precious store."""

    def read(self) -> AbstractContextManager[IdentityReader]: ...
    def probe(self, key: str, scene: str | None) -> tuple[int | None, bool]:
        """(vUIN of ``key``, whether ``key`` is that vUIN's last_seen in ``scene``) from one
        snapshot: the whole read of resolve's hot path, so a backend makes it as cheap as it
        can."""
        ...
    def write(self, fn: Callable[[IdentityWriter], T]) -> Awaitable[T]:
        """Awaitable result of ``fn`` run in a write transaction, resolved once durable."""
        ...
    def write_sync(self, fn: Callable[[IdentityWriter], T]) -> T: ...
    def health(self) -> str | None:
        """Why writes fail now (the last one failed, the store cannot grow), or None:
        known without touching the store (``/healthz``)."""
        ...
    def version(self) -> int | None:
        """A number that changes with every commit to the store, whichever process made
        it (LMDB's last transaction id), so a reader can tell that an answer it read is
        still the store's; None where no such number is cheap (a server's store)."""
        ...
    def close(self) -> None: ...


@runtime_checkable
class ProbesTogether(Protocol):
    """An :class:`IdentityStore` whose probe is a network round trip (PostgreSQL): the
    probes asked for in one turn of the event loop are answered together, in one."""

    def probe_cached(self, key: str, scene: str | None) -> tuple[int, bool] | None:
        """The probe's answer if it is known without asking the server (a cache), else
        None."""
        ...
    def probe_soon(self, key: str, scene: str | None) -> Awaitable[tuple[int | None, bool]]:
        """:meth:`IdentityStore.probe`, answered with every other probe asked for in this
        turn of the event loop (one round trip for all)."""
        ...


# --- the old daemon's config and UserInfo buckets -------------------------------------------


@dataclass(frozen=True, slots=True)
class LegacyCounts:
    config: int
    user_info: int


class LegacyReader(Protocol):
    """A read-only view of the legacy tables: bytes exactly as the old buckets held them."""

    def get_config(self, key: bytes) -> bytes | None:
        """``config``: the text under ``<section>:<key>``."""
        ...
    def iter_config(self) -> Iterator[tuple[bytes, bytes]]: ...
    def iter_user_info(self) -> Iterator[tuple[bytes, bytes]]: ...
    def legacy_counts(self) -> LegacyCounts: ...


class LegacyWriter(LegacyReader, Protocol):
    """The view a legacy write function gets (the write-function contract of the module)."""

    def put_config(self, key: bytes, value: bytes) -> None: ...
    def delete_config(self, key: bytes) -> bool:
        """Whether ``key`` was there."""
        ...
    def put_user_info(self, key: bytes, value: bytes) -> None: ...


@runtime_checkable
class MappedFile(Protocol):
    """A store in a memory-mapped file (LMDB), which the console shows the map of; a store
    on a server is not one. Read without a transaction, as cheap as an attribute."""

    def map_use(self) -> tuple[int, int]:
        """(the map's size, the bytes of the pages in use)."""
        ...


@runtime_checkable
class LegacyTables(Protocol):
    """A store that also keeps the legacy tables (openid-map.db on LMDB does). Writes are
    durable on return, as :meth:`IdentityStore.write`."""

    def read_legacy(self) -> AbstractContextManager[LegacyReader]: ...
    def write_legacy(self, fn: Callable[[LegacyWriter], T]) -> Awaitable[T]: ...


def legacy_counts(store: object) -> LegacyCounts:
    """Entries of the legacy tables of ``store``; none when it keeps no such tables."""
    if not isinstance(store, LegacyTables):
        return LegacyCounts(config=0, user_info=0)
    with store.read_legacy() as view:
        return view.legacy_counts()


class OutboxReader(Protocol):
    """A consistent snapshot of outbox.db: events owed to each framework (sink), by the
    entry id handed out when each was published."""

    def counter(self) -> int:
        """The highest entry id ever written."""
        ...
    def entries(self, sink: str, after: int = 0) -> Iterator[tuple[int, bytes]]:
        """(entry id, body) of one sink with an id above ``after``, oldest first."""
        ...
    def sinks(self) -> dict[str, int]:
        """Every sink name that has entries, with how many (in name order)."""
        ...


class OutboxWriter(OutboxReader, Protocol):
    def put(self, sink: str, entry: int, body: bytes) -> None:
        """Write an entry under an id handed out before (the counter keeps the highest)."""
        ...
    def remove(self, sink: str, entry: int) -> None: ...
    def trim(self, sink: str, keep: int) -> int:
        """Delete the oldest entries of ``sink`` beyond the newest ``keep``; how many."""
        ...


class OutboxStore(Protocol):
    """outbox.db: what the bridge's :class:`~gensokyo_idmap.bridge.outbox.Outbox` needs of
    the store of events owed to frameworks (writes durable before they resolve)."""

    def read(self) -> AbstractContextManager[OutboxReader]: ...
    def write(self, fn: Callable[[OutboxWriter], T]) -> Awaitable[T]:
        """Awaitable result of ``fn`` run in a write transaction, resolved once durable."""
        ...
