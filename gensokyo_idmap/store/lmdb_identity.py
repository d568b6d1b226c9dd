"""openid-map.db on LMDB: the embedded identity store.

One env file (``subdir=False``), named databases as DESIGN §2 lists them, plus
``vuin_alias`` (old vUIN → the vUIN it now resolves to, written by rebind and by legacy
migration). Durability: ``sync=True`` and ``metasync=True``: a commit returns after fsync.

Threads: reads run on the caller's thread in a short read transaction (LMDB readers never
wait for the writer); writes run on the single writer thread of a :class:`GroupCommitter`.
The map grows by itself: a full map aborts the batch, doubles ``map_size`` and re-runs it.
Changing the map size needs no transaction open in this process: read transactions hold
``_read_lock`` (an uncontended lock costs ~0.1 us, a fraction of a read), the writer's
transaction holds ``_write_lock``, and a remap takes both, always write lock first.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final, TypeVar

import lmdb
import structlog

from gensokyo_idmap.errors import IdmapError, SchemaVersionError, StoreError
from gensokyo_idmap.store.base import IdentityWriter, LastSeen, TableCounts
from gensokyo_idmap.store.codec import decode_u64, decode_value, encode_u64, encode_value
from gensokyo_idmap.store.group_commit import GroupCommitter, Outcome

__all__ = ["DEFAULT_MAP_SIZE", "SCHEMA_VERSION", "LmdbIdentityStore", "UPGRADES"]

T = TypeVar("T")
log = structlog.get_logger("gensokyo_idmap.store")

#: The schema this code writes. Older stores are upgraded by UPGRADES, newer ones refused.
SCHEMA_VERSION: Final = 1
DEFAULT_MAP_SIZE: Final = 64 * 1024 * 1024
MAX_SCENE_BYTES: Final = 400

_TABLES: Final = (
    (b"meta", False),
    (b"identity_to_vuin", False),
    (b"vuin_to_identity", True),
    (b"last_seen", False),
    (b"vuin_alias", False),
    (b"config", False),
    (b"UserInfo", False),
)
_META_SCHEMA: Final = b"schema_version"
_META_COUNTER: Final = b"vuin_counter"


class _Tables:
    """The named database handles of one env."""

    __slots__ = ("meta", "identity_to_vuin", "vuin_to_identity", "last_seen", "vuin_alias",
                 "config", "user_info")

    def __init__(self, env: lmdb.Environment, txn: lmdb.Transaction) -> None:
        handles = {name: env.open_db(name, txn=txn, dupsort=dup) for name, dup in _TABLES}
        self.meta = handles[b"meta"]
        self.identity_to_vuin = handles[b"identity_to_vuin"]
        self.vuin_to_identity = handles[b"vuin_to_identity"]
        self.last_seen = handles[b"last_seen"]
        self.vuin_alias = handles[b"vuin_alias"]
        self.config = handles[b"config"]
        self.user_info = handles[b"UserInfo"]


def _last_seen_prefix(identity: bytes) -> bytes:
    """The first bytes of the cbor of ``[identity, since]``: array(2), then the text header."""
    size = len(identity)
    if size < 24:
        header = bytes((0x60 + size,))
    elif size < 0x100:
        header = bytes((0x78, size))
    else:
        header = b"\x79" + size.to_bytes(2, "big")
    return b"\x82" + header + identity


def _scene_key(vuin: int, scene: str) -> bytes:
    raw = scene.encode("utf-8")
    if len(raw) > MAX_SCENE_BYTES:
        raise ValueError(f"scene name longer than {MAX_SCENE_BYTES} bytes")
    return encode_u64(vuin) + raw


class LmdbView(IdentityWriter):
    """Reads (and, in a write transaction, writes) of one LMDB transaction."""

    __slots__ = ("_txn", "_t", "_counter", "_counter_dirty")

    def __init__(self, txn: lmdb.Transaction, tables: _Tables) -> None:
        self._txn = txn
        self._t = tables
        # The counter is read once per transaction and written once at its end (flush):
        # a batch of 64 allocations decodes and encodes it once, not 64 times.
        self._counter: int | None = None
        self._counter_dirty = False

    def flush(self) -> None:
        """Write what this view holds back (the counter); called just before commit."""
        if self._counter_dirty and self._counter is not None:
            self._txn.put(_META_COUNTER, encode_value(self._counter), db=self._t.meta)
            self._counter_dirty = False

    # reads
    def vuin_of(self, key: str) -> int | None:
        raw = self._txn.get(key.encode("utf-8"), db=self._t.identity_to_vuin)
        return None if raw is None else decode_u64(raw)

    def identities_of(self, vuin: int) -> list[str]:
        cur = self._txn.cursor(self._t.vuin_to_identity)
        if not cur.set_key(encode_u64(vuin)):
            return []
        return [bytes(v).decode("utf-8") for v in cur.iternext_dup()]

    def has_identities(self, vuin: int) -> bool:
        return self._txn.get(encode_u64(vuin), db=self._t.vuin_to_identity) is not None

    def alias_target(self, vuin: int) -> int | None:
        raw = self._txn.get(encode_u64(vuin), db=self._t.vuin_alias)
        return None if raw is None else decode_u64(raw)

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
        if self._counter is None:
            raw = self._txn.get(_META_COUNTER, db=self._t.meta)
            self._counter = 0 if raw is None else int(decode_value(raw))
        return self._counter

    def iter_identities(self) -> Iterator[tuple[str, int]]:
        for k, v in self._txn.cursor(self._t.identity_to_vuin):
            yield bytes(k).decode("utf-8"), decode_u64(v)

    def iter_vuin_sets(self) -> Iterator[tuple[int, str]]:
        for k, v in self._txn.cursor(self._t.vuin_to_identity):
            yield decode_u64(k), bytes(v).decode("utf-8")

    def iter_aliases(self) -> Iterator[tuple[int, int]]:
        for k, v in self._txn.cursor(self._t.vuin_alias):
            yield decode_u64(k), decode_u64(v)

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
            config=entries(self._t.config),
            user_info=entries(self._t.user_info),
        )

    # writes
    def set_vuin(self, key: str, vuin: int) -> None:
        self._txn.put(key.encode("utf-8"), encode_u64(vuin), db=self._t.identity_to_vuin)

    def add_identity(self, vuin: int, key: str) -> None:
        self._txn.put(encode_u64(vuin), key.encode("utf-8"), db=self._t.vuin_to_identity)

    def remove_identity(self, vuin: int, key: str) -> None:
        self._txn.delete(encode_u64(vuin), key.encode("utf-8"), db=self._t.vuin_to_identity)

    def set_alias(self, old: int, new: int) -> None:
        self._txn.put(encode_u64(old), encode_u64(new), db=self._t.vuin_alias)

    def set_last_seen(self, vuin: int, scene: str, seen: LastSeen) -> None:
        self._txn.put(
            _scene_key(vuin, scene), encode_value([seen.identity, seen.since]), db=self._t.last_seen
        )

    def delete_last_seen(self, vuin: int, scene: str) -> None:
        self._txn.delete(_scene_key(vuin, scene), db=self._t.last_seen)

    def set_vuin_counter(self, value: int) -> None:
        self._counter = value
        self._counter_dirty = True


class _Reading:
    """``with store.read() as view:`` - a short read transaction under the shared gate."""

    __slots__ = ("_store", "_txn", "_view")

    def __init__(self, store: LmdbIdentityStore) -> None:
        self._store = store
        self._txn: lmdb.Transaction | None = None
        self._view: LmdbView | None = None

    def __enter__(self) -> LmdbView:
        store = self._store
        self._txn = store._begin_read()  # returns holding store._read_lock
        self._view = LmdbView(self._txn, store._tables)
        return self._view

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # py-lmdb frees a reader slot only when the Transaction object dies, not at abort;
        # a view kept alive by a suspended coroutine would otherwise pin a slot.
        try:
            if self._txn is not None:
                self._txn.abort()
        finally:
            if self._view is not None:
                self._view._txn = None  # type: ignore[assignment]
            self._view = None
            self._txn = None
            self._store._read_lock.release()


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


UPGRADES: dict[int, Callable[[LmdbView], None]] = {0: _upgrade_0_to_1}


class LmdbIdentityStore:
    """openid-map.db. Open one per process and path (LMDB forbids two in one process)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        map_size: int = DEFAULT_MAP_SIZE,
        schema_version: int = SCHEMA_VERSION,
        upgrades: dict[int, Callable[[LmdbView], None]] | None = None,
    ) -> None:
        self.path = Path(path)
        self._read_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._schema_version = schema_version
        self._upgrades = UPGRADES if upgrades is None else upgrades
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._env = lmdb.open(
                str(self.path),
                subdir=False,
                map_size=map_size,
                max_dbs=len(_TABLES) + 2,
                sync=True,
                metasync=True,
                readahead=False,
                meminit=False,
                max_spare_txns=4,
            )
        except (lmdb.Error, OSError) as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        # Reader slots of processes that died (kill -9) stay in the lock file while another
        # process holds it open; they would pin old pages and fill the reader table.
        self._env.reader_check()
        try:
            self._tables = self._open_tables()
        except BaseException:
            self._env.close()
            raise
        self._forward = self._tables.identity_to_vuin  # the two handles probe() needs
        self._last_seen = self._tables.last_seen
        self._committer = GroupCommitter(self._run_batch, name=f"idmap-writer:{self.path.name}")

    # opening
    def _open_tables(self) -> _Tables:
        while True:
            try:
                txn = self._env.begin(write=True)
            except lmdb.MapResizedError:
                self._env.set_mapsize(0)
                continue
            try:
                tables = _Tables(self._env, txn)
                view = LmdbView(txn, tables)
                self._check_schema(view, txn, tables)
                view.flush()
                txn.commit()
                return tables
            except lmdb.MapFullError:
                txn.abort()
                self._env.set_mapsize(self._env.info()["map_size"] * 2)
            except BaseException:
                txn.abort()
                raise

    def _check_schema(self, view: LmdbView, txn: lmdb.Transaction, tables: _Tables) -> None:
        raw = txn.get(_META_SCHEMA, db=tables.meta)
        if raw is None:
            empty = txn.stat(tables.identity_to_vuin)["entries"] == 0
            found = self._schema_version if empty else 0
        else:
            found = int(decode_value(raw))
        if found > self._schema_version:
            raise SchemaVersionError(
                f"{self.path} has schema_version {found}, but this gensokyo-idmap knows only "
                f"up to {self._schema_version}: run a newer gensokyo-idmap, or restore a backup"
            )
        for version in range(found, self._schema_version):
            step = self._upgrades.get(version)
            if step is None:
                raise StoreError(f"{self.path}: no upgrade from schema_version {version}")
            step(view)
            log.info("[idmap] schema upgraded", path=str(self.path), to=version + 1)
        if raw is None or found != self._schema_version:
            txn.put(_META_SCHEMA, encode_value(self._schema_version), db=tables.meta)

    # reads
    def _begin_read(self) -> lmdb.Transaction:
        """A read transaction, returned with ``_read_lock`` held (the caller releases it)."""
        self._read_lock.acquire()
        try:
            return self._env.begin()
        except lmdb.MapResizedError:
            pass  # another process grew the file: adopt its size, then read
        except BaseException:
            self._read_lock.release()
            raise
        self._read_lock.release()
        self._remap(0)
        self._read_lock.acquire()
        try:
            return self._env.begin()
        except BaseException:
            self._read_lock.release()
            raise

    def _remap(self, size: int) -> None:
        """set_mapsize with no transaction open in this process (0 adopts the file's size)."""
        with self._write_lock, self._read_lock:
            self._env.set_mapsize(size)
        if size:
            log.info("[idmap] store map grown", path=str(self.path), map_size=size)

    def probe(self, key: str, scene: str | None) -> tuple[int | None, bool]:
        """The vUIN of ``key``, and whether ``key`` is already last seen in ``scene``.

        The hot path of resolve: a known identity in a known scene costs exactly this. The
        last_seen value is compared as bytes (its cbor starts with the identity), which
        saves decoding it.
        """
        encoded = key.encode("utf-8")
        self._read_lock.acquire()
        try:
            txn = self._env.begin()
        except BaseException:
            self._read_lock.release()
            txn = self._begin_read()  # the slow path: adopts a map grown elsewhere, or raises
        try:
            raw = txn.get(encoded, db=self._forward)
            if raw is None or scene is None:
                seen = None
            else:
                seen = txn.get(raw + scene.encode("utf-8"), db=self._last_seen)
        finally:
            txn.abort()
            self._read_lock.release()
        if raw is None:
            return None, False
        return decode_u64(raw), seen is not None and seen.startswith(_last_seen_prefix(encoded))

    def read(self) -> _Reading:
        """A consistent snapshot; never waits for the writer."""
        return _Reading(self)

    # writes
    def write(self, fn: Callable[[IdentityWriter], T]) -> Awaitable[T]:
        """Run ``fn`` in a write transaction; the awaitable resolves once it is durable."""
        return self._committer.submit(fn)

    def write_sync(self, fn: Callable[[IdentityWriter], T]) -> T:
        return self._committer.submit_sync(fn)

    @property
    def commit_stats(self) -> tuple[int, int]:
        """(batches committed, write functions run) since open."""
        return self._committer.batches, self._committer.writes

    def _run_batch(self, fns: Sequence[Callable[[IdentityWriter], Any]]) -> list[Outcome[Any]]:
        while True:
            try:
                return self._try_batch(fns)
            except lmdb.MapFullError:
                self._grow()
            except lmdb.MapResizedError:
                self._remap(0)
            except _BrokenBatch:
                return [self._run_alone(fn) for fn in fns]
            except lmdb.Error as exc:
                raise StoreError(f"{self.path}: write failed: {exc}") from exc

    def _run_alone(self, fn: Callable[[IdentityWriter], Any]) -> Outcome[Any]:
        while True:
            try:
                return self._try_batch([fn])[0]
            except lmdb.MapFullError:
                self._grow()
            except lmdb.MapResizedError:
                self._remap(0)
            except _BrokenBatch as broken:
                return Outcome(error=broken.cause)
            except lmdb.Error as exc:
                return Outcome(error=StoreError(f"{self.path}: write failed: {exc}"))

    def _try_batch(self, fns: Sequence[Callable[[IdentityWriter], Any]]) -> list[Outcome[Any]]:
        with self._write_lock:
            txn = self._env.begin(write=True)
            committed = False
            try:
                view = LmdbView(txn, self._tables)
                outcomes: list[Outcome[Any]] = []
                for fn in fns:
                    try:
                        outcomes.append(Outcome(value=fn(view)))
                    except IdmapError as exc:  # raised before any write, by contract
                        outcomes.append(Outcome(error=exc))
                    except lmdb.MapFullError:
                        raise
                    except lmdb.Error as exc:
                        raise _BrokenBatch(StoreError(f"{self.path}: {exc}")) from exc
                    except Exception as exc:
                        raise _BrokenBatch(exc) from exc
                view.flush()
                txn.commit()
                committed = True
                return outcomes
            finally:
                if not committed:
                    txn.abort()

    def _grow(self) -> None:
        self._env.reader_check()  # a dead reader pinning old pages may be why it is full
        self._remap(self._env.info()["map_size"] * 2)

    @property
    def map_size(self) -> int:
        return int(self._env.info()["map_size"])

    def close(self) -> None:
        """Finish queued writes, then close the file."""
        self._committer.close()
        with self._write_lock, self._read_lock:
            self._env.close()

    def __enter__(self) -> LmdbIdentityStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _BrokenBatch(Exception):
    """A write function failed in a way that may have left partial writes: redo alone."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause
