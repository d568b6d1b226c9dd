"""A TCP proxy on loopback in front of the shared PostgreSQL, which a test can cut or
freeze: PostgreSQL "down" without stopping the server every other test uses.

It runs an asyncio loop on a thread of its own: the daemon under test reads the graph on
its own event loop with a blocking driver, so a proxy on that loop could never answer it.

- ``cut()``: every connection through it is closed, and new ones are closed at once (the
  server went away);
- ``freeze()``: connections stay open and new ones are accepted, but no byte is forwarded
  (the server hangs);
- ``restore()``: forwarding again, to new connections and, after a freeze, to the held ones.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

T = TypeVar("T")
_CHUNK = 65536


class PgProxy:
    def __init__(self, target_dsn: str) -> None:
        parts = urlsplit(target_dsn)
        self._dsn_parts = parts
        self.target = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="pg-proxy")
        self._server: asyncio.Server | None = None
        self._cut = False
        self._flowing: asyncio.Event | None = None
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self.accepted = 0

    def dsn(self, schema: str) -> str:
        """The target DSN pointed at this proxy, its search path ``schema``."""
        parts = self._dsn_parts
        auth = parts.netloc.rpartition("@")[0]
        netloc = f"{auth}@" if auth else ""
        query = f"options=-csearch_path%3D{schema}"
        return urlunsplit((parts.scheme, f"{netloc}127.0.0.1:{self.port}", parts.path, query,
                           ""))

    def _call(self, coro: Awaitable[T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)  # type: ignore[arg-type]

    def start(self) -> None:
        self._thread.start()

        async def listen() -> int:
            self._flowing = asyncio.Event()
            self._flowing.set()
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            return int(self._server.sockets[0].getsockname()[1])

        self.port = self._call(listen())

    def cut(self) -> None:
        async def cut() -> None:
            self._cut = True
            for pair in list(self._pairs):
                for writer in pair:
                    writer.transport.abort()
            self._pairs.clear()

        self._call(cut())

    def freeze(self) -> None:
        async def freeze() -> None:
            assert self._flowing is not None
            self._flowing.clear()

        self._call(freeze())

    def restore(self) -> None:
        async def restore() -> None:
            assert self._flowing is not None
            self._cut = False
            self._flowing.set()

        self._call(restore())

    def stop(self) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for pair in list(self._pairs):
                for writer in pair:
                    writer.transport.abort()
            assert self._flowing is not None
            self._flowing.set()

        self._call(stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if self._cut:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        pair = (writer, up_writer)
        self._pairs.add(pair)
        try:
            await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))
        finally:
            self._pairs.discard(pair)
            writer.transport.abort()
            up_writer.transport.abort()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._flowing is not None
        try:
            while True:
                data = await reader.read(_CHUNK)
                if not data:
                    break
                await self._flowing.wait()  # frozen: held here, the peer waits
                if self._cut:
                    break
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.transport.abort()

    def __enter__(self) -> PgProxy:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
