"""The OneBot HTTP API (we are the server): ``GET|POST /<action>`` with params, or
``POST /`` with ``{"action", "params"}`` as go-cqhttp accepts (reference §1.1).

Params come from the query string, a form body or a JSON body (query values are text; the
action handlers read numbers and booleans leniently). A request from a browser's reach (a
name not in ``api.allowed_hosts`` as ``Host``, a foreign ``Origin``) is refused first
(:func:`~gensokyo_idmap.onebot.http_auth.admission_refusal`). The token
(``onebot.http_api_access_token``, default ``onebot.access_token``) is checked as on the
forward WebSocket (:mod:`http_auth`: missing → 401, wrong → 403, in constant time; 10
wrong ones in a minute from a client → 429 for a while, one count with the forward WS). An
unknown action is HTTP 404 with the usual failed body; a malformed body 400; a body type we
cannot read 406. Everything else is 200 with the action's response, ``status`` telling
success from failure.

One listener serves every bot of the daemon: a request picks its bot with the path prefix
``/<self_id>/`` (``/<self_id>/send_msg``, ``POST /<self_id>/``) or ``X-Self-ID``
(:mod:`~gensokyo_idmap.onebot.self_id_routing`; one bot: nothing to pick), after its
admission and token are checked; no bot chosen among several is 400 (404 for a prefix
naming none), naming the ``self_id`` s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from gensokyo_idmap import jsonio
from gensokyo_idmap.admission import Admission
from gensokyo_idmap.api.failure_limit import FailureLimit
from gensokyo_idmap.onebot.actions import RETCODE_UNKNOWN_ACTION, failed
from gensokyo_idmap.onebot.connection import ActionHandler
from gensokyo_idmap.onebot.http_auth import admission_refusal, token_refusal
from gensokyo_idmap.onebot.self_id_routing import SELF_ID_HEADER, Refused, choose_bot

__all__ = ["HttpApiServer"]


class HttpApiServer:
    def __init__(self, on_action: ActionHandler | Mapping[int, ActionHandler], *,
                 access_token: str | None = None, admission: Admission | None = None,
                 token_failures: FailureLimit | None = None) -> None:
        """``on_action``: the actions of each bot by its ``self_id`` (or of the one bot,
        whatever its ``self_id``: no prefix is then read); ``admission``: the rules over
        ``api.allowed_hosts`` (default: none listed); ``token_failures``: the wrong tokens
        per client, the daemon's one count for its OneBot servers (default: its own)."""
        self._bots = dict(on_action) if isinstance(on_action, Mapping) else None
        self._only = on_action if not isinstance(on_action, Mapping) else None
        self._token = access_token or None
        self._admission = admission if admission is not None else Admission()
        self._failures = token_failures if token_failures is not None else FailureLimit()

    def routes(self) -> list[web.RouteDef]:
        by_bot = [] if self._bots is None else [
            web.route("*", r"/{self_id:\d+}", self.handle_root),
            web.route("*", r"/{self_id:\d+}/", self.handle_root),
            web.route("*", r"/{self_id:\d+}/{action}", self.handle),
            web.route("*", r"/{self_id:\d+}/{action}/", self.handle)]
        return [web.route("*", "/", self.handle_root), *by_bot,
                web.route("*", "/{action}", self.handle),
                web.route("*", "/{action}/", self.handle)]

    def _bot(self, request: web.Request) -> ActionHandler | web.Response:
        """The actions of the bot the request is for, or the refusal to answer."""
        if self._bots is None:
            assert self._only is not None
            return self._only
        choice = choose_bot(list(self._bots), request.headers.get(SELF_ID_HEADER),
                            request.path)
        if isinstance(choice, Refused):
            return web.json_response(failed(1000 + choice.status, choice.reason),
                                     status=choice.status)
        return self._bots[choice.self_id]

    def _refusal(self, request: web.Request) -> web.Response | None:
        return (admission_refusal(request, self._admission, "http_api")
                or token_refusal(request, self._token, self._failures, "http_api"))

    async def _body(self, request: web.Request) -> dict[str, Any] | web.Response:
        if request.method not in ("GET", "POST"):
            return web.json_response(failed(1405, f"method {request.method} not allowed"),
                                     status=405)
        params: dict[str, Any] = {k: v for k, v in request.query.items() if k != "access_token"}
        if request.method == "GET" or not request.can_read_body:
            return params
        kind = request.content_type
        if kind == "application/json":
            try:
                body = jsonio.loads(await request.read())
            except (ValueError, RecursionError):
                return web.json_response(failed(1400, "body is not valid JSON"), status=400)
            if not isinstance(body, dict):
                return web.json_response(failed(1400, "body must be a JSON object"),
                                         status=400)
            return {**params, **body}
        if kind in ("application/x-www-form-urlencoded", "multipart/form-data"):
            form = await request.post()
            return {**params, **{k: v for k, v in form.items() if isinstance(v, str)}}
        return web.json_response(failed(1406, f"content type {kind} not supported"),
                                 status=406)

    @staticmethod
    async def _answer(on_action: ActionHandler, frame: dict[str, Any]) -> web.Response:
        response = await on_action(frame)
        status = 404 if response.get("retcode") == RETCODE_UNKNOWN_ACTION else 200
        return web.json_response(response, status=status,
                                 dumps=jsonio.dumps)

    async def handle(self, request: web.Request) -> web.Response:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        bot = self._bot(request)
        if isinstance(bot, web.Response):
            return bot
        params = await self._body(request)
        if isinstance(params, web.Response):
            return params
        return await self._answer(bot, {"action": request.match_info["action"],
                                        "params": params})

    async def handle_root(self, request: web.Request) -> web.Response:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        bot = self._bot(request)
        if isinstance(bot, web.Response):
            return bot
        body = await self._body(request)
        if isinstance(body, web.Response):
            return body
        params = body.get("params")
        return await self._answer(bot, {"action": body.get("action"),
                                        "params": params if params is not None else {},
                                        "echo": body.get("echo")})
