"""The emulated QQ platform alone in a process of its own, for bench/outbound.py.

Run by bench/outbound.py as a subprocess: it prints the platform's base URL on its first
line, then serves until SIGTERM or SIGINT. The second ceiling of the outbound benchmark
calls it directly from the benchmark's process, so that call crosses processes as the
daemon's call to the platform does (a real platform is never in a bot framework's process).
"""

from __future__ import annotations

import asyncio

# _common before the library: importing it configures structlog (see its docstring).
import _common  # noqa: F401
from _serve import stop_on_signals

from gensokyo_idmap.testing.platform_emulator import EmulatedPlatform


async def main() -> None:
    platform = EmulatedPlatform(heartbeat_ms=30_000)
    await platform.start()
    stop = stop_on_signals()
    print(platform.url("/"), flush=True)
    await stop.wait()
    await platform.close()


if __name__ == "__main__":
    asyncio.run(main())
