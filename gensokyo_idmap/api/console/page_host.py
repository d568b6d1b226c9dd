"""What the console's page groups (:mod:`.browse_pages`, :mod:`.operate_pages`) use of the
:class:`~.pages.Console` they are part of: its services, the daemon's link and controls, its
rendering and the request's translations (:class:`PageHost`); and what the console's pages
are made over, the state its mount holds from the daemon's start (:class:`ConsoleState`).

Protocols, so that the page groups depend on them and not on ``pages.py``, which builds
them, and the pages not on ``mount.py``, which imports them at the first request (no import
cycle): the console and the mount match them as they are.
"""

from __future__ import annotations

import gettext
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import asyncio

    from aiohttp import web

    from gensokyo_idmap.api.console.rates import RateHistory
    from gensokyo_idmap.api.console.services import ApiServices
    from gensokyo_idmap.api.console.sessions import Sessions
    from gensokyo_idmap.api.console.status import Controls, LinkStatus
    from gensokyo_idmap.logtail import LogTail

__all__ = ["ConsoleState", "PageHost"]


class ConsoleState(Protocol):
    api: ApiServices
    link: LinkStatus | None
    controls: Controls | None
    tail: LogTail
    #: when the console (with the daemon) started, Unix seconds
    started: float
    sessions: Sessions
    rates: RateHistory
    #: set when the listener stops: the log streams end
    closing: asyncio.Event


class PageHost(ConsoleState, Protocol):

    def _render(self, template: str, request: web.Request, context: Mapping[str, Any],
                status: int = 200) -> web.Response:
        """``template`` with the console's context (language, CSRF token, menu)."""

    def _texts(self) -> gettext.NullTranslations:
        """The translations of the request being handled."""

    async def _stores(self) -> tuple[dict[str, Any], str | None]:
        """The store figures the overview shows, or why not."""

    def _message(self, query: str) -> dict[str, Any]:
        """The record of a virtual or real message id (a NotFoundError when none)."""
