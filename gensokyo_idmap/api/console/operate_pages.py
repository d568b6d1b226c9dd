"""The console's system page: the running configuration (every secret hidden, each key's
source), this process's figures, what ``/readyz`` says is missing, and each framework's
backlog with a button to drop it (a confirmation page first, CSRF as every form) — an I/O
adapter over the daemon's :class:`~.status.Controls` and
:mod:`gensokyo_idmap.process_figures`."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from aiohttp import web

from gensokyo_idmap.api.console.status import LinkView
from gensokyo_idmap.data_dir import IDENTITY_DB, MSGID_DB, OUTBOX_DB
from gensokyo_idmap.errors import BadInputError, NotFoundError
from gensokyo_idmap.process_figures import read_figures

if TYPE_CHECKING:
    from gensokyo_idmap.api.console.page_host import PageHost

__all__ = ["OperatePages"]


class OperatePages:
    def __init__(self, console: PageHost) -> None:
        self.console = console

    def _link(self) -> LinkView:
        link = self.console.link
        return link() if link is not None else LinkView()

    async def system(self, request: web.Request) -> web.Response:
        console = self.console
        settings = console.api.settings
        data_dir = settings.msgid_path.parent
        files = [data_dir / name for name in (IDENTITY_DB, MSGID_DB, OUTBOX_DB)]
        figures = await asyncio.to_thread(read_figures, console.started, data_dir, files)
        controls = console.controls
        stores, store_error = await console._stores()
        return console._render("system.html", request, {
            "page": "system", "figures": figures, "missing": await console.api.missing(),
            "config": [] if controls is None else controls.config_rows(),
            "frameworks": self._link().frameworks, "can_drop": controls is not None,
            "stores": stores, "store_error": store_error})

    async def backlog(self, request: web.Request) -> web.Response:
        """Drop framework ``number``'s backlog: the confirmation page, then (``confirm``)
        the drop, its count shown."""
        console = self.console
        form = await request.post()
        name = str(form.get("name", ""))
        number_text = str(form.get("number", ""))
        if not (number_text.isascii() and number_text.isdigit()):
            raise BadInputError("number", number_text,
                                console._texts().gettext("a framework's place in the list"))
        number = int(number_text)
        frameworks = self._link().frameworks
        if number >= len(frameworks) or frameworks[number].name != name:
            raise NotFoundError(f"no framework {name!r} (the list changed: reload the page)")
        link = frameworks[number]
        t = console._texts()
        if form.get("confirm") != "yes":
            return console._render("confirm.html", request, {
                "page": "system", "op": "backlog", "cancel": "/ui/system",
                "fields": {"number": number_text, "name": name},
                "what": t.gettext("drop every event %(framework)s is owed and has not been "
                                  "sent yet; the platform was told of them already, so they "
                                  "are gone") % {"framework": f"{link.transport} {name}"},
                "before": {t.gettext("events owed"): link.owed,
                           t.gettext("of them in outbox.db"): link.durable}})
        if console.controls is None:
            raise NotFoundError(console._texts().gettext(
                "this console is not part of a running daemon"))
        dropped = await console.controls.drop_backlog(number, name)
        result: dict[str, Any] = {"outcome": "dropped", "framework": f"{link.transport} {name}",
                                  "dropped": dropped}
        return console._render("result.html", request, {
            "page": "system", "op": "backlog", "result": result, "vuin": None,
            "back": "/ui/system"})
