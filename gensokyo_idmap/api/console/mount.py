"""The console as the API listener holds it from the start: its routes, its sessions, its
rate history; its pages (:mod:`.pages` and what they import) at the first
request to ``/ui/`` (issue 36.2).

Most daemons run for months with nobody opening the console. Its page code (the pages, the
browse and system pages, the chart's SVG, the translations, the error texts) stayed in each
one's memory all the same: 0.7 MiB of an idle daemon when they were made at its start
(docs/benchmarks.md, Idle memory). Here every route is registered as it was, by name
(:data:`ROUTES`), so the paths, methods and answers to a wrong one are the same; its
handler, and the guard in front of every route (access, sessions, CSRF:
:meth:`.pages.Console.guard`), are the pages' own, found at the first request. What must
run before anyone looks stays here: the rate history's sampling (the chart shows the last
hour, not the time since the page was first opened), the sessions (a table of
:mod:`gensokyo_idmap.tables` from the start; the failed logins are the listener's,
:class:`~gensokyo_idmap.api.failure_limit.FailureLimit`), the start time the overview shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import resources
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Final

from aiohttp import web

from gensokyo_idmap.api.console.rates import HOUR, RateHistory
from gensokyo_idmap.api.console.sessions import Sessions
from gensokyo_idmap.api.traffic import totals
from gensokyo_idmap.logtail import TAIL, LogTail
from gensokyo_idmap.tables import Named

if TYPE_CHECKING:
    from gensokyo_idmap.api.console.pages import Console
    from gensokyo_idmap.api.console.services import ApiServices
    from gensokyo_idmap.api.console.status import Controls, LinkStatus

__all__ = ["ROUTES", "ConsoleMount"]

#: Every page of the console: (method, path under ``/ui``, the handler's name on
#: :class:`~.pages.Console`, dotted for its page groups' handlers).
ROUTES: Final = (
    ("GET", "/", "overview"),
    ("GET", "/overview.json", "overview_json"),
    ("GET", "/chart.svg", "chart"),
    ("GET", "/login", "login_page"),
    ("POST", "/login", "login"),
    ("POST", "/logout", "logout"),
    ("POST", "/language", "switch_language"),
    ("GET", "/identities", "browse.identities"),
    ("GET", "/chats", "browse.chats"),
    ("GET", "/chats/{scene}", "browse.chat"),
    ("POST", "/send", "browse.send"),
    ("GET", "/messages", "browse.messages"),
    ("GET", "/messages/{vid}", "browse.message"),
    ("GET", "/system", "operate.system"),
    ("POST", "/backlog", "operate.backlog"),
    ("GET", "/identities/{vuin}", "vuin_page"),
    ("POST", "/bind", "bind"),
    ("POST", "/rebind", "rebind"),
    ("GET", "/logs", "logs"),
    ("GET", "/logs/stream", "log_stream"),
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ConsoleMount:
    """The console of one API listener (:class:`~.services.ApiServices`): what it holds
    from the start, and its pages once asked for (:meth:`pages`)."""

    def __init__(self, api: ApiServices, link: LinkStatus | None = None, *,
                 controls: Controls | None = None, tail: LogTail = TAIL,
                 sample_seconds: float = 10.0) -> None:
        self.api = api
        self.link = link
        self.controls = controls
        self.tail = tail
        self.sessions = Sessions()
        #: when the console (with the daemon) started, Unix seconds
        self.started = time.time()
        self.rates = RateHistory(totals, step=sample_seconds, span=HOUR)
        #: set when the listener stops: the log streams end
        self.closing = asyncio.Event()
        self._pages: Console | None = None

    def memory_tables(self) -> list[Named]:
        """Its in-memory table (:mod:`gensokyo_idmap.tables`): the sessions (the wrong
        tokens are counted by the listener, ``api_token_failures``)."""
        return [("console_sessions", self.sessions)]

    def pages(self) -> Console:
        """The console's pages, imported and made at the first call."""
        if self._pages is None:
            from gensokyo_idmap.api.console.pages import Console

            self._pages = Console(self)
        return self._pages

    # --- the sub-application ----------------------------------------------------------------

    def application(self) -> web.Application:
        """The console as an aiohttp sub-application, to be mounted at ``/ui/``."""
        app = web.Application(middlewares=[self._guard])
        static = Path(str(resources.files(__package__).joinpath("static")))
        app.add_routes([*(web.route(method, path, self._handler(name))
                          for method, path, name in ROUTES),
                        web.static("/static", static)])
        app.cleanup_ctx.append(self._sampling)
        app.on_shutdown.append(self._shutdown)
        return app

    def _handler(self, name: str) -> Handler:
        find = attrgetter(name)

        async def handle(request: web.Request) -> web.StreamResponse:
            page: Handler = find(self.pages())
            return await page(request)

        handle.__name__ = handle.__qualname__ = name
        return handle

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        return await self.pages().guard(request, handler)

    async def _sampling(self, _app: web.Application) -> AsyncIterator[None]:
        """The rate sampler, running while the listener serves."""
        self.closing.clear()
        self.rates.sample()
        task = asyncio.create_task(self._sample_until_closed(), name="console rates")
        yield
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    async def _sample_until_closed(self) -> None:
        while not self.closing.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.closing.wait(), self.rates.step)
            self.rates.sample()

    async def _shutdown(self, _app: web.Application) -> None:
        self.closing.set()  # ends the log streams, so the listener's stop does not wait
