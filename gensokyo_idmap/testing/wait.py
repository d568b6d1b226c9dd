"""Waiting in tests without sleeping a fixed time: poll a condition, bounded by a timeout.

A test that waits for something another process or task does (a framework connected, an
event arrived, a port listening) polls for it; the timeout only bounds a failure, so a slow
machine makes a test slower, never red.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["until", "until_listening"]

#: How long a wait may last unless the caller says otherwise (a bound for failures only).
DEFAULT_TIMEOUT = 10.0


async def until(condition: Callable[[], object], timeout: float = DEFAULT_TIMEOUT,
                what: str | Callable[[], str] = "the condition", *,
                alive: Callable[[], object] | None = None, interval: float = 0.01) -> None:
    """Return once ``condition()`` is true; after ``timeout`` seconds raise AssertionError
    naming ``what`` (a callable is asked only then, so it may read a log tail).

    ``alive``, as for :func:`until_listening`, is called before each look and raises when
    what should make the condition true died: the test fails at once, with that error."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        if alive is not None:
            alive()
        if condition():
            return
        if loop.time() > deadline:
            text = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout} s waiting for {text}")
        await asyncio.sleep(interval)


async def until_listening(port: int, timeout: float = DEFAULT_TIMEOUT, *,
                          host: str = "127.0.0.1",
                          alive: Callable[[], object] | None = None) -> None:
    """Return once something accepts TCP connections on ``host:port``.

    ``alive`` is called before each attempt: it raises when whatever should be listening
    died (``task.result`` of a finished task, say), so the test fails with that error at
    once instead of after the timeout."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        if alive is not None:
            alive()
        try:
            _, writer = await asyncio.open_connection(host, port)
        except OSError:
            if loop.time() > deadline:
                raise AssertionError(f"nothing listens on {host}:{port} after {timeout} s"
                                     ) from None
            await asyncio.sleep(0.01)
            continue
        writer.close()
        await writer.wait_closed()
        return
