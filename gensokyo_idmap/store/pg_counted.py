"""PostgreSQL connections that count their round trips (``gensokyo_backend_round_trips``).

Counted where the driver sends: a statement outside a pipeline waits for its answer (one
round trip); a pipeline sends its statements together and waits at its end (one, counted
as it ends). Fetches of a server-side cursor within a read are not counted: a listing of
millions of keys is a CLI walk, not the hot path.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

import psycopg

from gensokyo_idmap import counters

__all__ = ["BACKEND", "CountedConnection"]

BACKEND: Final = "postgres"
_ROUND_TRIPS: Final = counters.BACKEND_ROUND_TRIPS.labels(BACKEND)


class CountedConnection(psycopg.Connection[tuple[Any, ...]]):
    """A psycopg connection bumping the round-trip count of PostgreSQL."""

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
