"""What the benchmarks' helper processes (_bare_relay.py, _bare_action_relay.py,
_emulator_proc.py) share: serving an aiohttp app on ``host:port``, and an event set by
SIGTERM or SIGINT. Nothing of the daemon is imported: a relay must stay bare."""

from __future__ import annotations

import asyncio
import signal

from aiohttp import web


async def listen(app: web.Application, host_port: str) -> web.AppRunner:
    """``app`` served on ``host:port`` (no access log); clean the runner up when done."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, _, port = host_port.rpartition(":")
    await web.TCPSite(runner, host, int(port)).start()
    return runner


def stop_on_signals() -> asyncio.Event:
    """An event that SIGTERM or SIGINT sets (call it with the loop running)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop
