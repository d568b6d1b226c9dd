"""The connection class of our PostgreSQL pools: it counts round trips and, in the daemon,
bounds how long a read waits for an answer.

**Round trips** (``gensokyo_backend_round_trips``) are counted where the driver sends: a
statement outside a pipeline waits for its answer (one round trip); a pipeline sends its
statements together and waits at its end (one, counted as it ends). Fetches of a
server-side cursor within a read are not counted: a listing of millions of keys is a CLI
walk, not the hot path.

**The daemon waits at most** :data:`WAIT_LIMIT` seconds (``LOOP_WAIT_SECONDS``, set by
the daemon for its event loop). The graph's hot-path reads (a known identity's probe, a read
snapshot) run on the daemon's event loop with this blocking driver, a send's reads on a
worker thread; a server that accepts a statement and never answers (hung, or a network that
drops packets without a reset) would otherwise stop the whole daemon, ``/healthz``
included, until it answers. So such a wait gives up: the connection is dropped (it was left
mid-statement) and the caller gets an ``OperationalError``, which the store turns into its
StoreError and its "server down" state.

The limit is a context variable: the tasks of the daemon's loop and the work they hand to
``asyncio.to_thread`` inherit it; the writer thread of group commit and the CLI do not, so
a transaction that legitimately runs long (a batch, ``store copy``) is never cut.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final

import psycopg
from psycopg import errors as pg_errors

from gensokyo_idmap import counters

__all__ = ["BACKEND", "LOOP_WAIT_SECONDS", "WAIT_LIMIT", "PgConnection"]

BACKEND: Final = "postgres"
#: Far above a healthy answer (well under a millisecond on a local server, a count of a
#: big table in a few hundred), far below what a stopped event loop may cost.
LOOP_WAIT_SECONDS: Final = 2.0
#: How long a wait for the server may take in this context (None: as long as it takes).
WAIT_LIMIT: Final[ContextVar[float | None]] = ContextVar("gsk_pg_wait_limit", default=None)
_ROUND_TRIPS: Final = counters.BACKEND_ROUND_TRIPS.labels(BACKEND)
#: psycopg 3.3 added the timeout of ``Connection.wait``; an older one waits as it always did.
_CAN_BOUND: Final = "timeout" in inspect.signature(psycopg.Connection.wait).parameters
_WAIT_TIMEOUT: Final[type[BaseException] | None] = getattr(pg_errors, "_WaitTimeout", None)


class PgConnection(psycopg.Connection[tuple[Any, ...]]):
    """A psycopg connection that counts its round trips and waits for an answer at most
    :data:`WAIT_LIMIT` seconds where that is set."""

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        if self._pipeline is None:
            _ROUND_TRIPS.inc()
        return super().execute(*args, **kwargs)

    @contextmanager
    def pipeline(self) -> Iterator[psycopg.Pipeline]:
        outer = self._pipeline is None
        try:
            with super().pipeline() as pipeline:
                yield pipeline
        finally:
            if outer:
                _ROUND_TRIPS.inc()

    def wait(self, gen: Any, *args: Any, **kwargs: Any) -> Any:
        limit = WAIT_LIMIT.get()
        if (limit is None or not _CAN_BOUND or _WAIT_TIMEOUT is None or len(args) > 1
                or kwargs.get("timeout") is not None):
            return super().wait(gen, *args, **kwargs)
        kwargs["timeout"] = limit
        try:
            return super().wait(gen, *args, **kwargs)
        except _WAIT_TIMEOUT:
            self.pgconn.finish()  # mid-statement: unusable; the pool drops a closed one
            raise psycopg.OperationalError(
                f"no answer within {limit:g} s (the server hangs, or the network to it)"
            ) from None
