"""The API listener: routes, access checks and the JSON error shape (an I/O adapter: the
rules live in idmap.py, msgid.py and compat.py; inputs are parsed by identity.py).

Routes (documented in ``/openapi.json``)::

    POST /v1/resolve               {"keys": [...], "scene"?}      → vUIN (created if new)
    GET  /v1/identity?key=…        a key's vUIN (digits: what that vUIN resolves to now)
    GET  /v1/vuins/{vuin}          identity set, last_seen per scene, aliases
    GET  /v1/vuins/{vuin}/pick     the identity the reverse path would use (scene / prefix)
    POST /v1/bind                  {"key", "vuin"}
    POST /v1/rebind                {"old", "new"}
    GET  /v1/msgids/{virtual_id}   a live virtual message id
    GET  /v1/msgids?real_id=…      the virtual id of a real message id
    GET  /v1/stats                 counts per table of both stores, per bot, and the memory
                                   (resident, and each in-memory table's entries and bytes)

A route that reads a bare OpenID (``resolve``, ``identity``, ``bind``, ``pick``) takes it as
one of the first bot's AppID, or of the bot ``?app_id=`` names; ``msgids?real_id=`` and
``stats`` take ``?app_id=`` too. An ``app_id`` naming no bot the daemon serves is a 400
naming the AppIDs it does.
    GET  /getid?type=N&…           the Go daemon's API (getid.py)
    GET  /healthz  /readyz  /metrics  /openapi.json
    /ui/…                          the operator console (console/pages.py)

Errors of ``/v1`` are ``{"error": {"code", "message"}}`` with the error class's HTTP status
(errors.py): 400 bad input, 401 no or wrong token, 403 peer not allowed, 404, 409, 503; so
is a path no route serves (404 ``not_found``, or 405 ``method_not_allowed`` for a route's
wrong method). Only a bug of ours is a 500.

A client that sent 10 wrong tokens in a minute (Bearer on ``/v1``, ``/getid`` or the
console's pages, or typed at its login: one count for them all) is answered 429 with
``Retry-After`` until the oldest of them is a minute old, its token not compared meanwhile,
not even the right one (:mod:`.failure_limit`); its lockout is logged once, never a token.

Before any of that, the routes behind access (``/v1``, ``/getid``, ``/ui/``) take only what
:mod:`gensokyo_idmap.admission` lets in from a browser's reach (same error shape): a ``Host``
that is an IP address, ``localhost`` or in ``api.allowed_hosts`` (else 421); for a request
that may write (any method but GET/HEAD/OPTIONS, and every ``/getid``, whose types 1, 3, 8
… write on a GET) no foreign ``Origin`` and no ``Sec-Fetch-Site: cross-site`` (403); and
for ``/v1`` writes a JSON body sent as ``application/json`` (415). The console's forms are
form-encoded: their own CSRF token and the Origin check guard them. ``/healthz``,
``/metrics`` and ``/openapi.json`` answer any ``Host``: monitoring dials by name, and they
say nothing about anyone.

``/healthz`` is liveness (the stores and their servers work); ``/readyz`` is readiness: 200
``{"ready": true, "missing": []}`` once the daemon can do its job, else 503 naming each
missing part (:mod:`gensokyo_idmap.readiness`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
from aiohttp import web
from aiohttp.web_urldispatcher import MatchInfoError

from gensokyo_idmap import counters, jsonio
from gensokyo_idmap.admission import SAFE_METHODS, Admission
from gensokyo_idmap.api.access import AccessPolicy
from gensokyo_idmap.api.console.mount import ConsoleMount
from gensokyo_idmap.api.console.status import Controls, LinkStatus
from gensokyo_idmap.api.failure_limit import FailureLimit
from gensokyo_idmap.api.forwarded import TrustedProxies
from gensokyo_idmap.api.getid import answer_getid
from gensokyo_idmap.api.openapi import openapi_document
from gensokyo_idmap.api.settings import ApiSettings
from gensokyo_idmap.api.traffic import totals
from gensokyo_idmap.compat import LegacyIdmap
from gensokyo_idmap.errors import BadInputError, IdmapError, NotFoundError
from gensokyo_idmap.health import (
    HealthSource,
    ServerCheck,
    problems,
    server_answers,
    server_problems,
    store_problems,
)
from gensokyo_idmap.identity import (
    MAX_SCENE_BYTES,
    RUin,
    VUin,
    parse_client_input,
    parse_identity_input,
    parse_vuin,
    served_app_id,
)
from gensokyo_idmap.idmap import IdentityGraph, openid_of_app
from gensokyo_idmap.process_figures import resident_parts
from gensokyo_idmap.readiness import missing
from gensokyo_idmap.recency import chat_recency
from gensokyo_idmap.reports import (
    bind_data,
    bots_data,
    memory_data,
    rebind_data,
    record_data,
    resolution_data,
    stats_data,
    vuin_data,
)
from gensokyo_idmap.runtime.msgid import MessageIds, check_virtual_id
from gensokyo_idmap.store.base import TableCounts, legacy_counts
from gensokyo_idmap.tables import Tables

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from gensokyo_idmap.metrics import BackendUpCollector

__all__ = ["ApiServer"]

log = structlog.get_logger("gensokyo_idmap.api")

MAX_RESOLVE_KEYS = 64
_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: Routes anyone who reaches the listener may call, under any Host (access.py).
_OPEN_ROUTES = frozenset({"/healthz", "/readyz", "/metrics", "/openapi.json"})


def _error(status: int, code: str, message: str) -> web.Response:
    response = web.json_response({"error": {"code": code, "message": message}}, status=status)
    if status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="gensokyo-idmap"'
    return response


def _too_many(client: str | None, wait: int) -> str:
    """The 429's message (the client is told how long; the token is never named)."""
    return f"too many wrong tokens from {client}: try again in {wait} s"


