"""schemathesis against /openapi.json and against a document of the OneBot HTTP API: no 5xx,
every answer documented and of its schema.

Each server runs on a real socket in a thread of its own (the identity API over real LMDB
stores, as the daemon serves it: admission rules, routes and console); hypothesis draws the
requests (bounded: a few examples per operation; derandomized under HYPOTHESIS_PROFILE=ci).
Every operation also gets the headers a browser sends (``Host``, ``Origin``,
``Sec-Fetch-Site``) as optional parameters, so the admission rules see generated values.
"""

from __future__ import annotations

import asyncio
import copy
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from aiohttp import web
from multidict import CIMultiDict

from gensokyo_idmap.admission import SAFE_METHODS, Admission
from gensokyo_idmap.api.openapi import openapi_document
from gensokyo_idmap.api.server import ApiServer
from gensokyo_idmap.api.settings import ApiSettings
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.runtime.msgid import MsgIdMap
from gensokyo_idmap.onebot.http_api import HttpApiServer
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore

from ..onebot.test_http_api import echo_params

#: Browser headers, as optional header parameters of every operation.
BROWSER_HEADERS = [
    {"name": "Host", "in": "header", "required": False, "schema": {"anyOf": [
        {"type": "string"}, {"enum": ["localhost", "evil.example", "127.0.0.1:1",
                                      "[::1]", "idmap.test:8080"]}]}},
    {"name": "Origin", "in": "header", "required": False, "schema": {"anyOf": [
        {"type": "string"}, {"enum": ["null", "http://evil.example", "http://127.0.0.1:1",
                                      "https://idmap.test"]}]}},
    {"name": "Sec-Fetch-Site", "in": "header", "required": False,
     "schema": {"enum": ["cross-site", "same-site", "same-origin", "none"]}},
]


