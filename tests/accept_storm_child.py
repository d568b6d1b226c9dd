"""A listener that runs out of file descriptors, for the accept-error test of http_guard.

Run as ``python tests/accept_storm_child.py SECONDS INTERVAL`` under a small open-files
limit: logs as the daemon does, routes the loop's accept errors through
``quiet_accept_errors(loop, INTERVAL)``, listens on 127.0.0.1 (the port goes to stdout),
keeps every connection it accepts open for SECONDS, then closes the listener, lets the
accept retries asyncio scheduled meanwhile fire (one second later), and exits.
"""

from __future__ import annotations

import asyncio
import sys

from gensokyo_idmap.http_guard import quiet_accept_errors
from gensokyo_idmap.logging import configure_logging, flush_logs


class Holder(asyncio.Protocol):
    """Keeps its connection open (it holds a descriptor) and ignores what comes."""


async def main(seconds: float, interval: float) -> None:
    configure_logging("info")
    loop = asyncio.get_running_loop()
    restore = quiet_accept_errors(loop, interval)
    server = await loop.create_server(Holder, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.sleep(seconds)
    server.close()
    await asyncio.sleep(1.5)  # asyncio's ACCEPT_RETRY_DELAY is 1 s
    restore()
    flush_logs()


if __name__ == "__main__":
    asyncio.run(main(float(sys.argv[1]), float(sys.argv[2])))