async def _to_console(request: web.Request) -> web.Response:
    raise web.HTTPPermanentRedirect("/ui/")


def _text(value: object, field: str, *, required: bool = True) -> str | None:
    """A JSON or query string value that is valid Unicode text (lone surrogates are not)."""
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise BadInputError(field, value, "must be text")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BadInputError(field, value, "is not valid Unicode text") from None
    return value


def _number(value: object, field: str) -> int:
    """A vUIN given as a JSON integer or as decimal text."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise BadInputError(field, value, "must be a positive integer (or decimal text)")
    return parse_vuin(value, field)


class ApiServer:
    """The API of one daemon over its graph and message-id map."""

    def __init__(self, graph: IdentityGraph, msgids: MessageIds, settings: ApiSettings,
                 outbox: tuple[Path, HealthSource] | None = None,
                 servers: Sequence[tuple[object, ServerCheck]] = (),
                 link: LinkStatus | None = None, controls: Controls | None = None,
                 tables: Tables | None = None,
                 token_failures: FailureLimit | None = None) -> None:
        """``servers``: (store, its server) for each store that lives on a server
        (PostgreSQL, Redis): ``/healthz`` asks the server instead of opening the store.
        ``link``: what the console shows of the platform link and the frameworks;
        ``controls``: what it may ask of the daemon (its configuration, a backlog dropped,
        a test message); ``tables``: the daemon's in-memory tables, whose figures
        ``/v1/stats`` and ``/metrics`` show (the console's join them); ``token_failures``:
        the wrong tokens per client of ``/v1``, ``/getid`` and the console's login (by
        default 10 a minute, :class:`~.failure_limit.FailureLimit`)."""
        self.graph = graph
        self.msgids = msgids
        self._recency = chat_recency(msgids)
        self.settings = settings
        served = [store for store, _ in servers]
        self._health_sources: list[tuple[Path, HealthSource]] = [
            (path, store) for path, store in (
                (settings.identity_path, graph.store), (settings.msgid_path, msgids.store),
                *([outbox] if outbox is not None else []))
            if not any(store is other for other in served)]
        self._servers = [check for _, check in servers]
        self.link = link
        self._last_missing: list[str] = []
        self.legacy = LegacyIdmap(graph, settings.app_id, msgids)
        self.access = AccessPolicy(settings.token, settings.getid_allow)
        self.proxies = TrustedProxies(settings.trusted_proxies)
        self.admission = Admission(settings.allowed_hosts)
        #: one count for /v1, /getid and the console's login: a guesser of api.token gets
        #: 10 a minute in all (module docstring)
        self.token_failures = token_failures if token_failures is not None else FailureLimit()
        self._collectors: tuple[CollectorRegistry, BackendUpCollector] | None = None
        self.console = ConsoleMount(self, link, controls=controls)
        self.tables = tables if tables is not None else Tables()
        self.tables.add("api_token_failures", self.token_failures)
        self.tables.add_from(self.console)

    def _registry(self) -> tuple[CollectorRegistry, BackendUpCollector]:
        """This listener's collectors (and the one whose answers each scrape brings), made
        at the first scrape: prometheus-client loads only when ``/metrics`` is asked for
        (:mod:`gensokyo_idmap.counters` says why)."""
        if self._collectors is None:
            from prometheus_client import CollectorRegistry

            from gensokyo_idmap import metrics
            from gensokyo_idmap.api.link_metrics import LinkCollector

            settings = self.settings
            registry = CollectorRegistry(auto_describe=True)
            registry.register(metrics.StoreSizeCollector(
                self._identity_counts, partial(legacy_counts, self.graph.store),
                self.msgids.counts, (settings.identity_path, settings.msgid_path)))
            registry.register(metrics.DataDirCollector(settings.msgid_path.parent))
            backends_up = metrics.BackendUpCollector()
            registry.register(backends_up)
            registry.register(metrics.MemoryTablesCollector(self.tables.figures))
            if self.link is not None:
                registry.register(LinkCollector(self.link))
            self._collectors = registry, backends_up
        return self._collectors

    def _identity_counts(self) -> TableCounts:
        with self.graph.store.read() as view:
            return view.counts()

    def routes(self) -> list[web.RouteDef]:
        v1 = self._v1
        return [
            web.post("/v1/resolve", v1(self.resolve)),
            web.get("/v1/identity", v1(self.lookup)),
            web.get("/v1/vuins/{vuin}", v1(self.show)),
            web.get("/v1/vuins/{vuin}/pick", v1(self.pick)),
            web.post("/v1/bind", v1(self.bind)),
            web.post("/v1/rebind", v1(self.rebind)),
            web.get("/v1/msgids/{virtual_id}", v1(self.msgid)),
            web.get("/v1/msgids", v1(self.msgid_of_real)),
            web.get("/v1/stats", v1(self.stats)),
            web.get("/getid", self.getid),
            web.get("/healthz", self.healthz),
            web.get("/readyz", self.readyz),
            web.get("/metrics", self.metrics),
            web.get("/openapi.json", self.openapi),
        ]

    def application(self) -> web.Application:
        """The listener's application: :meth:`routes`, and the console at ``/ui/``, behind
        the admission rules."""
        app = web.Application(middlewares=[self._admit])
        app.add_routes(self.routes())
        app.add_subapp("/ui/", self.console.application())
        app.router.add_get("/ui", _to_console)
        return app

    # --- access and errors ----------------------------------------------------------------

    def client_address(self, request: web.BaseRequest) -> str | None:
        """The peer, or behind a trusted proxy the client it names (:mod:`.forwarded`)."""
        return self.proxies.client(request.remote,
                                   request.headers.getall("X-Forwarded-For", []))

    def is_https(self, request: web.BaseRequest) -> bool:
        """Whether the browser came over HTTPS (this listener's TLS or a trusted proxy's)."""
        return self.proxies.is_https(request.remote, request.scheme,
                                     request.headers.getall("X-Forwarded-Proto", []))

    def wrong_token(self, client: str | None, via: str) -> None:
        """Count a wrong ``api.token`` from ``client`` (``via``: where it was presented);
        the lockout it starts is logged, once (never the token)."""
        limit = self.token_failures
        if limit.failed(client):
            log.warning("[api] api.token refused for a while: too many wrong tokens",
                        client=client, via=via, failures=limit.failures,
                        window_seconds=limit.window,
                        retry_after_seconds=limit.retry_after(client))

    @web.middleware
    async def _admit(self, request: web.Request, handler: _Handler) -> web.StreamResponse:
        """The admission rules (module docstring) before any route, the console's too."""
        path = request.path
        if path not in _OPEN_ROUTES:
            writes = request.method not in SAFE_METHODS or path == "/getid"
            refused = self.admission.refusal(
                request.headers, guarded=writes,
                json_body=writes and path.startswith("/v1/"))
            if refused is not None:
                log.warning("[api] request refused", peer=request.remote,
                            method=request.method, path=path, status=refused.status,
                            reason=refused.message)
                if path == "/getid":  # its own error shape (getid.py)
                    return web.json_response({"error": refused.message},
                                             status=refused.status)
                return _error(refused.status, refused.code, refused.message)
        try:
            return await handler(request)
        except (web.HTTPNotFound, web.HTTPMethodNotAllowed) as exc:
            # no such route: the same envelope as every other error (the console's pages
            # under /ui/ answer their own)
            if not isinstance(request.match_info, MatchInfoError) or path.startswith("/ui/"):
                raise
            if isinstance(exc, web.HTTPNotFound):
                return _error(404, "not_found", f"no route {path} (see /openapi.json)")
            response = _error(405, "method_not_allowed",
                              f"{request.method} is not a method of {path}")
            response.headers["Allow"] = exc.headers.get("Allow", "")
            return response

    def _v1(self, handler: _Handler) -> _Handler:
        async def guarded(request: web.Request) -> web.StreamResponse:
            if self.access.has_token:
                client = self.client_address(request)
                wait = self.token_failures.retry_after(client)
                if wait:  # the token is not compared (module docstring)
                    response = _error(429, "too_many_requests", _too_many(client, wait))
                    response.headers["Retry-After"] = str(wait)
                    return response
                presented = self.access.bearer(request.headers.get("Authorization"))
                if presented is None or not self.access.token_is(presented):
                    if presented is not None:  # a guess; no token at all is none
                        self.wrong_token(client, "/v1")
                    return _error(401, "unauthorized", "a valid Bearer token (api.token) is "
                                  "required")
                self.token_failures.succeeded(client)
            elif not self.access.peer_allowed(client := self.client_address(request)):
                return _error(403, "forbidden", f"{client} is not allowed "
                              "(loopback or api.getid_allow; or set api.token)")
            try:
                return await handler(request)
            except IdmapError as err:
                return _error(err.http_status, err.code, err.message)

        return guarded

    async def _body(self, request: web.Request) -> dict[str, Any]:
        try:
            body = jsonio.loads(await request.read())
        except (ValueError, RecursionError):
            raise BadInputError("body", "…", "is not valid JSON") from None
        if not isinstance(body, dict):
            raise BadInputError("body", type(body).__name__, "must be a JSON object")
        return body

    # --- /v1 --------------------------------------------------------------------------------

    def app_id_of(self, request: web.Request) -> str | None:
        """The AppID a request's bare OpenIDs are of: its ``?app_id=``, one of the bots
        served (else a 400 naming them), or the first bot's."""
        return served_app_id(_text(request.query.get("app_id"), "app_id", required=False),
                             self.settings.served)

    async def resolve(self, request: web.Request) -> web.Response:
        app_id = self.app_id_of(request)
        body = await self._body(request)
        keys = body.get("keys")
        if not isinstance(keys, list) or not 1 <= len(keys) <= MAX_RESOLVE_KEYS:
            raise BadInputError("keys", keys, f"must be a list of 1 to {MAX_RESOLVE_KEYS} "
                                "identities")
        parsed = [parse_identity_input(key, app_id, f"keys[{i}]")
                  for i, key in enumerate(keys)]
        scene = _text(body.get("scene"), "scene", required=False)
        result = await self.graph.resolve(parsed, scene=scene)
        return web.json_response(resolution_data(result))

    async def lookup(self, request: web.Request) -> web.Response:
        app_id = self.app_id_of(request)
        key = _text(request.query.get("key"), "key")
        assert key is not None
        shown, vuin = self.find_vuin(key, app_id)
        return web.json_response({"key": shown, "vuin": vuin})

    def find_vuin(self, key: str, app_id: str | None = None) -> tuple[str | None, int]:
        """(the typed key read from ``key``, or None for a vUIN; the vUIN it is now), for
        any form a client may give (vUIN, typed key, ``rUIN-…``, bare OpenID of ``app_id``,
        by default the first bot's); :class:`NotFoundError` when nothing is known."""
        parsed = parse_client_input(key, app_id or self.settings.app_id or None, field="key")
        if isinstance(parsed, VUin):
            vuin = self.graph.canonical(parsed.value)
            shown = None
        else:
            vuin = self.graph.lookup(parsed)
            shown = parsed.key
        if vuin is None:
            raise NotFoundError(f"{key}: no vUIN is known for it")
        return shown, vuin

    async def show(self, request: web.Request) -> web.Response:
        view = self.graph.show(parse_vuin(request.match_info["vuin"], "vuin"))
        return web.json_response(vuin_data(view))

    async def pick(self, request: web.Request) -> web.Response:
        vuin = parse_vuin(request.match_info["vuin"], "vuin")
        query = request.query
        scene = _text(query.get("scene"), "scene", required=False)
        prefix = _text(query.get("scene_prefix"), "scene_prefix", required=False)
        if scene is not None and prefix is not None:
            raise BadInputError("scene_prefix", prefix, "give scene or scene_prefix, not both")
        for name, value in (("scene", scene), ("scene_prefix", prefix)):
            if value is not None and not 0 < len(value.encode("utf-8")) <= MAX_SCENE_BYTES:
                raise BadInputError(name, value, f"must be 1 to {MAX_SCENE_BYTES} bytes")
        app_id = self.app_id_of(request)
        if not app_id:
            raise BadInputError("app_id", None,
                                "no bot.app_id (nor bots) is configured: give app_id")
        key = self.graph.pick_identity(vuin, scene=scene, scene_prefix=prefix,
                                       usable=openid_of_app(app_id), recency=self._recency)
        return web.json_response({"vuin": vuin, "identity": key.key,
                                  "ruin": key.text if isinstance(key, RUin) else None})

    async def bind(self, request: web.Request) -> web.Response:
        app_id = self.app_id_of(request)
        body = await self._body(request)
        given: Any = body.get("key")  # any JSON value: the parser refuses what is not an id
        key = parse_identity_input(given, app_id, "key")
        vuin = _number(body.get("vuin"), "vuin")
        return web.json_response(bind_data(await self.graph.bind(key, vuin)))

    async def rebind(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        old, new = _number(body.get("old"), "old"), _number(body.get("new"), "new")
        return web.json_response(rebind_data(await self.graph.rebind(old, new)))

    async def msgid(self, request: web.Request) -> web.Response:
        virtual_id = check_virtual_id(request.match_info["virtual_id"], "virtual_id")
        record = self.msgids.lookup(virtual_id)
        if record is None:
            raise NotFoundError(f"virtual message id {virtual_id} is unknown or expired")
        return web.json_response(record_data(record))

    async def msgid_of_real(self, request: web.Request) -> web.Response:
        """The virtual id of a real message id: the newest record of it, whichever bot's
        (two bots given one platform message id each have a record: msgid rule 10), or,
        with ``?app_id=``, only one of that bot's."""
        real_id = _text(request.query.get("real_id"), "real_id")
        assert real_id is not None
        app_id = self.app_id_of(request) if "app_id" in request.query else None
        virtual_id = self.msgids.virtual_of(real_id)
        record = None if virtual_id is None else self.msgids.lookup(virtual_id)
        if record is None:
            raise NotFoundError(f"real message id {real_id!r} is unknown or expired")
        if app_id is not None and record.app_id != app_id:
            raise NotFoundError(f"real message id {real_id!r} is not known as one of AppID "
                                f"{app_id}'s (its newest record is AppID {record.app_id}'s)")
        return web.json_response({"real_id": real_id, "virtual_id": record.virtual_id,
                                  "app_id": record.app_id})

    async def stats(self, request: web.Request) -> web.Response:
        """Both stores' figures, and per AppID (``bots``: each bot served, then each other
        AppID the graph has OpenIDs of); ``?app_id=``: that bot's alone."""
        app_id = self.app_id_of(request) if "app_id" in request.query else None
        location = self.settings.identity_location or self.settings.identity_path
        data = stats_data(self.graph, location, self.msgids, self.settings.msgid_path)
        bots = bots_data(self.graph, self.served_bots())
        for served, figures in bots.items():
            if figures["served"]:  # this process's traffic, since it started
                figures["traffic"] = {name.replace(" ", "_"): count
                                      for name, count in totals(served).items()}
        data["bots"] = bots if app_id is None else {app_id: bots[app_id]}
        data["memory"] = memory_data(resident_parts(), self.tables.figures())
        return web.json_response(data)

    def served_bots(self) -> list[tuple[str, int | None]]:
        """(AppID, self_id) of each bot served (no self_id: not told)."""
        self_ids = self.settings.self_ids
        return [(app_id, self_ids[n] if n < len(self_ids) else None)
                for n, app_id in enumerate(self.settings.served)]

    # --- /getid, health, metrics, the document ----------------------------------------------

    async def getid(self, request: web.Request) -> web.Response:
        """A peer the network admits (loopback, ``api.getid_allow``) needs no token; any
        other one a right Bearer token, its wrong ones counted as on ``/v1``."""
        client = self.client_address(request)
        if not self.access.peer_allowed(client):
            wait = self.token_failures.retry_after(client) if self.access.has_token else 0
            if wait:  # the token is not compared (module docstring)
                return web.json_response({"error": _too_many(client, wait)}, status=429,
                                         headers={"Retry-After": str(wait)})
            presented = self.access.bearer(request.headers.get("Authorization"))
            if presented is None or not self.access.token_is(presented):
                if presented is not None and self.access.has_token:
                    self.wrong_token(client, "/getid")
                return web.json_response({"error": f"{client} is not allowed "
                                          "(loopback or api.getid_allow)"}, status=403)
            self.token_failures.succeeded(client)
        status, body = await answer_getid(self.legacy, request.query)
        return web.json_response(body, status=status)

    async def healthz(self, request: web.Request) -> web.Response:
        """204, or 503 naming each store whose writes fail or that cannot be read, each
        server (PostgreSQL, Redis) that does not answer in time, and a data dir whose disk
        is full. Writes nothing (see :mod:`gensokyo_idmap.health`)."""
        found = await self._health_problems()
        if found:
            log.warning("[api] healthz failed", reasons=found)
            return _error(503, "unhealthy", "; ".join(found))
        return web.Response(status=204)

    async def _health_problems(self) -> list[str]:
        """What ``/healthz`` finds: each store that cannot be read or written, a full disk,
        each server that does not answer in time."""
        return problems(self._health_sources) + await server_problems(self._servers)

    async def missing(self) -> list[str]:
        """What the daemon lacks to do its job now (:func:`gensokyo_idmap.readiness.missing`):
        the platform side as the daemon's link reports it, then what ``/healthz`` finds.
        A change is logged once, not at every probe."""
        platforms = self.link().platforms if self.link is not None else None
        found = missing(platforms, await self._health_problems())
        if found != self._last_missing:
            if found:
                log.warning("[api] not ready", missing=found)
            else:
                log.info("[api] ready")
            self._last_missing = found
        return found

    async def readyz(self, request: web.Request) -> web.Response:
        """200 when the daemon can do its job, else 503 naming what is missing; either way
        ``{"ready", "missing": [reasons]}``. Writes nothing, says no secret."""
        found = await self.missing()
        return web.json_response({"ready": not found, "missing": found},
                                 status=503 if found else 200)

    async def metrics(self, request: web.Request) -> web.Response:
        from gensokyo_idmap import metrics

        started = time.perf_counter()
        registry, backends_up = self._registry()
        backends_up.update(await self.backends_up())
        body = metrics.render(registry)
        log.debug("[api] metrics rendered", seconds=round(time.perf_counter() - started, 6))
        return web.Response(body=body, headers={"Content-Type": metrics.CONTENT_TYPE})

    async def backends_up(self) -> dict[str, bool]:
        """Per backend (``lmdb``, ``postgres``, ``redis``), whether its stores work now: what
        ``/healthz`` asks, less the free space (``gensokyo_data_dir_free_bytes`` says that)."""
        up: dict[str, bool] = {}
        if self._health_sources:
            up["lmdb"] = not store_problems(self._health_sources)
        answers = await server_answers(self._servers)
        for check, problem in zip(self._servers, answers, strict=True):
            backend = counters.backend_of(check)
            up[backend] = up.get(backend, True) and problem is None
        return up

    async def openapi(self, request: web.Request) -> web.Response:
        return web.json_response(openapi_document())
