"""The identity graph on PostgreSQL: one graph that several daemons share.

The same :class:`~gensokyo_idmap.store.base.IdentityStore` as openid-map.db on LMDB, so the
graph rules of ``idmap.py`` run unchanged; what LMDB gets from having one writer per file,
PostgreSQL gets from its transactions:

- **One transaction per batch (group commit).** Writes queue on one writer thread
  (:class:`GroupCommitter`, as on LMDB); everything queued while the previous commit was
  running becomes one transaction with one WAL flush. Inside it the statements are sent in
  pipeline mode: a write does not wait for its answer, only a read does, so a new identity
  costs two round trips of the batch's transaction, not one transaction.
- **Any number of daemons at once.** Batches run ``SERIALIZABLE``: PostgreSQL aborts one of
  two transactions that saw each other's effects (two daemons allocating from the counter,
  binding into a set another one is rebinding), and the writer re-runs the whole batch
  from the start on a fresh snapshot (write functions keep no state between runs, as the
  protocol says). The rules therefore hold as if one writer ran every batch in some order.
- **Held by the database too.** ``identity_to_vuin`` and ``vuin_to_identity`` reference each
  other, checked at commit (exact inverses, one set per key), vUINs are positive, an alias
  never points at itself (``pg_schema/0001_identity_graph.sql``).
- **Durable before returned.** ``synchronous_commit`` is on for every connection
  (:mod:`pg_connect`); a waiter is woken only after ``COMMIT`` answered.
- **Reads** run in a ``REPEATABLE READ READ ONLY`` transaction (one snapshot for the whole
  ``with store.read()``) on a pooled connection; :meth:`PgIdentityStore.probe` is one
  statement in autocommit (its own snapshot), the one round trip of a known identity.

The schema is managed by :mod:`pg_migrate`: opening applies pending migrations (as LMDB
upgrades an older file), ``readonly`` refuses a database that needs one.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from types import TracebackType
from typing import Any, Final, LiteralString, Self, TypeVar

import psycopg
import structlog
from psycopg import errors as pg_errors
from psycopg.types.json import Jsonb
from psycopg_pool import PoolTimeout

from gensokyo_idmap.errors import IdmapError, StoreError
from gensokyo_idmap.store.base import IdentityWriter, LastSeen, TableCounts
from gensokyo_idmap.store.group_commit import GroupCommitter, Outcome
from gensokyo_idmap.store.pg_connect import check_schema_name, connect, describe, open_pool
from gensokyo_idmap.store.pg_migrate import migration_status, upgrade
from gensokyo_idmap.store.pg_writes import PendingWrites

__all__ = ["MAX_SCENE_BYTES", "PgIdentityStore", "PgView"]

T = TypeVar("T")
Conn = psycopg.Connection[tuple[Any, ...]]
log = structlog.get_logger("gensokyo_idmap.store")

MAX_SCENE_BYTES: Final = 400
_COUNTER: Final = "vuin_counter"
#: How often one batch is re-run after serialization failures before its callers hear it.
MAX_ATTEMPTS: Final = 64
#: Rows a server-side cursor of a read fetches per round trip.
_ITER_ROWS: Final = 2000
#: Another transaction touched what this one read: run it again on a fresh snapshot.
_RETRYABLE: Final = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)
_BEGIN_WRITE: Final = "BEGIN ISOLATION LEVEL SERIALIZABLE, READ WRITE"
_BEGIN_READ: Final = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"
_PROBE: Final = ("SELECT i.vuin, l.identity FROM identity_to_vuin i LEFT JOIN last_seen l "
                 "ON l.vuin = i.vuin AND l.scene = %s WHERE i.key = %s")
#: The vUINs in use above a floor: those with an identity set, and aliases with targets.
_TAIL_ABOVE: Final = ("SELECT DISTINCT vuin, NULL::bigint FROM vuin_to_identity WHERE vuin > %s "
                      "UNION ALL SELECT old, new FROM vuin_alias WHERE old > %s")
_STORED_COUNTER: Final = ("coalesce((SELECT (value #>> '{}')::bigint FROM meta "
                          "WHERE name = 'vuin_counter'), 0)")
#: :data:`_TAIL_ABOVE` over the counter as stored (read in the same snapshot).
_TAIL_ABOVE_STORED: Final = _TAIL_ABOVE.replace("%s", _STORED_COUNTER)
_cursor_ids = itertools.count(1)


def _check_scene(scene: str) -> str:
    if len(scene.encode("utf-8")) > MAX_SCENE_BYTES:
        raise ValueError(f"scene name longer than {MAX_SCENE_BYTES} bytes")
    return scene


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


class PgView(IdentityWriter):
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
        self._pending = PendingWrites()  # graph writes not sent yet (pg_writes)

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
                        (vuin, _check_scene(scene)))
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
            "(SELECT count(*) FROM last_seen), (SELECT count(*) FROM vuin_alias), "
            "(SELECT count(*) FROM config), (SELECT count(*) FROM user_info)", ())
        assert row is not None
        return TableCounts(*(int(n) for n in row))

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
        self._pending.last_seen[vuin, _check_scene(scene)] = seen

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

    # the legacy-compatible tables (config, UserInfo), byte for byte
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


def _keys_looked_up(fns: Sequence[Callable[[PgView], Any]]) -> list[str]:
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


class _Reading:
    """``with store.read() as view:`` - one read-only snapshot on a pooled connection."""

    __slots__ = ("_conn", "_store", "_view")

    def __init__(self, store: PgIdentityStore) -> None:
        self._store = store
        self._conn: Conn | None = None
        self._view: PgView | None = None

    def __enter__(self) -> PgView:
        conn = self._store.getconn()
        try:
            conn.execute(_BEGIN_READ)
        except BaseException as exc:
            self._store.putconn(conn)
            raise self._store.failed(exc) from exc
        self._conn = conn
        self._view = PgView(conn, streaming=True)
        return self._view

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            _end(conn)
            self._store.putconn(conn)
        self._view = None
        if isinstance(exc, psycopg.Error):  # the server or the connection failed mid-read
            raise self._store.failed(exc) from exc


def _end(conn: Conn) -> None:
    """Roll back whatever ``conn`` has open (a connection that broke is left to the pool,
    which drops it)."""
    try:
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.execute("ROLLBACK")
    except psycopg.Error:
        pass  # broken: the pool sees its state and discards it


class _Retry(Exception):
    """PostgreSQL aborted the batch's transaction for a conflict: run it again."""


