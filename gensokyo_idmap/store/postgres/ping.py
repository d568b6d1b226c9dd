"""``select 1`` on PostgreSQL for ``/healthz``, on a connection of its own.

The store's pool is blocking (its calls run on the writer thread or briefly on the loop);
a health probe must not wait behind them, nor block the event loop while the server does
not answer. So the probe holds one asyncio connection of its own, made on first use and
dropped after any failure or cancellation (a probe cut short by its timeout leaves the
connection mid-query), so the next probe starts from a fresh connection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import psycopg

from gensokyo_idmap.errors import StoreError
from gensokyo_idmap.store.postgres.connect import describe, unreachable

__all__ = ["PgPing"]

#: libpq's own limit on making the connection (whole seconds, at least 2); the caller's
#: timeout (``health.SERVER_TIMEOUT_SECONDS``) is usually the shorter one.
_CONNECT_TIMEOUT: Final = 2


class PgPing:
    """Asks one PostgreSQL server ``select 1``; reads nothing of ours, writes nothing.

    ``known`` is the store's own knowledge (``PgIdentityStore.health``: its last write
    failed): a server that answers while the store's writes fail is still a problem."""

    def __init__(self, dsn: str, known: Callable[[], str | None] = lambda: None) -> None:
        self._dsn = dsn
        self._known = known
        self._conn: psycopg.AsyncConnection[tuple[object, ...]] | None = None
        self.server = f"postgresql at {describe(dsn)}"

    async def ping(self) -> None:
        """Returns once the server answered; raises (a StoreError, no password) if not."""
        try:
            if self._conn is None or self._conn.closed:
                self._conn = await psycopg.AsyncConnection.connect(
                    self._dsn, autocommit=True, connect_timeout=_CONNECT_TIMEOUT)
            await self._conn.execute("select 1")
        except BaseException as exc:
            await self.aclose()
            if isinstance(exc, psycopg.Error):
                raise unreachable(self._dsn, exc) from None
            raise
        problem = self._known()
        if problem is not None:
            raise StoreError(problem)

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.close()
            except psycopg.Error:
                pass  # broken already: nothing to close politely
