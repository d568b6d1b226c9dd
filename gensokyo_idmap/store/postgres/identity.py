"""The identity graph on PostgreSQL: one graph that several daemons share.

The same :class:`~gensokyo_idmap.store.base.IdentityStore` as openid-map.db on LMDB, so the
graph rules of ``idmap.py`` run unchanged; what LMDB gets from having one writer per file,
PostgreSQL gets from its transactions:

- **One transaction per batch (group commit).** Writes queue on one writer thread
  (:class:`GroupCommitter`, as on LMDB); everything queued while the previous commit was
  running becomes one transaction with one WAL flush. Inside it statements go in pipeline
  mode (only a read waits for its answer), the batch's writes go as one statement per
  table (:mod:`.writes`) and its first reads together (:class:`~.view.PgView`), so 64
  new identities cost a handful of round trips, not 64 transactions.
- **Any number of daemons at once.** Batches run ``SERIALIZABLE``: PostgreSQL aborts one of
  two transactions that saw each other's effects (two daemons allocating from the counter,
  binding into a set another one is rebinding), and the writer re-runs the whole batch
  from the start on a fresh snapshot (write functions keep no state between runs, as the
  protocol says). The rules therefore hold as if one writer ran every batch in some order.
- **Held by the database too.** ``identity_to_vuin`` and ``vuin_to_identity`` reference each
  other, checked at commit (exact inverses, one set per key), vUINs are positive, an alias
  never points at itself (``schema/0001_identity_graph.sql``).
- **Durable before returned.** ``synchronous_commit`` is on for every connection
  (:mod:`.connect`); a waiter is woken only after ``COMMIT`` answered.
- **Reads** run in a ``REPEATABLE READ READ ONLY`` transaction (one snapshot for the whole
  ``with store.read()``) on a pooled connection; :meth:`PgIdentityStore.probe` is one
  statement in autocommit (its own snapshot), the one round trip of a known identity, and
  :meth:`PgIdentityStore.probe_soon` asks the probes of one turn of the event loop in one
  (resolve of new identities: 64 callers cost one round trip before their batch, not 64).

The schema is managed by :mod:`.migrate`: opening applies pending migrations (as LMDB
upgrades an older file), ``readonly`` refuses a database that needs one.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, Final, Self, TypeVar

import psycopg
import structlog
from psycopg import errors as pg_errors
from psycopg_pool import ConnectionPool, PoolTimeout

from gensokyo_idmap import counters
from gensokyo_idmap.errors import IdmapError, StoreError, UnreachableError
from gensokyo_idmap.store.group_commit import GroupCommitter, Outcome
from gensokyo_idmap.store.postgres.connect import (
    check_schema_name,
    connect,
    describe,
    open_pool,
    unreachable,
)
from gensokyo_idmap.store.postgres.connection import BACKEND
from gensokyo_idmap.store.postgres.migrate import migration_status, upgrade
from gensokyo_idmap.store.postgres.view import Conn, PgView, keys_looked_up

__all__ = ["PgIdentityStore", "PgView"]

T = TypeVar("T")
log = structlog.get_logger("gensokyo_idmap.store")

#: How often one batch is re-run after serialization failures before its callers hear it.
MAX_ATTEMPTS: Final = 64
#: While the server is known down, how long a caller waits for a connection (the pool keeps
#: reconnecting in the background) before hearing the StoreError: the hot path's reads run
#: on the event loop, which must not stop for the pool's full timeout on every event.
DOWN_WAIT_SECONDS: Final = 0.05
_ERRORS: Final = counters.BACKEND_ERRORS.labels(BACKEND)
#: Another transaction touched what this one read: run it again on a fresh snapshot.
_RETRYABLE: Final = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)
_DOWN_EFFECT: Final = ("events are not acknowledged and sends that need the graph fail "
                       "(retcode 102) until it answers; the daemon goes back to it by itself")
_BEGIN_WRITE: Final = "BEGIN ISOLATION LEVEL SERIALIZABLE, READ WRITE"
_BEGIN_READ: Final = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"
_PROBE: Final = ("SELECT i.vuin, l.identity FROM identity_to_vuin i LEFT JOIN last_seen l "
                 "ON l.vuin = i.vuin AND l.scene = %s WHERE i.key = %s")
#: :data:`_PROBE` for many (key, scene) pairs at once: a row per pair whose key is known.
_PROBE_MANY: Final = (
    "SELECT q.n, i.vuin, l.identity FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY "
    "AS q(key, scene, n) JOIN identity_to_vuin i ON i.key = q.key "
    "LEFT JOIN last_seen l ON l.vuin = i.vuin AND l.scene = q.scene")

ProbeAnswer = tuple[int | None, bool]


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
                 pool_size: int = 8, wait_for_server: bool = False) -> None:
        """Opens the graph: its schema checked (upgraded unless ``readonly``), then its
        pool. A schema that cannot be read or is refused (:mod:`.migrate`) is a
        StoreError naming the DSN (no password). A server that cannot be reached is an
        :class:`UnreachableError`, unless ``wait_for_server`` (a daemon's start): then the
        store begins in an outage, every call a StoreError as when the server goes away
        later, until :meth:`reach` opens it."""
        self.dsn = dsn
        self.schema = None if schema is None else check_schema_name(schema)
        self.readonly = readonly
        self._pool_size = pool_size
        self._write_failure: str | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._pool: ConnectionPool | None = None
        self._stop_counting_waits: Callable[[], None] = lambda: None
        self._not_open: UnreachableError | None = None  # why the pool is not open yet
        self._down = False  # the server failed us; set again by a connection that worked
        try:
            self._use(self._open())
        except UnreachableError as exc:
            if not wait_for_server:
                raise
            self._not_open = exc
            self._down = True
            _ERRORS.inc()
            log.error("[idmap] postgresql unreachable", database=describe(dsn),
                      reason=exc.message, effect=_DOWN_EFFECT)
        self._committer = GroupCommitter(self._run_batch, name="writer:postgres")
        # probe_soon: the probes asked for in this turn of each event loop
        self._probing: dict[asyncio.AbstractEventLoop,
                            list[tuple[str, str | None, asyncio.Future[ProbeAnswer]]]] = {}
        self.retries = 0

    def _open(self) -> ConnectionPool:
        """The schema checked (or upgraded) on a connection of its own, then the pool."""
        with connect(self.dsn, self.schema) as conn:
            try:
                if self.readonly:
                    status = migration_status(conn)
                    pending = status.pending
                else:
                    pending = ()
                    for migration in upgrade(conn, self.schema):
                        log.info("[idmap] schema upgraded", database=describe(self.dsn),
                                 migration=migration.label)
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                raise unreachable(self.dsn, exc) from None  # the server went away meanwhile
            except psycopg.Error as exc:
                reason = " ".join(str(exc).split()) or type(exc).__name__
                raise StoreError(f"the schema of the identity graph at {describe(self.dsn)} "
                                 f"cannot be read: {reason}") from None
            except StoreError as err:  # refused by migrate: its message names no server
                raise type(err)(f"the identity graph at {describe(self.dsn)}: "
                                f"{err.message}") from None
        if pending:
            raise StoreError(
                f"the identity graph at {describe(self.dsn)} is at schema version "
                f"{status.current:04d} and needs {pending[-1].version:04d}, which a "
                "read-only command does not apply: run `gensokyo-idmap db upgrade` (or start "
                "the daemon) first")
        return open_pool(self.dsn, self.schema, max_size=self._pool_size)

    def _use(self, pool: ConnectionPool) -> None:
        self._stop_counting_waits = counters.BACKEND_POOL_WAITS.pull(
            (BACKEND,), lambda: pool.get_stats().get("requests_queued", 0))
        self._pool = pool

    @property
    def waiting_for_server(self) -> bool:
        """Whether the store began in an outage and is not open yet (:meth:`reach`)."""
        return self._pool is None and not self._closed

    def reach(self) -> bool:
        """Open a store that began in an outage if its server answers now (blocking: on a
        thread); True once open. Raises the StoreError of a schema that is refused, which
        the daemon cannot run on."""
        if self._pool is not None or self._closed:
            return True
        try:
            pool = self._open()
        except UnreachableError as exc:
            self._not_open = exc
            return False
        with self._lock:
            if self._closed:  # closed while this was opening: nobody will use the pool
                pool.close()
                return True
            self._use(pool)
            self._not_open = None
            self._down = False
        log.info("[idmap] postgresql reachable again", database=describe(self.dsn))
        return True

    # connections
    def getconn(self) -> Conn:
        """A pooled connection; while the server is known down, a StoreError after
        :data:`DOWN_WAIT_SECONDS` unless the pool has reconnected by then (at once while
        the store waits to be opened: :meth:`reach`)."""
        pool = self._pool
        if pool is None:
            raise UnreachableError(self._not_open.message if self._not_open is not None
                                   else f"the identity graph at {describe(self.dsn)} is closed")
        try:
            conn: Conn = pool.getconn(DOWN_WAIT_SECONDS if self._down else None)
        except PoolTimeout as exc:
            raise self.failed(exc) from exc
        return conn

    def putconn(self, conn: Conn) -> None:
        if conn.broken:
            self._down = True
        elif self._down and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            self._down = False
            log.info("[idmap] postgresql reachable again", database=describe(self.dsn))
        assert self._pool is not None  # conn came from it
        self._pool.putconn(conn)

    def failed(self, exc: BaseException) -> StoreError:
        """The StoreError for a failure of the server or the connection (no password)."""
        if isinstance(exc, StoreError):
            return exc
        _ERRORS.inc()
        reason = " ".join(str(exc).split()) or type(exc).__name__
        if not isinstance(exc, PoolTimeout | psycopg.OperationalError | psycopg.InterfaceError):
            return StoreError(f"PostgreSQL at {describe(self.dsn)}: {reason}")
        if not self._down:
            self._down = True  # logged once: until a connection works again
            log.error("[idmap] postgresql unreachable", database=describe(self.dsn),
                      reason=reason, effect=_DOWN_EFFECT)
        return UnreachableError(f"PostgreSQL at {describe(self.dsn)}: {reason}")

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

    def probe_many(self, wanted: Sequence[tuple[str, str | None]]) -> list[ProbeAnswer]:
        """:meth:`probe` of each (key, scene) of ``wanted``: one statement for all."""
        conn = self.getconn()
        try:
            rows = conn.execute(_PROBE_MANY, ([key for key, _ in wanted],
                                              [scene for _, scene in wanted])).fetchall()
        except psycopg.Error as exc:
            raise self.failed(exc) from exc
        finally:
            self.putconn(conn)
        answers: list[ProbeAnswer] = [(None, False)] * len(wanted)
        for n, vuin, identity in rows:
            key, scene = wanted[n - 1]
            answers[n - 1] = (int(vuin), scene is not None and identity == key)
        return answers

    def probe_cached(self, key: str, scene: str | None) -> tuple[int, bool] | None:
        """Nothing is known here without asking the server (a cache wraps this store)."""
        return None

    def probe_soon(self, key: str, scene: str | None) -> asyncio.Future[ProbeAnswer]:
        """:meth:`probe`, answered at the end of this turn of the event loop together with
        every other probe asked for in it: one round trip for all. New identities are
        looked up first and then written by the writer thread, whose batch commits while
        the loop waits; 64 callers probing one round trip each, one after the other,
        made that lookup cost as much as the batch itself. The round trip blocks the
        loop, as :meth:`probe` does (bounded by ``WAIT_LIMIT``), once per turn."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[ProbeAnswer] = loop.create_future()
        asked = self._probing.get(loop)
        if asked is None:
            asked = self._probing[loop] = []
            loop.call_soon(self._probe_asked, loop)
        asked.append((key, scene, answer))
        return answer

    def _probe_asked(self, loop: asyncio.AbstractEventLoop) -> None:
        asked = [item for item in self._probing.pop(loop, ()) if not item[2].done()]
        if not asked:
            return
        try:
            answers = self.probe_many([(key, scene) for key, scene, _ in asked])
        except Exception as exc:  # noqa: BLE001 - every caller of the round trip hears it
            for _, _, answer in asked:
                answer.set_exception(exc)
            return
        for (_, _, answer), found in zip(asked, answers, strict=True):
            answer.set_result(found)

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
                        view.prefetch(keys_looked_up(fns))
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

    # LegacyTables: the old buckets are tables of the same schema, read and written in the
    # same transactions as the graph (the view serves both).
    def read_legacy(self) -> _Reading:
        return self.read()

    def write_legacy(self, fn: Callable[[PgView], T]) -> Awaitable[T]:
        return self.write(fn)

    def health(self) -> str | None:
        """Why writes fail now (the last one failed, the store is not open yet), or None;
        asks nothing of the server."""
        if self._pool is None and self._not_open is not None:
            return f"not open yet: {self._not_open.message}"
        return self._write_failure

    def version(self) -> None:
        """None: what other daemons commit is known only by asking the server."""
        return None

    def close(self) -> None:
        """Finish queued writes, then close every connection."""
        with self._lock:
            self._closed = True
            self._committer.close()
            self._stop_counting_waits()
            if self._pool is not None:
                self._pool.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
