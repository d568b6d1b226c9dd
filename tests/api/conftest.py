"""The API listener (its whole application: admission rules, routes, console) on a real
socket (127.0.0.1, a free port) over real LMDB stores."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from gensokyo_idmap.api.console.status import LinkStatus
from gensokyo_idmap.api.failure_limit import FailureLimit
from gensokyo_idmap.api.server import ApiServer
from gensokyo_idmap.api.settings import ApiSettings
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.runtime.msgid import MsgIdMap
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore

from ..conftest import run

APP_ID = "102000001"
ALICE = "9F3A0C55E1B24D7A8C6E0F1D2B3A4C5D"
BOB = "0F1E2D3C4B5A69788796A5B4C3D2E1F0"
GROUP = "A1B2C3D4E5F60718293A4B5C6D7E8F90"
TIMEOUT = aiohttp.ClientTimeout(total=10)


class Client:
    """An aiohttp session against one server: (status, parsed JSON or None) per call."""

    def __init__(self, session: aiohttp.ClientSession, base: str, server: ApiServer) -> None:
        self.session = session
        self.base = base
        self.server = server

    async def get(self, path: str, headers: dict[str, str] | None = None,
                  **params: Any) -> tuple[int, Any]:
        async with self.session.get(self.base + path, params=params or None,
                                    headers=headers) as resp:
            return resp.status, await _body(resp)

    async def post(self, path: str, body: Any = None, raw: bytes | None = None,
                   headers: dict[str, str] | None = None) -> tuple[int, Any]:
        data = raw if raw is not None else None
        async with self.session.post(self.base + path, json=None if raw is not None else body,
                                     data=data, headers=headers) as resp:
            return resp.status, await _body(resp)


async def _body(resp: aiohttp.ClientResponse) -> Any:
    text = await resp.text()
    if resp.content_type == "application/json":
        import json
        return json.loads(text)
    return text or None


ServeApi = Callable[..., AbstractAsyncContextManager[Client]]


@pytest.fixture
def msgids(msgid_store: LmdbMsgIdStore, clock: Any) -> MsgIdMap:
    return MsgIdMap(msgid_store, clock=clock)


@pytest.fixture
def serve_api(graph: IdentityGraph, msgids: MsgIdMap, identity_db_path: Path,
              msgid_db_path: Path) -> ServeApi:
    @asynccontextmanager
    async def serving(app_id: str = APP_ID, token: str = "", getid_allow: tuple[str, ...] = (),
                      allowed_hosts: tuple[str, ...] = (),
                      link: LinkStatus | None = None, app_ids: tuple[str, ...] = (),
                      self_ids: tuple[int, ...] = (),
                      trusted_proxies: tuple[str, ...] = (),
                      token_failures: FailureLimit | None = None) -> AsyncIterator[Client]:
        server = ApiServer(graph, msgids, ApiSettings(
            app_id=app_id, identity_path=identity_db_path, msgid_path=msgid_db_path,
            token=token, getid_allow=getid_allow, allowed_hosts=allowed_hosts,
            app_ids=app_ids, self_ids=self_ids, trusted_proxies=trusted_proxies),
            link=link, token_failures=token_failures)
        runner = web.AppRunner(server.application(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
                yield Client(session, f"http://127.0.0.1:{port}", server)
        finally:
            await runner.cleanup()

    return serving


def scenario(serve_api: ServeApi, body: Callable[[Client], Awaitable[None]],
             **server: Any) -> None:
    """Run ``body`` against a served API (``server`` configures it), bounded in time."""
    async def main() -> None:
        async with serve_api(**server) as client:
            await asyncio.wait_for(body(client), 30)

    run(main())
