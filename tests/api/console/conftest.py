"""The console on a real socket over real LMDB stores, with a browser-like client (cookies
kept, redirects followed or not as the test says)."""

from __future__ import annotations

import re
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from gensokyo_idmap.api.console.status import Controls, LinkStatus
from gensokyo_idmap.api.server import ApiServer
from gensokyo_idmap.api.settings import ApiSettings
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.runtime.msgid import MsgIdMap

from ..conftest import APP_ID, TIMEOUT

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(page: str) -> str:
    found = CSRF.search(page)
    assert found, f"no CSRF token in the page:\n{page[:2000]}"
    return found.group(1)


class Browser:
    """A session with a cookie jar against one console."""

    def __init__(self, session: aiohttp.ClientSession, base: str, server: ApiServer) -> None:
        self.session = session
        self.base = base
        self.server = server

    async def get(self, path: str, **kwargs: Any) -> tuple[int, str, aiohttp.ClientResponse]:
        async with self.session.get(self.base + path, **kwargs) as resp:
            return resp.status, await resp.text(), resp

    async def post(self, path: str, form: dict[str, str],
                   **kwargs: Any) -> tuple[int, str, aiohttp.ClientResponse]:
        async with self.session.post(self.base + path, data=form, **kwargs) as resp:
            return resp.status, await resp.text(), resp

    async def csrf(self, path: str = "/ui/") -> str:
        status, page, _ = await self.get(path)
        assert status == 200, page
        return csrf_of(page)


ServeConsole = Callable[..., AbstractAsyncContextManager[Browser]]


def non_loopback_address() -> str | None:
    """An address of this machine that is not loopback (a connection to it comes from it),
    or None."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: it only picks the route
        address = str(probe.getsockname()[0])
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") or address == "0.0.0.0" else address


@pytest.fixture
def serve_console(graph: IdentityGraph, msgids: MsgIdMap, identity_db_path: Path,
                  msgid_db_path: Path) -> ServeConsole:
    @asynccontextmanager
    async def serving(token: str = "", host: str = "127.0.0.1",
                      link: LinkStatus | None = None,
                      controls: Controls | None = None,
                      identity_location: str = "",
                      trusted_proxies: tuple[str, ...] = (),
                      app_ids: tuple[str, ...] = ()) -> AsyncIterator[Browser]:
        server = ApiServer(graph, msgids, ApiSettings(
            app_id=APP_ID, identity_path=identity_db_path, msgid_path=msgid_db_path,
            token=token, identity_location=identity_location,
            trusted_proxies=trusted_proxies, app_ids=app_ids), link=link, controls=controls)
        runner = web.AppRunner(server.application(), access_log=None, shutdown_timeout=2)
        await runner.setup()
        site = web.TCPSite(runner, host, 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            async with aiohttp.ClientSession(timeout=TIMEOUT,
                                             cookie_jar=aiohttp.CookieJar(unsafe=True)) as s:
                yield Browser(s, f"http://{host}:{port}", server)
        finally:
            await runner.cleanup()

    return serving
