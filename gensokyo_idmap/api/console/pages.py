"""The operator console's pages at ``/ui/`` on the identity API listener (an I/O adapter),
made at its first request (:mod:`.mount` holds its routes and what runs from the start).

Access is the API's (``access.py``): with ``api.token`` set, the token typed once on the
login page or a Bearer header (at most 10 wrong ones a minute per client, counted with
those of ``/v1`` and ``/getid``: :mod:`gensokyo_idmap.api.failure_limit`); without one,
loopback peers and ``api.getid_allow``. After a login the browser holds only a session id
(:mod:`.sessions`); before it, and without a token, a signed CSRF token that the server
keeps nowhere (:mod:`.form_tokens`). Every form carries its CSRF token; every answer
sends a Content-Security-Policy that allows scripts, styles and images from the console
itself and nothing inline.

What the pages show comes from what the daemon has already: the graph and message-id rules
(the same calls as ``/v1``), ``reports.stats_data`` (as ``/v1/stats``), the counters
(``api.traffic``), the log tail (``logtail``: the log file's own redacted text)
and the daemon's :data:`~.status.LinkStatus`. A change (bind, rebind) goes through a
confirmation page first, then through :class:`~gensokyo_idmap.idmap.IdentityGraph`; a value
that cannot be parsed is shown on the page and nothing is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import gettext
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import structlog
from aiohttp import web

from gensokyo_idmap import __version__, jsonio
from gensokyo_idmap.api.access import same_token
from gensokyo_idmap.api.console import form_tokens, language
from gensokyo_idmap.api.console.browse_pages import BrowsePages
from gensokyo_idmap.api.console.chart import ChartWords, rate_chart
from gensokyo_idmap.api.console.error_text import error_text, said
from gensokyo_idmap.api.console.form_tokens import FormTokens
from gensokyo_idmap.api.console.operate_pages import OperatePages
from gensokyo_idmap.api.console.rates import HOUR
from gensokyo_idmap.api.console.sessions import COOKIE, Session
from gensokyo_idmap.api.console.status import BotLink, LinkView
from gensokyo_idmap.api.console.translations import Catalogs
from gensokyo_idmap.api.traffic import totals
from gensokyo_idmap.errors import BadInputError, IdmapError, NotFoundError
from gensokyo_idmap.identity import parse_identity_input, parse_vuin
from gensokyo_idmap.logtail import LEVELS
from gensokyo_idmap.reports import bind_data, rebind_data, record_data, stats_data, vuin_data
from gensokyo_idmap.runtime.msgid import check_virtual_id
from gensokyo_idmap.store.base import MappedFile

if TYPE_CHECKING:
    from gensokyo_idmap.api.console.page_host import ConsoleState
    from gensokyo_idmap.api.console.rendering import Templates

__all__ = ["CSP", "Console", "human_size"]

log = structlog.get_logger("gensokyo_idmap.api")

#: Everything from the console itself, nothing inline, no framing, forms only to itself.
CSP: Final = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
              "connect-src 'self'; object-src 'none'; base-uri 'none'; "
              "frame-ancestors 'none'; form-action 'self'")
_HEADERS: Final = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    # same-origin, not no-referrer: under no-referrer a browser sends the console's own form
    # posts with ``Origin: null``, which the admission rules refuse as another site's
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
#: Who is asking, for the request being handled (set by the guard for the handler's task; a
#: context variable, as aiohttp's typed request keys need a newer aiohttp than we require).
_VISIT: Final[ContextVar[_Visit | None]] = ContextVar("console_visit", default=None)
#: Paths reachable without a session: the login page, the language switch (its form is on
#: the login page too) and the package's CSS and script.
_OPEN_PATHS: Final = ("/ui/login", "/ui/language", "/ui/static/")
#: The page language of the request being handled (set by the guard, as :data:`_VISIT`).
_LANGUAGE: Final[ContextVar[str]] = ContextVar("console_language", default=language.DEFAULT)
#: How long the language switch's choice is kept: a year, renewed by each switch.
LANGUAGE_COOKIE_SECONDS: Final = 365 * 24 * 3600
#: The switch's buttons: each language in its own name (never translated).
LANGUAGE_NAMES: Final = (("en", "English"), ("zh-CN", "简体中文"))
#: How often the SSE tail looks for new lines, and how many it sends first.
TAIL_POLL_SECONDS: Final = 0.5
TAIL_BACKLOG: Final = 200
#: How long the overview shows the same store figures when a store is on a server.
SERVER_STATS_SECONDS: Final = 15.0


@dataclass(frozen=True, slots=True)
class _Visit:
    """Who is asking: a logged-in ``session``; a Bearer header (``bearer``: its forms never
    pass); or a visitor without a session, whose forms carry a signed token (``new_token``:
    it is new, its cookie to be set). ``csrf``: the token this request's pages carry."""

    csrf: str
    session: Session | None = None
    signed_in: bool = False
    bearer: bool = False
    new_token: bool = False


