"""Stopping: no listener holds the stop."""

from __future__ import annotations

import asyncio

WAIT = 30.0


def test_a_request_that_never_ends_holds_a_listener_for_seconds_not_a_minute() -> None:
    """A listener's clean-up (the stop sequence) waits a bounded time for requests in flight.

    A handler that never returns stands for what was seen under load: a forward-WS framework
    reconnecting while the server stopped left a connection the clean-up waited a full
    minute (aiohttp's default) for. The bound below (30 s) is far above SHUTDOWN_SECONDS and
    far below that minute.
    """
    from aiohttp import ClientSession, ClientTimeout, web

    from gensokyo_idmap.app import SHUTDOWN_SECONDS, _listen

    from .loopback import free_port

    async def stuck(request: web.Request) -> web.Response:
        entered.set()
        await asyncio.Event().wait()  # never
        raise AssertionError("unreachable")

    async def scenario() -> None:
        port = free_port()
        runner = await _listen([web.get("/", stuck)], f"127.0.0.1:{port}", "test")
        async with ClientSession(timeout=ClientTimeout(total=60)) as session:
            request = asyncio.create_task(session.get(f"http://127.0.0.1:{port}/"))
            await asyncio.wait_for(entered.wait(), WAIT)
            await asyncio.wait_for(runner.cleanup(), 30)
            await asyncio.gather(request, return_exceptions=True)  # cut short: no answer

    entered = asyncio.Event()
    assert SHUTDOWN_SECONDS < 30
    asyncio.run(scenario())
