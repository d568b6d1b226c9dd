"""What the console uses of the API listener it is mounted on: the listener's graph,
message ids, settings and access policy, and its reading of a request's client.

A protocol, so that the console depends on these services and not on the server that
offers them: the server builds the console (``api/server.py`` imports ``console``), never
the other way round, and :class:`~gensokyo_idmap.api.server.ApiServer` matches it as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from aiohttp import web

    from gensokyo_idmap.api.access import AccessPolicy
    from gensokyo_idmap.api.failure_limit import FailureLimit
    from gensokyo_idmap.api.settings import ApiSettings
    from gensokyo_idmap.idmap import IdentityGraph
    from gensokyo_idmap.runtime.msgid import MessageIds

__all__ = ["ApiServices"]


class ApiServices(Protocol):
    """The API listener, as the console sees it."""

    @property
    def graph(self) -> IdentityGraph: ...

    @property
    def msgids(self) -> MessageIds: ...

    @property
    def settings(self) -> ApiSettings: ...

    @property
    def access(self) -> AccessPolicy: ...

    @property
    def token_failures(self) -> FailureLimit:
        """The wrong tokens per client: the console's login adds to the listener's count."""

    def wrong_token(self, client: str | None, via: str) -> None:
        """Count a wrong token from ``client`` (its lockout logged once)."""

    def client_address(self, request: web.BaseRequest) -> str | None:
        """The peer, or behind a trusted proxy the client it names."""

    def is_https(self, request: web.BaseRequest) -> bool:
        """Whether the browser came over HTTPS."""

    def find_vuin(self, key: str, app_id: str | None = None) -> tuple[str | None, int]:
        """(the typed key read from ``key``, or None for a vUIN; the vUIN it is now); a
        bare OpenID is one of ``app_id`` (default: the first bot's)."""

    async def missing(self) -> list[str]:
        """What the daemon lacks to do its job now, as ``/readyz`` answers (empty: ready)."""