def _gateway_state(state: str, texts: gettext.NullTranslations) -> str:
    """A gateway's state (``link_metrics.GATEWAY_STATES``) in the page's language."""
    words = {"connecting": texts.gettext("connecting"), "connected": texts.gettext("connected"),
             "paused": texts.gettext("paused"), "stopped": texts.gettext("stopped")}
    return words.get(state, state)


def _bot_data(bot: BotLink, texts: gettext.NullTranslations) -> dict[str, Any]:
    """One bot's platform link and traffic, as the overview shows it (and its JSON: the
    ``*_text`` fields in the asking page's language, for its script)."""
    platform, gateway = bot.platform, bot.gateway
    if platform is None:
        token_text = "—"
    elif platform.token_failure is not None:
        token_text = said(platform.token_failure, texts)
    else:
        token_text = (texts.gettext("obtained") if platform.token_obtained
                      else texts.gettext("not obtained yet"))
    return {
        "app_id": bot.app_id, "self_id": bot.self_id,
        "token": None if platform is None else {"obtained": platform.token_obtained,
                                                "failure": platform.token_failure},
        "token_text": token_text,
        "gateway_wanted": platform is not None and platform.gateway_wanted,
        "gateway": None if gateway is None else {
            "state": gateway.state,
            "state_text": _gateway_state(gateway.state, texts),
            "session_id": gateway.session_id, "seq": gateway.seq,
            "resumes": gateway.resumes, "identifies": gateway.identifies,
            "pauses": gateway.pauses},
        "last_webhook": None if bot.last_webhook is None else {
            "event_type": bot.last_webhook.event_type, "at": bot.last_webhook.at},
        "totals": totals(bot.app_id),
    }


