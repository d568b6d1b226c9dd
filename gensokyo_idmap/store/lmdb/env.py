"""What every LMDB-backed store of gensokyo-idmap shares: open, schema, reads, group commit.

One env file (``subdir=False``) with named databases, a ``meta`` table holding
``schema_version``, reads on the caller's thread, writes batched on one writer thread.

Threads: reads run on the caller's thread in a short read transaction (LMDB readers never
wait for the writer); writes run on the single writer thread of a :class:`GroupCommitter`.
The map grows by itself: a full map aborts the batch, doubles ``map_size`` and re-runs it.
``readonly=True`` opens an existing file without ever writing it (no table created, no
schema upgrade): for the read-only CLI commands, which must create nothing.
Changing the map size needs no transaction open in this process: read transactions hold
``read_lock`` (an uncontended lock costs ~0.1 us, a fraction of a read), the writer's
transaction holds ``write_lock``, and a remap takes both, always write lock first.

Opening never lets a damaged file near LMDB's map (:mod:`.opening`, :mod:`.check`): a
file is checked with plain reads first and refused with what is wrong; a new one is created
whole under a temporary name; a precious store (one given a ``recovery``) that its data dir
held once is refused when missing rather than created afresh (:mod:`.stores_record`). No map
is written through (``writemap`` off): a full disk is a failed commit, not a SIGBUS. A store
remembers why its last write failed until one goes through (:meth:`LmdbEnv.health`).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace, TracebackType
from typing import Any, ClassVar, Final, Generic, Protocol, Self, TypeVar

import lmdb
import structlog

from gensokyo_idmap.errors import IdmapError, NotFoundError, SchemaVersionError, StoreError
from gensokyo_idmap.store.group_commit import GroupCommitter, Outcome, settle, succeeded
from gensokyo_idmap.store.lmdb.check import DamagedStoreError, read_meta
from gensokyo_idmap.store.lmdb.codec import decode_value, encode_value
from gensokyo_idmap.store.lmdb.mapped_pages import release
from gensokyo_idmap.store.lmdb.opening import (
    check_before_map,
    check_pinned,
    create_whole,
    missing,
    prepare_lock_file,
    probe_address_space,
    refused,
)
from gensokyo_idmap.store.lmdb.stores_record import record_store

__all__ = ["LmdbEnv", "Table", "TxnView"]

T = TypeVar("T")
log = structlog.get_logger("gensokyo_idmap.store")

_META_SCHEMA: Final = b"schema_version"


@dataclass(frozen=True, slots=True)
class Table:
    """One named database: its name in the file, the attribute views use, dupsort or not.

    ``added_later``: a table a later version added without a schema upgrade (a writer
    creates it on open); a read-only open of a file from before finds none, and its views
    read the handle None as an empty table."""

    name: bytes
    attr: str
    dupsort: bool = False
    added_later: bool = False


class CounterView:
    """A view over one transaction that keeps one counter of the ``meta`` table.

    The counter is read once per transaction and written once at its end (:meth:`flush`,
    just before commit): a batch of 64 allocations decodes and encodes it once, not 64 times.
    """

    __slots__ = ("_counter", "_counter_dirty", "_t", "_txn")

    #: The counter's key in ``meta``.
    COUNTER_KEY: ClassVar[bytes]

    def __init__(self, txn: lmdb.Transaction[bytes], tables: Any) -> None:
        self._txn = txn
        self._t = tables
        self._counter: int | None = None
        self._counter_dirty = False

    def _get_counter(self) -> int:
        if self._counter is None:
            raw = self._txn.get(self.COUNTER_KEY, db=self._t.meta)
            self._counter = 0 if raw is None else int(decode_value(raw))
        return self._counter

    def _set_counter(self, value: int) -> None:
        self._counter = value
        self._counter_dirty = True

    def flush(self) -> None:
        """Write what this view holds back (the counter); called just before commit."""
        if self._counter_dirty and self._counter is not None:
            self._txn.put(self.COUNTER_KEY, encode_value(self._counter), db=self._t.meta)
            self._counter_dirty = False


class TxnView(Protocol):
    """What a store's view over one transaction must offer the shared machinery."""

    _txn: Any

    def flush(self) -> None: ...


