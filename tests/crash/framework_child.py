"""A OneBot framework in its own process, for tests/crash/test_delivery_faults.py: a reverse-WS
endpoint that records every message event it receives.

    python tests/crash/framework_child.py PORT RECORD_FILE

Listens on ``ws://127.0.0.1:PORT/ws`` and prints ``ready`` once it does. Every message
event read is appended to RECORD_FILE as one line, its ``raw_message``, with a single
``os.write`` (the page cache keeps it when this process is killed). It answers pings itself
(``autoping`` off) and fsyncs the file first, so a pong, which tells the daemon the events
before it were delivered, always comes after they are durably recorded: what this framework
confirmed can never be missing from the file.

Faults the test injects: SIGSTOP / SIGCONT / SIGKILL from outside; SIGUSR1 closes every
connection with a close frame (a clean disconnect); SIGUSR2 drops every TCP connection
without one (abrupt). SIGTERM stops it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

from aiohttp import WSMsgType, web


async def main(port: int, record: str) -> None:
    fd = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sockets: set[web.WebSocketResponse] = set()
    stop = asyncio.Event()

    async def handle(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=False)
        await ws.prepare(request)
        sockets.add(ws)
        try:
            async for message in ws:
                if message.type == WSMsgType.PING:
                    os.fsync(fd)  # recorded durably before it is confirmed
                    await ws.pong(message.data)
                elif message.type == WSMsgType.TEXT:
                    frame = json.loads(message.data)
                    if frame.get("post_type") == "message":
                        os.write(fd, frame["raw_message"].encode() + b"\n")
        finally:
            sockets.discard(ws)
        return ws

    def close_cleanly() -> None:
        for ws in list(sockets):
            asyncio.ensure_future(ws.close())

    def drop() -> None:
        for ws in list(sockets):
            transport = ws._req.transport if ws._req is not None else None
            if transport is not None:
                transport.abort()

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, close_cleanly)
    loop.add_signal_handler(signal.SIGUSR2, drop)
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    app = web.Application()
    app.router.add_get("/ws", handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    os.write(1, b"ready\n")
    await stop.wait()
    await runner.cleanup()
    os.close(fd)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