class Console:
    """The pages of one API listener's console (:class:`~.mount.ConsoleMount`: its routes
    lead here), over the mount's state."""

    def __init__(self, mount: ConsoleState) -> None:
        self.api = mount.api
        self.link = mount.link
        self.controls = mount.controls
        self.tail = mount.tail
        self.sessions = mount.sessions
        self.rates = mount.rates
        self.started = mount.started
        self.closing = mount.closing
        self.browse = BrowsePages(self)
        self.operate = OperatePages(self)
        self.form_tokens = FormTokens()
        self.catalogs = Catalogs()
        self._stores_cache: tuple[float, tuple[dict[str, Any], str | None]] | None = None
        self._pages: Templates | None = None

    # --- access, sessions, headers ------------------------------------------------------------

    async def guard(self, request: web.Request,
                    handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                    ) -> web.StreamResponse:
        """In front of every route of the console (the mount's middleware): the request's
        language, who may see what (module docstring), the console's headers."""
        _LANGUAGE.set(language.pick(request.headers.get("Accept-Language"),
                                    request.cookies.get(language.COOKIE)))
        try:
            response = await self._admit(request, handler)
        except web.HTTPException as exc:  # a redirect (to the login page, after a form)
            exc.headers.update(_HEADERS)
            raise
        response.headers.update(_HEADERS)
        return response

    async def _admit(self, request: web.Request,
                     handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                     ) -> web.StreamResponse:
        access = self.api.access
        session = self.sessions.get(request.cookies.get(COOKIE)) if access.has_token else None
        if session is not None:
            visit = _Visit(session.csrf, session=session, signed_in=True)
        elif request.path.startswith(_OPEN_PATHS) or not access.has_token:
            client = self.api.client_address(request)
            if not request.path.startswith(_OPEN_PATHS) and not access.peer_allowed(client):
                return self._refusal(request, 403, self._texts().gettext(
                    "%(client)s is not allowed (loopback or api.getid_allow; or set "
                    "api.token)") % {"client": client})
            token, new = self.form_tokens.current(request.cookies.get(form_tokens.COOKIE))
            visit = _Visit(token, signed_in=not access.has_token, new_token=new)
        elif (bearer := self._bearer(request)) is not None:
            return bearer
        elif access.token_ok(request.headers.get("Authorization")):
            # a script's request: nothing kept for it, and no form of it passes
            self.api.token_failures.succeeded(self.api.client_address(request))
            visit = _Visit(secrets.token_urlsafe(32), signed_in=True, bearer=True)
        elif request.method == "GET":
            raise web.HTTPSeeOther("/ui/login")
        else:
            return self._refusal(request, 401,
                                 self._texts().gettext("log in first (api.token)"))
        _VISIT.set(visit)
        if request.method == "POST":
            form = await request.post()
            presented = form.get("csrf")
            if not self._csrf_ok(request, visit, presented if isinstance(presented, str)
                                 else None):
                return self._refusal(request, 403, self._texts().gettext(
                    "the form's CSRF token is missing, wrong or expired (or the daemon "
                    "restarted): reload the page and try again"))
        try:
            response = await handler(request)
        except IdmapError as err:  # a value a page could not take: shown, nothing written
            response = self._refusal(request, err.http_status,
                                     error_text(err, self._texts()))
        except web.HTTPNotFound:  # no page there: the console's own, with its menu
            response = self._render("notfound.html", request, {"path": request.path},
                                    status=404)
        if visit.new_token:
            self._set_cookie(request, response, form_tokens.COOKIE, visit.csrf)
        return response

    def _bearer(self, request: web.Request) -> web.Response | None:
        """The 429 for a client refused for its wrong tokens, which presents one in an
        ``Authorization`` header (not compared); a wrong one is counted. None: go on."""
        access = self.api.access
        presented = access.bearer(request.headers.get("Authorization"))
        if presented is None:
            return None
        client = self.api.client_address(request)
        wait = self.api.token_failures.retry_after(client)
        if wait:
            response = self._refusal(request, 429, self._texts().gettext(
                "too many wrong tokens from %(client)s: try again in %(seconds)s s") % {
                "client": client, "seconds": wait})
            response.headers["Retry-After"] = str(wait)
            return response
        if not access.token_is(presented):
            self.api.wrong_token(client, "console bearer")
        return None

    def _csrf_ok(self, request: web.Request, visit: _Visit, presented: str | None) -> bool:
        if visit.session is not None:
            return visit.session.csrf_ok(presented)
        if visit.bearer:
            return False
        return self.form_tokens.passes(request.cookies.get(form_tokens.COOKIE), presented)

    def _set_cookie(self, request: web.Request, response: web.StreamResponse, name: str,
                    value: str, max_age: int | None = None) -> None:
        """A console cookie: for ``/ui/`` only, no script reads it, no other site sends it,
        and over HTTPS (the listener's own, or a trusted proxy's) only HTTPS carries it;
        kept ``max_age`` seconds, or for the browser's session."""
        response.set_cookie(name, value, path="/ui/", httponly=True, samesite="Strict",
                            secure=self.api.is_https(request) or None, max_age=max_age)

    def _texts(self) -> gettext.NullTranslations:
        """The translations of the language of the request being handled."""
        return self.catalogs[_LANGUAGE.get()]

    def _refusal(self, request: web.Request, status: int, message: str) -> web.Response:
        return self._render("refused.html", request, {"message": message, "status": status},
                            status=status)

    def _render(self, template: str, request: web.Request, context: Mapping[str, Any],
                status: int = 200) -> web.Response:
        visit = _VISIT.get()
        lang = _LANGUAGE.get()
        base = {"page": "", "csrf": visit.csrf if visit is not None else "",
                "token_login": self.api.access.has_token,
                "signed_in": bool(visit and visit.signed_in), "version": __version__,
                "lang": lang, "texts": self.catalogs[lang], "languages": LANGUAGE_NAMES,
                # where the language switch comes back to: this page, if a GET shows it
                "here": request.path_qs if request.method == "GET" else "/ui/"}
        return self._templates().render(template, {**base, **context}, status=status)

    def _templates(self) -> Templates:
        """The console's templates, made at the first page: Jinja2 loads only when someone
        opens the console (:mod:`.rendering` says why)."""
        if self._pages is None:
            from gensokyo_idmap.api.console.dates import time_tag
            from gensokyo_idmap.api.console.rendering import Templates

            self._pages = Templates({"size": human_size, "when": time_tag})
        return self._pages

    # --- language -------------------------------------------------------------------------

    async def switch_language(self, request: web.Request) -> web.StreamResponse:
        """The header's language switch (a form: its CSRF token checked by the guard): the
        choice kept in a cookie, then back to the page it was made on."""
        form = await request.post()
        chosen = str(form.get("lang", ""))
        if chosen not in language.LANGUAGES:
            raise BadInputError("lang", chosen,
                                f"must be one of {', '.join(language.LANGUAGES)}")
        response = web.HTTPSeeOther(_back_to(form.get("next")))
        self._set_cookie(request, response, language.COOKIE, chosen,
                         max_age=LANGUAGE_COOKIE_SECONDS)
        raise response

    # --- login ----------------------------------------------------------------------------

    async def login_page(self, request: web.Request) -> web.Response:
        if not self.api.access.has_token:
            raise web.HTTPSeeOther("/ui/")
        return self._render("login.html", request, {"error": None})

    async def login(self, request: web.Request) -> web.StreamResponse:
        """The token typed on the login page (its CSRF token checked by the guard), at most
        :class:`~gensokyo_idmap.api.failure_limit.FailureLimit` wrong ones per client, the
        listener's count (``/v1`` and ``/getid`` add to it); while refused, the token is not
        compared."""
        if not self.api.access.has_token:
            raise web.HTTPSeeOther("/ui/")
        client = self.api.client_address(request)
        limit = self.api.token_failures
        wait = limit.retry_after(client)
        if wait:
            response = self._render("login.html", request, {
                "error": self._texts().gettext(
                    "too many wrong tokens from %(client)s: try again in %(seconds)s s") % {
                    "client": client, "seconds": wait}},
                status=429)
            response.headers["Retry-After"] = str(wait)
            return response
        token = (await request.post()).get("token")
        if not isinstance(token, str) or not same_token(token, self.api.settings.token):
            self.api.wrong_token(client, "console login")
            return self._render("login.html", request,
                                {"error": self._texts().gettext("wrong token")}, status=401)
        limit.succeeded(client)
        visit = _VISIT.get()
        fresh = self.sessions.login(visit.session.id if visit and visit.session else None)
        response = web.HTTPSeeOther("/ui/")
        self._set_cookie(request, response, COOKIE, fresh.id)
        raise response

    async def logout(self, request: web.Request) -> web.StreamResponse:
        visit = _VISIT.get()
        if visit is not None and visit.session is not None:
            self.sessions.drop(visit.session.id)
        response = web.HTTPSeeOther("/ui/login" if self.api.access.has_token else "/ui/")
        response.del_cookie(COOKIE, path="/ui/")
        raise response

    # --- overview -------------------------------------------------------------------------

    def _read_stores(self) -> tuple[dict[str, Any], str | None]:
        """(``/v1/stats``' figures and the LMDB map use, None) or ({}, why not)."""
        api = self.api
        location = api.settings.identity_location or api.settings.identity_path
        try:
            stores: dict[str, Any] = stats_data(api.graph, location, api.msgids,
                                                api.settings.msgid_path)
        except (IdmapError, OSError) as err:
            return {}, getattr(err, "message", None) or str(err)
        stores["openid_map"]["map"] = _map_use(api.graph.store)
        stores["msgid_map"]["map"] = _map_use(api.msgids.store)
        return stores, None

    async def _stores(self) -> tuple[dict[str, Any], str | None]:
        """The store figures: read for each overview when both stores are LMDB files (a
        few page reads); else at most every :data:`SERVER_STATS_SECONDS`, in a worker
        thread, as counting asks PostgreSQL ``count(*)`` and Redis a ``SCAN``."""
        api = self.api
        if isinstance(api.graph.store, MappedFile) and isinstance(api.msgids.store, MappedFile):
            return self._read_stores()
        now = time.monotonic()
        if self._stores_cache is None or now - self._stores_cache[0] >= SERVER_STATS_SECONDS:
            self._stores_cache = (now, await asyncio.to_thread(self._read_stores))
        return self._stores_cache[1]

    async def overview_data(self) -> dict[str, Any]:
        """Everything the overview shows, as plain data (its page and its JSON)."""
        now = time.time()
        link = self.link() if self.link is not None else LinkView()
        stores, store_error = await self._stores()
        problems = self.tail.problems_since(now - HOUR)
        running = totals()
        missing = await self.api.missing()  # what /readyz answers
        return {
            "version": __version__,
            "started": self.started,
            "uptime_seconds": round(now - self.started),
            "readiness": {"ready": not missing, "missing": missing},
            "link": {
                "gateway": None if link.gateway is None else {
                    "session_id": link.gateway.session_id, "seq": link.gateway.seq,
                    "resumes": link.gateway.resumes, "identifies": link.gateway.identifies,
                    "pauses": link.gateway.pauses},
                "webhook": link.webhook,
                "last_webhook": None if link.last_webhook is None else {
                    "event_type": link.last_webhook.event_type, "at": link.last_webhook.at},
            },
            "bots": [_bot_data(bot, self._texts()) for bot in link.bots],
            "frameworks": [{"transport": f.transport, "name": f.name, "connected": f.connected,
                            "owed": f.owed, "durable": f.durable, "problem": f.problem,
                            "bot": f.bot,
                            # the problem in the asking page's language, for its script
                            "problem_text": f.problem and said(f.problem, self._texts())}
                           for f in link.frameworks],
            "totals": running,
            "rates": self.rates.latest(),
            "problems": {"errors": sum(line.level in ("error", "critical") for line in problems),
                         "warnings": sum(line.level == "warning" for line in problems),
                         "latest": [line.text for line in problems[-5:]]},
            "stores": stores,
            "store_error": store_error,
            "migration": stores.get("openid_map", {}).get("migrated_from_legacy"),
        }

    async def overview(self, request: web.Request) -> web.Response:
        return self._render("overview.html", request, {"o": await self.overview_data(),
                                                       "page": "overview"})

    async def overview_json(self, request: web.Request) -> web.Response:
        return web.json_response(await self.overview_data(), dumps=_dumps)

    async def chart(self, request: web.Request) -> web.Response:
        t = self._texts()
        words = ChartWords(names={"events in": t.gettext("platform events in"),
                                  "events out": t.gettext("OneBot events out"),
                                  "actions": t.gettext("OneBot actions answered")},
                           per_second=t.gettext("/s"), ago=t.gettext("-%(minutes)s min"),
                           now=t.gettext("now"))
        svg = rate_chart(self.rates.series(to_now=True), self.rates.step, self.rates.span,
                         words=words)
        return web.Response(text=svg, content_type="image/svg+xml")

    # --- identities -------------------------------------------------------------------------

    async def vuin_page(self, request: web.Request) -> web.Response:
        try:
            view = vuin_data(self.api.graph.show(parse_vuin(request.match_info["vuin"])))
        except IdmapError as err:
            return self._render("identities.html", request, {
                "page": "identities", "q": request.match_info["vuin"],
                "error": error_text(err, self._texts()), "binds": []}, status=err.http_status)
        return self._render("vuin.html", request, {"page": "identities", "v": view,
                                                   "error": None})

    async def bind(self, request: web.Request) -> web.Response:
        form = await request.post()
        key_text, vuin_text = str(form.get("key", "")), str(form.get("vuin", ""))
        app_id = self.api.settings.app_id or None
        try:
            key = parse_identity_input(key_text, app_id, "key")
            vuin = parse_vuin(vuin_text, "vuin")
            if form.get("confirm") != "yes":
                t = self._texts()
                return self._render("confirm.html", request, {
                    "page": "identities", "op": "bind",
                    "fields": {"key": key_text, "vuin": vuin_text},
                    "what": t.gettext("bind %(key)s to vUIN %(vuin)s") % {"key": key.key,
                                                                         "vuin": vuin},
                    "before": {t.gettext("current vUIN of the key"): self.api.graph.lookup(key),
                               t.gettext("vUIN it will join"): self.api.graph.canonical(vuin)}})
            result = bind_data(await self.api.graph.bind(key, vuin))
        except IdmapError as err:
            return self._form_error(request, vuin_text, "bind", err)
        if result["outcome"] == "moved" and result["previous"] is None:
            result["outcome"] = "bound"  # a key new to the graph moved from nowhere
        return self._render("result.html", request, {
            "page": "identities", "op": "bind", "result": result, "vuin": result["vuin"]})

    async def rebind(self, request: web.Request) -> web.Response:
        form = await request.post()
        old_text, new_text = str(form.get("old", "")), str(form.get("new", ""))
        try:
            old, new = parse_vuin(old_text, "old"), parse_vuin(new_text, "new")
            if form.get("confirm") != "yes":
                t = self._texts()
                moving = self.api.graph.show(old).identities
                return self._render("confirm.html", request, {
                    "page": "identities", "op": "rebind",
                    "fields": {"old": old_text, "new": new_text},
                    "what": t.gettext("move the identity set of vUIN %(old)s to vUIN %(new)s "
                                      "(%(old)s stays as an alias)") % {"old": old, "new": new},
                    "before": {t.gettext("identities that move"): ", ".join(moving) or None,
                               t.gettext("vUIN the set joins"): self.api.graph.canonical(new)}})
            result = rebind_data(await self.api.graph.rebind(old, new))
        except IdmapError as err:
            return self._form_error(request, old_text, "rebind", err)
        return self._render("result.html", request, {
            "page": "identities", "op": "rebind", "result": result, "vuin": result["new"]})

    def _form_error(self, request: web.Request, vuin_text: str, op: str,
                    err: IdmapError) -> web.Response:
        """The vUIN page again (or the search page), the error shown; nothing was written."""
        try:
            view: dict[str, Any] | None = vuin_data(self.api.graph.show(parse_vuin(vuin_text)))
        except IdmapError:
            view = None
        t = self._texts()
        message = (t.gettext("bind refused: %(why)s") if op == "bind"
                   else t.gettext("rebind refused: %(why)s")) % {"why": error_text(err, t)}
        if view is None:
            return self._render("identities.html", request, {
                "page": "identities", "q": "", "error": message, "binds": []},
                status=err.http_status)
        return self._render("vuin.html", request, {"page": "identities", "v": view,
                                                   "error": message}, status=err.http_status)

    # --- messages ---------------------------------------------------------------------------

    def _message(self, query: str) -> dict[str, Any]:
        """A virtual id (digits) or a real id, as ``/v1/msgids`` reads them."""
        msgids = self.api.msgids
        if query.isascii() and query.isdigit():
            virtual_id: int | None = check_virtual_id(query, "virtual id")
        else:
            virtual_id = msgids.virtual_of(query)
            if virtual_id is None:
                raise NotFoundError(f"real message id {query!r} is unknown or expired")
        record = msgids.lookup(virtual_id) if virtual_id is not None else None
        if record is None:
            raise NotFoundError(f"virtual message id {query} is unknown or expired")
        return record_data(record)

    # --- logs -----------------------------------------------------------------------------

    async def logs(self, request: web.Request) -> web.Response:
        level = request.query.get("level", "info")
        if level not in LEVELS:
            level = "info"
        return self._render("logs.html", request, {"page": "logs", "level": level,
                                                   "levels": LEVELS})

    async def log_stream(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: the newest lines first, then each new one at the chosen
        level or above (``?level=``), until the browser leaves or the daemon stops."""
        level = request.query.get("level", "info")
        if level not in LEVELS:
            raise BadInputError("level", level, f"must be one of {', '.join(LEVELS)}")
        last = request.headers.get("Last-Event-ID", "")
        seq = int(last) if last.isdigit() else max(0, self.tail.last_seq - TAIL_BACKLOG)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               **_HEADERS})
        await response.prepare(request)
        try:
            while not self.closing.is_set():
                for line in self.tail.since(seq, level):
                    payload = _dumps({"level": line.level, "at": line.at, "text": line.text})
                    await response.write(f"id: {line.seq}\ndata: {payload}\n\n".encode())
                    seq = line.seq
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.closing.wait(), TAIL_POLL_SECONDS)
        except ConnectionError:
            pass  # the browser left
        return response


def human_size(count: int | None) -> str:
    """Bytes as people read them (``56.0 KiB``); the console's script writes the same."""
    if count is None:
        return "—"
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _dumps(value: Any) -> str:
    return jsonio.dumps(value)


def _map_use(store: object) -> dict[str, int] | None:
    """The map of a store on LMDB: its size and the bytes of the pages in use (None for a
    store on a server)."""
    if not isinstance(store, MappedFile):
        return None
    size, used = store.map_use()
    return {"size": size, "used": used}


def _back_to(next_page: object) -> str:
    """Where the language switch sends the browser back to: the console page it came from
    (a path under ``/ui/``, nothing that could lead to another site), else the overview."""
    if (isinstance(next_page, str) and next_page.startswith("/ui/") and len(next_page) < 2000
            and "//" not in next_page and "\\" not in next_page
            and next_page.isprintable() and " " not in next_page):
        return next_page
    return "/ui/"
