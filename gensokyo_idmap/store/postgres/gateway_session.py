"""The gateway session of one bot and shard in PostgreSQL (``gateway_session``, migration
0003), for daemons whose identity graph is there (``idmap.backend: postgres``).

The gateway client saves its session id and watermark seq up to 20 times a second, from
the event loop; a round trip (let alone a server that does not answer) must not stall the
loop. So :meth:`PgGatewaySession.save` only hands the newest state to a writer thread,
which writes whatever is newest when it gets to it (each write replaces the row: older
states are superseded, never needed). A write that fails is retried with the newest
state until it goes through; the failure is logged once. What is lost meanwhile is only
progress: the seq saved is never ahead of what was processed, so a restart replays a few
events more (de-duplicated), never fewer.

:meth:`load` is the one call that waits for the server: at start, before the session
begins (the daemon has just opened the graph on the same server).
"""

from __future__ import annotations

import threading
from typing import Final

import psycopg
import structlog

from gensokyo_idmap.errors import StoreError
from gensokyo_idmap.store.postgres.connect import connect, describe

__all__ = ["PgGatewaySession"]

log = structlog.get_logger("gensokyo_idmap.store")

#: How long the writer waits before trying a failed write again.
RETRY_SECONDS: Final = 1.0
#: How long :meth:`PgGatewaySession.close` waits for the last state to be written.
CLOSE_SECONDS: Final = 5.0

_LOAD: Final = ("SELECT session_id, seq FROM gateway_session "
                "WHERE app_id = %s AND shard_index = %s AND shard_count = %s")
_SAVE: Final = ("INSERT INTO gateway_session (app_id, shard_index, shard_count, session_id, "
                "seq) VALUES (%s, %s, %s, %s, %s) ON CONFLICT (app_id, shard_index, "
                "shard_count) DO UPDATE SET session_id = EXCLUDED.session_id, "
                "seq = EXCLUDED.seq, updated_at = now()")

_Conn = psycopg.Connection[tuple[object, ...]]


class PgGatewaySession:
    """``load`` / ``save`` of the session of ``app_id``'s shard ``[index, count]`` (the
    gateway client's state); :meth:`close` writes the last state saved."""

    def __init__(self, dsn: str, app_id: str, shard: tuple[int, int], *,
                 schema: str | None = None, retry_seconds: float = RETRY_SECONDS) -> None:
        self.dsn = dsn
        self.schema = schema
        self.key = (app_id, shard[0], shard[1])
        self._retry_seconds = retry_seconds
        self._changed = threading.Condition()
        self._newest: tuple[str | None, int | None] | None = None  # not written yet
        self._loaded: tuple[str | None, int | None] | None = None  # as read, then as saved
        self._closing = False
        self._conn: _Conn | None = None
        self._failing = False
        self._log = log.bind(database=describe(dsn), app_id=app_id, shard=list(shard))
        self._writer = threading.Thread(target=self._write_loop, daemon=True,
                                        name=f"gateway-session-{shard[0]}-of-{shard[1]}")
        self._writer.start()
        self.writes = 0

    def load(self) -> tuple[str | None, int | None]:
        """(session id, seq) last saved for this shard; (None, None) if none was. Read from
        the server once: after that this daemon is the shard's one writer, and the answer
        is what it saved last."""
        with self._changed:
            if self._loaded is not None:
                return self._loaded
        try:
            with connect(self.dsn, self.schema) as conn:
                row = conn.execute(_LOAD, self.key).fetchone()
        except psycopg.Error as exc:
            raise StoreError(f"the gateway session at {describe(self.dsn)} cannot be read: "
                             f"{' '.join(str(exc).split())}") from None
        loaded: tuple[str | None, int | None] = (None, None)
        if row is not None:
            session_id, seq = row
            loaded = (None if session_id is None else str(session_id),
                      None if seq is None else int(str(seq)))
        with self._changed:
            self._loaded = loaded
        return loaded

    def save(self, session_id: str | None, seq: int | None) -> bool:
        """Hand the state to the writer (never waits for the server): True."""
        with self._changed:
            self._newest = self._loaded = (session_id, seq)
            self._changed.notify()
        return True

    def close(self) -> None:
        """Write the last state saved (waiting :data:`CLOSE_SECONDS` at most), then stop."""
        with self._changed:
            self._closing = True
            self._changed.notify()
        self._writer.join(CLOSE_SECONDS)
        if self._writer.is_alive():
            self._log.warning("[qq] gateway session not saved at stop: the next start "
                              "resumes from an earlier seq (events come again, none lost)")

    def _write_loop(self) -> None:
        while True:
            with self._changed:
                while self._newest is None and not self._closing:
                    self._changed.wait()
                state, self._newest = self._newest, None
                closing = self._closing
            if state is not None and not self._write(state):
                with self._changed:
                    if self._newest is None:
                        self._newest = state  # nothing newer came: try this one again
                if closing:
                    break
                with self._changed:
                    self._changed.wait_for(lambda: self._closing, self._retry_seconds)
                continue
            if closing:
                break
        if self._conn is not None:
            self._conn.close()

    def _write(self, state: tuple[str | None, int | None]) -> bool:
        try:
            if self._conn is None or self._conn.closed:
                self._conn = connect(self.dsn, self.schema)
            self._conn.execute(_SAVE, (*self.key, *state))
        except (psycopg.Error, StoreError) as exc:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if not self._failing:
                self._failing = True
                reason = exc.message if isinstance(exc, StoreError) else " ".join(
                    str(exc).split())
                self._log.error("[qq] gateway session not saved", reason=reason,
                                effect="a restart now would resume from an earlier seq "
                                       "(events come again, none lost); retried")
            return False
        self.writes += 1
        if self._failing:
            self._failing = False
            self._log.info("[qq] gateway session saved again")
        return True
