"""schemathesis against /openapi.json: no 5xx, every answer documented and of its schema.

The server runs on a real socket in a thread of its own over real LMDB stores; hypothesis
draws the requests (bounded: a few examples per operation; derandomized under
HYPOTHESIS_PROFILE=ci).
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from aiohttp import web

from gensokyo_idmap.api.openapi import openapi_document
from gensokyo_idmap.api.server import ApiServer, ApiSettings
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.msgid import MsgIdMap
from gensokyo_idmap.store.lmdb_identity import LmdbIdentityStore
from gensokyo_idmap.store.lmdb_msgid import LmdbMsgIdStore

schema = schemathesis.openapi.from_dict(openapi_document())


def not_a_server_error(ctx: object, response: schemathesis.Response, case: object) -> bool:
    assert response.status_code < 500, f"{response.status_code}: {response.text[:300]}"
    return True


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    """The API in a thread with its own event loop; its URL while the module runs."""
    ready: dict[str, str] = {}
    started = threading.Event()
    stop: list[asyncio.Event] = []
    loop_box: list[asyncio.AbstractEventLoop] = []

    with tempfile.TemporaryDirectory(prefix="gsk-schemathesis-") as tmp:
        async def serve() -> None:
            identity = LmdbIdentityStore(Path(tmp) / "openid-map.db")
            msgid = LmdbMsgIdStore(Path(tmp) / "msgid-map.db")
            server = ApiServer(IdentityGraph(identity), MsgIdMap(msgid), ApiSettings(
                app_id="102000001", identity_path=Path(tmp) / "openid-map.db",
                msgid_path=Path(tmp) / "msgid-map.db"))
            app = web.Application()
            app.add_routes(server.routes())
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            ready["url"] = f"http://127.0.0.1:{runner.addresses[0][1]}"
            stop.append(asyncio.Event())
            loop_box.append(asyncio.get_running_loop())
            started.set()
            try:
                await stop[0].wait()
            finally:
                await runner.cleanup()
                msgid.close()
                identity.close()

        thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
        thread.start()
        assert started.wait(20), "the API did not start"
        yield ready["url"]
        loop_box[0].call_soon_threadsafe(stop[0].set)
        thread.join(20)
        assert not thread.is_alive()


@schema.parametrize()
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_document(case: schemathesis.Case, base_url: str) -> None:
    case.call_and_validate(base_url=base_url, timeout=10, checks=[
        not_a_server_error, status_code_conformance, content_type_conformance,
        response_schema_conformance])