class _BrokenBatch(Exception):
    """A write function (or the commit) failed in a way that may have left partial writes:
    run each function alone so only its own callers hear it."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class PgIdentityStore:
    """The identity graph in one PostgreSQL schema (``schema``, else the DSN's
    ``search_path``). Open one per process and graph; several processes may open the
    same one."""

    def __init__(self, dsn: str, *, schema: str | None = None, readonly: bool = False,
                 pool_size: int = 8) -> None:
        self.dsn = dsn
        self.schema = None if schema is None else check_schema_name(schema)
        self.readonly = readonly
        self._write_failure: str | None = None
        self._lock = threading.Lock()
        with connect(dsn, self.schema) as conn:
            if readonly:
                status = migration_status(conn)
                if status.pending:
                    raise StoreError(
                        f"the identity graph at {describe(dsn)} is at schema version "
                        f"{status.current:04d} and needs {status.pending[-1].version:04d}, "
                        "which a read-only command does not apply: run `gensokyo-idmap db "
                        "upgrade` (or start the daemon) first")
            else:
                for migration in upgrade(conn, self.schema):
                    log.info("[idmap] schema upgraded", database=describe(dsn),
                             migration=migration.label)
        self._pool = open_pool(dsn, self.schema, max_size=pool_size)
        self._committer = GroupCommitter(self._run_batch, name="writer:postgres")
        self.retries = 0

    # connections
    def getconn(self) -> Conn:
        try:
            conn: Conn = self._pool.getconn()
        except PoolTimeout as exc:
            raise self.failed(exc) from exc
        return conn

    def putconn(self, conn: Conn) -> None:
        self._pool.putconn(conn)

    def failed(self, exc: BaseException) -> StoreError:
        """The StoreError for a failure of the server or the connection (no password)."""
        if isinstance(exc, StoreError):
            return exc
        reason = " ".join(str(exc).split()) or type(exc).__name__
        return StoreError(f"PostgreSQL at {describe(self.dsn)}: {reason}")

    # reads
    def read(self) -> _Reading:
        """A consistent snapshot (a read-only transaction); never waits for writers."""
        return _Reading(self)

    def probe(self, key: str, scene: str | None) -> tuple[int | None, bool]:
        """The vUIN of ``key``, and whether ``key`` is already last seen in ``scene``: one
        statement, one round trip."""
        conn = self.getconn()
        try:
            row = conn.execute(_PROBE, (scene, key)).fetchone()
        except psycopg.Error as exc:
            raise self.failed(exc) from exc
        finally:
            self.putconn(conn)
        if row is None:
            return None, False
        return int(row[0]), scene is not None and row[1] == key

    # writes
    def write(self, fn: Callable[[PgView], T]) -> Awaitable[T]:
        """Run ``fn`` in the next batch's transaction; resolves once that is committed."""
        self._refuse_if_readonly()
        return self._committer.submit(fn)

    def write_sync(self, fn: Callable[[PgView], T]) -> T:
        self._refuse_if_readonly()
        return self._committer.submit_sync(fn)

    def _refuse_if_readonly(self) -> None:
        if self.readonly:
            raise StoreError(f"the identity graph at {describe(self.dsn)} was opened read-only")

    @property
    def commit_stats(self) -> tuple[int, int]:
        """(batches committed, write functions run) since open."""
        return self._committer.batches, self._committer.writes

    def _run_batch(self, fns: Sequence[Callable[[PgView], Any]]) -> list[Outcome[Any]]:
        try:
            return self._with_retries(lambda: self._attempt(fns))
        except _BrokenBatch:
            return [self._run_alone(fn) for fn in fns]
        except psycopg.Error as exc:
            raise self._write_failed(exc) from exc

    def _run_alone(self, fn: Callable[[PgView], Any]) -> Outcome[Any]:
        try:
            return self._with_retries(lambda: self._attempt([fn]))[0]
        except _BrokenBatch as broken:
            cause = broken.cause
            if isinstance(cause, psycopg.Error):
                cause = self.failed(cause)
            return Outcome(error=cause)
        except psycopg.Error as exc:
            return Outcome(error=self._write_failed(exc))

    def _with_retries(self, attempt: Callable[[], T]) -> T:
        for tries in range(MAX_ATTEMPTS):
            try:
                result = attempt()
            except _Retry:
                self.retries += 1
                # the other transaction is committing: give it a moment, longer each time
                time.sleep(random.uniform(0, min(0.05, 0.001 * 2 ** tries)))
                continue
            self._write_failure = None
            return result
        raise StoreError(f"a write to the identity graph at {describe(self.dsn)} conflicted "
                         f"with other writers {MAX_ATTEMPTS} times in a row; gave up")

    def _attempt(self, fns: Sequence[Callable[[PgView], Any]]) -> list[Outcome[Any]]:
        """One transaction for ``fns``, committed before this returns, or raises."""
        conn = self.getconn()
        try:
            outcomes: list[Outcome[Any]] = []
            failure: psycopg.Error | None = None
            try:
                with conn.pipeline():
                    try:
                        conn.execute(_BEGIN_WRITE, prepare=False)  # (see PgView._prepare)
                        view = PgView(conn, streaming=False)
                        view.prefetch(_keys_looked_up(fns))
                        for fn in fns:
                            try:
                                outcomes.append(Outcome(value=fn(view)))
                            except IdmapError as exc:  # raised before any write, by contract
                                outcomes.append(Outcome(error=exc))
                        view.flush()
                        conn.execute("COMMIT", prepare=False)
                    except psycopg.Error as exc:
                        # leave the block quietly: its end reports the aborted pipeline
                        # (psycopg would log a warning for every conflict otherwise)
                        failure = exc
            except psycopg.Error as exc:
                failure = failure or exc  # the answer to COMMIT, or the pipeline's end
            if failure is not None:
                raise failure
            return outcomes  # the pipeline's end waited for COMMIT's answer
        except _RETRYABLE as exc:
            _end(conn)
            raise _Retry() from exc
        except (psycopg.OperationalError, psycopg.InterfaceError):
            _end(conn)
            raise  # the server or the connection: every caller of the batch hears it
        except Exception as exc:
            _end(conn)
            raise _BrokenBatch(exc) from exc
        except BaseException:
            _end(conn)
            raise
        finally:
            self.putconn(conn)

    def _write_failed(self, exc: psycopg.Error) -> StoreError:
        error = self.failed(exc)
        self._write_failure = f"its last write failed: {error.message}"
        log.error("[idmap] store write failed", database=describe(self.dsn),
                  reason=error.message)
        return error

    def transact(self, fn: Callable[[PgView], T], *, commit: bool = True) -> T:
        """Run ``fn`` alone in one transaction on the calling thread: any exception aborts
        everything it wrote (long all-or-nothing work). ``commit=False`` throws the writes
        away. A conflict re-runs ``fn`` from the start, so it must not keep state."""
        self._refuse_if_readonly()

        def attempt() -> T:
            conn = self.getconn()
            try:
                conn.execute(_BEGIN_WRITE)
                view = PgView(conn, streaming=False)
                result = fn(view)
                view.flush()
                conn.execute("COMMIT" if commit else "ROLLBACK")
                return result
            except _RETRYABLE as exc:
                raise _Retry() from exc
            except psycopg.Error as exc:
                raise self._write_failed(exc) from exc
            finally:
                _end(conn)
                self.putconn(conn)

        return self._with_retries(attempt)

    def health(self) -> str | None:
        """Why writes fail now (the last one failed), or None; asks nothing of the server."""
        return self._write_failure

    def close(self) -> None:
        """Finish queued writes, then close every connection."""
        with self._lock:
            self._committer.close()
            self._pool.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