def with_browser_headers(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with :data:`BROWSER_HEADERS` added to every operation."""
    document = copy.deepcopy(document)
    for operations in document["paths"].values():
        for method, operation in operations.items():
            if method == "parameters":
                continue
            operation["parameters"] = [*operation.get("parameters", []), *BROWSER_HEADERS]
    return document


_ONEBOT_ERRORS = {"400": "malformed body", "401": "no token", "403": "wrong token, or "
                  "another site's request", "404": "unknown action", "405": "method",
                  "406": "content type", "421": "a Host naming something not listed"}
_ONEBOT_RESPONSE = {"type": "object", "required": ["status", "retcode"], "properties": {
    "status": {"enum": ["ok", "async", "failed"]}, "retcode": {"type": "integer"}}}


def _onebot_answers() -> dict[str, Any]:
    body = {"content": {"application/json": {"schema": _ONEBOT_RESPONSE}}}
    return {"200": {"description": "the action's response", **body},
            **{status: {"description": words, **body}
               for status, words in _ONEBOT_ERRORS.items()}}


_PARAMS = {"type": "object", "properties": {"user_id": {}, "group_id": {}, "message": {}}}
#: The OneBot v11 HTTP API (reference §1.1) as OpenAPI: an action by GET with a query,
#: by POST with a JSON or form body, and go-cqhttp's POST / with {action, params, echo}.
ONEBOT_DOCUMENT: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "OneBot v11 HTTP API", "version": "11"},
    "paths": {
        "/{action}": {
            "parameters": [{"name": "action", "in": "path", "required": True,
                            "schema": {"anyOf": [{"type": "string"},
                                                 {"enum": ["echo_params", "send_msg"]}]}}],
            "get": {"parameters": [
                {"name": name, "in": "query", "required": False, "schema": {}}
                for name in ("user_id", "group_id", "message", "access_token")],
                "responses": _onebot_answers()},
            "post": {"requestBody": {"required": True, "content": {
                "application/json": {"schema": _PARAMS},
                "application/x-www-form-urlencoded": {"schema": _PARAMS}}},
                "responses": _onebot_answers()},
        },
        "/": {"post": {"requestBody": {"required": True, "content": {"application/json": {
            "schema": {"type": "object", "properties": {
                "action": {"anyOf": [{"type": "string"}, {"enum": ["echo_params"]}]},
                "params": _PARAMS, "echo": {}}}}}},
            "responses": _onebot_answers()}},
    },
}

schema = schemathesis.openapi.from_dict(with_browser_headers(openapi_document()))
onebot_schema = schemathesis.openapi.from_dict(with_browser_headers(ONEBOT_DOCUMENT))


def not_a_server_error(ctx: object, response: schemathesis.Response, case: object) -> bool:
    assert response.status_code < 500, f"{response.status_code}: {response.text[:300]}"
    return True


Served = Callable[[], AbstractAsyncContextManager[web.Application]]


def serve_in_thread(application: Served) -> Iterator[str]:
    """The application ``application`` makes, on 127.0.0.1 in a thread with its own event
    loop; its URL until the generator is closed."""
    ready: dict[str, str] = {}
    started = threading.Event()
    stop: list[asyncio.Event] = []
    loop_box: list[asyncio.AbstractEventLoop] = []

    async def serve() -> None:
        async with application() as app:
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

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert started.wait(20), "the server did not start"
    yield ready["url"]
    loop_box[0].call_soon_threadsafe(stop[0].set)
    thread.join(20)
    assert not thread.is_alive()


ADMISSION = Admission(["idmap.test"])
OPEN_ROUTES = ("/healthz", "/readyz", "/metrics", "/openapi.json")


def _admitted_as_the_rules_say(case: Any, response: schemathesis.Response, *, guarded: bool,
                               json_body: bool) -> None:
    headers = CIMultiDict(case.headers or {})
    if "Content-Type" not in headers and case.media_type:
        headers["Content-Type"] = case.media_type
    expected = ADMISSION.refusal(headers, guarded=guarded, json_body=json_body)
    if expected is not None:
        assert response.status_code == expected.status, (
            f"{dict(headers)}: {response.status_code}, expected {expected}")


def identity_api_admission(ctx: object, response: schemathesis.Response, case: Any) -> bool:
    """The listener refuses exactly what the admission rules refuse (Host on every route
    behind access; Origin and Sec-Fetch-Site on writes and /getid; JSON on /v1 writes)."""
    path = case.formatted_path
    if path not in OPEN_ROUTES:
        writes = case.method.upper() not in SAFE_METHODS or path == "/getid"
        _admitted_as_the_rules_say(case, response, guarded=writes,
                                   json_body=writes and path.startswith("/v1/"))
    return True


def onebot_admission(ctx: object, response: schemathesis.Response, case: Any) -> bool:
    """Every OneBot request is guarded (actions write, also by GET)."""
    _admitted_as_the_rules_say(case, response, guarded=True, json_body=False)
    return True


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    """The identity API over LMDB stores in a temporary directory."""
    with tempfile.TemporaryDirectory(prefix="gsk-schemathesis-") as tmp:
        @asynccontextmanager
        async def application() -> AsyncIterator[web.Application]:
            identity = LmdbIdentityStore(Path(tmp) / "openid-map.db")
            msgid = LmdbMsgIdStore(Path(tmp) / "msgid-map.db")
            try:
                yield ApiServer(IdentityGraph(identity), MsgIdMap(msgid), ApiSettings(
                    app_id="102000001", identity_path=Path(tmp) / "openid-map.db",
                    msgid_path=Path(tmp) / "msgid-map.db",
                    allowed_hosts=("idmap.test",))).application()
            finally:
                msgid.close()
                identity.close()

        yield from serve_in_thread(application)


@pytest.fixture(scope="module")
def onebot_url() -> Iterator[str]:
    """The OneBot HTTP API, with a token, over the stand-in action table of its tests
    (the real action parser; ``echo_params`` answers its params)."""
    @asynccontextmanager
    async def application() -> AsyncIterator[web.Application]:
        app = web.Application()
        app.add_routes(HttpApiServer(echo_params, access_token="t0ken",
                                     admission=Admission(["idmap.test"])).routes())
        yield app

    yield from serve_in_thread(application)


@schema.parametrize()
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_document(case: schemathesis.Case, base_url: str) -> None:
    case.call_and_validate(base_url=base_url, timeout=10, checks=[
        not_a_server_error, status_code_conformance, content_type_conformance,
        response_schema_conformance, identity_api_admission])


@onebot_schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_onebot_http_api_answers_no_5xx(case: schemathesis.Case, onebot_url: str) -> None:
    case.call_and_validate(base_url=onebot_url, timeout=10, headers=(
        {"Authorization": "Bearer t0ken"} if case.query is None
        or "access_token" not in case.query else {}), checks=[
        not_a_server_error, status_code_conformance, content_type_conformance,
        response_schema_conformance, onebot_admission])
