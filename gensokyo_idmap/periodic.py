"""One clock for the daemon's background chores (the msgid sweep, the memory trim).

Each chore waits for its interval *or* the stop event, whichever comes first, so a stop is
never held up by a sleeping chore.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

__all__ = ["every"]


async def every(interval_seconds: float, stop: asyncio.Event) -> AsyncIterator[None]:
    """Yield once per ``interval_seconds`` until ``stop`` is set (not at the start)."""
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), timeout=interval_seconds)
        except TimeoutError:
            pass
        if stop.is_set():
            return
        yield