V = TypeVar("V", bound=TxnView)


class _Reading(Generic[V]):
    """``with env.read() as view:`` - a short read transaction under the read lock."""

    __slots__ = ("_env", "_txn", "_view")

    def __init__(self, env: LmdbEnv[V]) -> None:
        self._env = env
        self._txn: lmdb.Transaction[bytes] | None = None
        self._view: V | None = None

    def __enter__(self) -> V:
        self._txn = self._env.begin_read()  # returns holding env.read_lock
        self._view = self._env.make_view(self._txn, self._env.tables)
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
                self._view._txn = None
            self._view = None
            self._txn = None
            self._env.read_lock.release()


class _BrokenBatch(Exception):
    """A write function failed in a way that may have left partial writes: redo alone."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class LmdbEnv(Generic[V]):
    """One LMDB env file with named tables, schema versions, reads and group commit.

    Open one per process and path (LMDB forbids two in one process).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        tables: Sequence[Table],
        make_view: Callable[[lmdb.Transaction[bytes], Any], V],
        is_empty: Callable[[lmdb.Transaction[bytes], Any], bool],
        durable: bool,
        map_size: int,
        schema_version: int,
        upgrades: dict[int, Callable[[V], None]],
        readonly: bool = False,
        recovery: str | None = None,
        recreate: bool = False,
    ) -> None:
        """``readonly`` opens an existing file without writing anything. ``recovery`` (how to
        get the store back, ``{path}`` and ``{dir}`` filled in) makes it a store that is never
        re-created once its data dir held it; ``recreate`` creates it all the same (migration
        and recovery do, on purpose)."""
        self.path = Path(path)
        self.readonly = readonly
        self.read_lock = threading.Lock()
        self.write_lock = threading.Lock()
        self.make_view = make_view
        self._table_spec = tuple(tables)
        self._is_empty = is_empty
        self._schema_version = schema_version
        self._upgrades = upgrades
        self._durable = durable
        self._recovery = recovery
        # why the store cannot serve writes now (None: the last write went through)
        self._write_failure: str | None = None
        self._growth_failure: str | None = None
        self._broken: str | None = None  # a failed remap left LMDB without a map
        # writes of a store without fsync waiting for this loop turn's commit (see write())
        self._on_loop: list[tuple[Callable[[V], Any], asyncio.Future[Any]]] | None = None
        self._loop_batches = 0
        self._loop_writes = 0
        if readonly and not self.path.is_file():
            raise missing(self.path, recovery) or NotFoundError(f"no store at {self.path}")
        # writemap stays off: LMDB then writes with pwrite, and a full disk is an ENOSPC
        # error; through a writable map of a sparse file it would be a SIGBUS
        options: dict[str, Any] = dict(  # noqa: C408 - lmdb.open's keyword names, as written
            subdir=False, map_size=map_size, max_dbs=len(self._table_spec) + 2, sync=durable,
            metasync=durable, readahead=False, meminit=False, writemap=False,
            max_spare_txns=4)
        fresh = False
        try:
            if not readonly:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                if not self.path.exists():
                    self._refuse_if_held_before(recreate)
                    create_whole(self.path, options, self._initialise)
                    fresh = True
            checked = check_before_map(self.path)
            prepare_lock_file(self.path)
            self.env = lmdb.open(str(self.path), create=False, readonly=readonly, **options)
        except DamagedStoreError as exc:
            raise self._refused(exc) from None
        except (lmdb.Error, OSError) as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        try:
            if not checked:
                check_pinned(self.env, self.path)
            # Reader slots of processes that died (kill -9) stay in the lock file while
            # another process holds it open; they would pin old pages and fill the table.
            self.env.reader_check()
            if not fresh:
                self._check_kind()
            if recovery is not None and not readonly:
                record_store(self.path)
            self.tables = (self._open_tables_readonly() if readonly
                           else self._open_tables(self.env))
        except DamagedStoreError as exc:
            self.env.close()
            raise self._refused(exc) from None
        except lmdb.Error as exc:
            self.env.close()
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        except BaseException:
            self.env.close()
            raise
        self._committer = GroupCommitter(self._run_batch, name=f"writer:{self.path.name}")

    def _refused(self, exc: StoreError) -> StoreError:
        return refused(exc, self.path, self._recovery)

    def _refuse_if_held_before(self, recreate: bool) -> None:
        error = None if recreate else missing(self.path, self._recovery)
        if error is not None:
            raise error

    def _check_kind(self) -> None:
        """A whole LMDB file of another kind (msgid-map.db copied over outbox.db) is foreign."""
        signature = self._table_spec[1].name
        with self.env.begin() as txn:
            present = txn.get(signature) is not None
        if not present:
            raise DamagedStoreError(
                f"{self.path} is an LMDB file but not a {self.path.name}: it has no "
                f"{signature.decode()} table")

    def _initialise(self, env: lmdb.Environment) -> None:
        self._open_tables(env)

    # opening
    def _open_tables(self, env: lmdb.Environment) -> SimpleNamespace:
        while True:
            try:
                txn = env.begin(write=True)
            except lmdb.MapResizedError:
                env.set_mapsize(0)
                continue
            try:
                tables = SimpleNamespace(**{
                    t.attr: env.open_db(t.name, txn=txn, dupsort=t.dupsort)
                    for t in self._table_spec
                })
                view = self.make_view(txn, tables)
                self._check_schema(view, txn, tables)
                view.flush()
                txn.commit()
                return tables
            except lmdb.MapFullError:
                txn.abort()
                env.set_mapsize(env.info()["map_size"] * 2)
            except BaseException:
                txn.abort()
                raise

    def _open_tables_readonly(self) -> SimpleNamespace:
        """The tables of an existing file, nothing written (no table created, no upgrade)."""
        handles: dict[str, Any] = {}
        for t in self._table_spec:
            try:
                # txn=None: py-lmdb opens it in a read transaction of its own and commits it,
                # so the handle outlives it (one opened in our own read transaction would not)
                handles[t.attr] = self.env.open_db(t.name, dupsort=t.dupsort, create=False)
            except lmdb.NotFoundError:
                if t.added_later:
                    handles[t.attr] = None
                    continue
                raise StoreError(f"{self.path} has no table {t.name.decode()}: not a store of "
                                 "this kind, or damaged") from None
        tables = SimpleNamespace(**handles)
        txn = self.begin_read()
        try:
            self._check_schema(self.make_view(txn, tables), txn, tables)
        finally:
            txn.abort()
            self.read_lock.release()
        return tables

    def _check_schema(self, view: V, txn: lmdb.Transaction[bytes], tables: SimpleNamespace) -> None:
        raw = txn.get(_META_SCHEMA, db=tables.meta)
        if raw is None:
            found = self._schema_version if self._is_empty(txn, tables) else 0
        else:
            found = int(decode_value(raw))
        if found > self._schema_version:
            raise SchemaVersionError(
                f"{self.path} has schema_version {found}, but this gensokyo-idmap knows only "
                f"up to {self._schema_version}: run a newer gensokyo-idmap, or restore a backup"
            )
        if self.readonly:
            if found < self._schema_version:
                raise StoreError(
                    f"{self.path} has schema_version {found} and needs an upgrade to "
                    f"{self._schema_version}, which a read-only command does not do: start "
                    "the daemon (or run a command that writes) once first")
            return
        for version in range(found, self._schema_version):
            step = self._upgrades.get(version)
            if step is None:
                raise StoreError(f"{self.path}: no upgrade from schema_version {version}")
            step(view)
            log.info("[idmap] schema upgraded", path=str(self.path), to=version + 1)
        if raw is None or found != self._schema_version:
            txn.put(_META_SCHEMA, encode_value(self._schema_version), db=tables.meta)

    # reads
    def begin_read(self) -> lmdb.Transaction[bytes]:
        """A read transaction, returned with ``read_lock`` held (the caller releases it)."""
        self._check_mapped()
        self.read_lock.acquire()
        try:
            return self.env.begin()
        except lmdb.MapResizedError:
            pass  # another process grew the file: adopt its size, then read
        except BaseException:
            self.read_lock.release()
            raise
        self.read_lock.release()
        self._remap(0)
        self.read_lock.acquire()
        try:
            return self.env.begin()
        except BaseException:
            self.read_lock.release()
            raise

    def read(self) -> _Reading[V]:
        """A consistent snapshot; never waits for the writer."""
        return _Reading(self)

    def _remap(self, size: int) -> None:
        """set_mapsize with no transaction open in this process (0 adopts the file's size).

        The new size is probed first: LMDB unmaps before it maps again, and a failed mmap
        would leave it with no map at all.
        """
        with self.write_lock, self.read_lock:
            self._check_mapped()
            probe_address_space(size or max(self.map_size, self._file_map_size()))
            try:
                self.env.set_mapsize(size)
            except lmdb.Error as exc:
                self._broken = (f"{self.path}: remapping it to {size or 'the file size'} "
                                f"failed ({exc}): unusable until the daemon restarts")
                log.error("[idmap] store unusable until restart", path=str(self.path),
                          reason=self._broken)
                raise StoreError(self._broken) from exc
        if size:
            log.info("[idmap] store map grown", path=str(self.path), map_size=size)

    def _file_map_size(self) -> int:
        """The map size the file's newest meta page asks for (another process grew it)."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            return read_meta(fd, os.fstat(fd).st_size, str(self.path)).map_size
        finally:
            os.close(fd)

    def _check_mapped(self) -> None:
        if self._broken is not None:
            raise StoreError(self._broken)

    def _write_failed(self, exc: lmdb.Error) -> StoreError:
        """Remember why a write failed (``/healthz`` tells it until a write goes through)."""
        error = StoreError(f"{self.path}: write failed: {exc}")
        self._write_failure = f"its last write failed: {exc}"
        log.error("[idmap] store write failed", path=str(self.path), reason=str(exc))
        return error

    def health(self) -> str | None:
        """Why this store cannot take writes now, or None. Reads nothing, writes nothing."""
        return self._broken or self._growth_failure or self._write_failure

    def version(self) -> int:
        """The id of the last transaction committed to the file, by any process: read
        before a snapshot, it is at most that snapshot's (a commit in between shows as a
        newer id later, never as the same one)."""
        self._check_mapped()
        return int(self.env.info()["last_txnid"])

    # writes
    def write(self, fn: Callable[[V], T]) -> Awaitable[T]:
        """Run ``fn`` in a write transaction; the awaitable resolves once it is committed.

        A durable store batches writes on the writer thread (one fsync for many). A store
        without fsync (msgid-map.db) commits in microseconds, so its writes are batched on
        the event loop instead: every write queued during one turn of the loop shares one
        transaction, run right after that turn; two thread hops per write cost more than
        the commit.
        """
        if self._durable:
            return self._committer.submit(fn)
        if self._committer.closed:
            raise StoreError("the store is closed")
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()
        if self._on_loop is None:
            self._on_loop = []
            loop.call_soon(self._commit_on_loop)  # whatever else queues this turn joins in
        self._on_loop.append((fn, done))
        return done

    def _commit_on_loop(self) -> None:
        """One transaction for the writes queued during one turn of the event loop."""
        batch, self._on_loop = self._on_loop or [], None
        try:
            outcomes = self._run_batch([fn for fn, _ in batch])
        except BaseException as exc:  # noqa: BLE001 - the commit failed: every waiter hears it
            outcomes = [Outcome(error=exc) for _ in batch]
        self._loop_batches += 1
        self._loop_writes += len(batch)
        for (_, done), outcome in zip(batch, outcomes, strict=True):
            settle(done, outcome)

    def write_sync(self, fn: Callable[[V], T]) -> T:
        return self._committer.submit_sync(fn)

    @property
    def commit_stats(self) -> tuple[int, int]:
        """(batches committed, write functions run) since open."""
        return (self._committer.batches + self._loop_batches,
                self._committer.writes + self._loop_writes)

    def _run_batch(self, fns: Sequence[Callable[[V], Any]]) -> list[Outcome[Any]]:
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
                raise self._write_failed(exc) from exc

    def _run_alone(self, fn: Callable[[V], Any]) -> Outcome[Any]:
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
                return Outcome(error=self._write_failed(exc))

    def _try_batch(self, fns: Sequence[Callable[[V], Any]]) -> list[Outcome[Any]]:
        with self.write_lock:
            self._check_mapped()
            txn = self.env.begin(write=True)
            committed = False
            try:
                view = self.make_view(txn, self.tables)
                outcomes: list[Outcome[Any]] = []
                for fn in fns:
                    try:
                        outcomes.append(succeeded(fn(view)))
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
                self._write_failure = self._growth_failure = None
                return outcomes
            finally:
                if not committed:
                    txn.abort()

    def transact(self, fn: Callable[[V], T], *, commit: bool = True) -> T:
        """Run ``fn`` alone in one write transaction on the calling thread.

        Unlike :meth:`write`, any exception aborts everything ``fn`` wrote, and nothing is
        batched with it: for long all-or-nothing work (legacy migration). ``commit=False``
        runs it and throws the writes away (a dry run). A full map grows and ``fn`` re-runs
        from the start, so it must not keep state between calls.
        """
        while True:
            try:
                with self.write_lock:
                    self._check_mapped()
                    txn = self.env.begin(write=True)
                    try:
                        view = self.make_view(txn, self.tables)
                        result = fn(view)
                        view.flush()
                        if commit:
                            txn.commit()
                        else:
                            txn.abort()
                        return result
                    except BaseException:
                        txn.abort()
                        raise
            except lmdb.MapFullError:
                self._grow()
            except lmdb.MapResizedError:
                self._remap(0)
            except lmdb.Error as exc:
                raise self._write_failed(exc) from exc

    def _grow(self) -> None:
        self.env.reader_check()  # a dead reader pinning old pages may be why it is full
        try:
            self._remap(self.env.info()["map_size"] * 2)
        except StoreError as exc:
            self._growth_failure = exc.message  # "the map cannot grow to … bytes: …"
            log.error("[idmap] store map cannot grow", path=str(self.path), reason=exc.message)
            raise

    def map_use(self) -> tuple[int, int]:
        """:class:`~gensokyo_idmap.store.base.MappedFile`: LMDB's own figures."""
        info, stat = self.env.info(), self.env.stat()
        return int(info["map_size"]), (int(info["last_pgno"]) + 1) * int(stat["psize"])

    @property
    def map_size(self) -> int:
        return int(self.env.info()["map_size"])

    def release_mapped_pages(self) -> int:
        """Unmap the file's pages read so far (:mod:`.mapped_pages`): the bytes advised.
        Under the read lock, which a remap and the close take: the map stays in place."""
        with self.read_lock:
            if self._committer.closed or self._broken is not None:
                return 0
            return release(self.path)

    def close(self) -> None:
        """Finish queued writes, then close the file."""
        self._committer.close()
        with self.write_lock, self.read_lock:
            self.env.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
