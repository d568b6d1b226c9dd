"""What the API listener is told at start (from the config's ``api`` and ``idmap``
sections): a module of its own, so that the server and its console both read it without
one importing the other."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["ApiSettings"]


@dataclass(frozen=True, slots=True)
class ApiSettings:
    #: the first bot's AppID: bare OpenIDs are of it unless a request names another
    app_id: str
    identity_path: Path
    msgid_path: Path
    token: str = ""
    getid_allow: tuple[str, ...] = ()
    #: networks (CIDR) of reverse proxies whose X-Forwarded-For / -Proto are believed
    trusted_proxies: tuple[str, ...] = ()
    #: where the graph is, as /v1/stats reports it: ``identity_path`` when empty; the
    #: PostgreSQL URL (no password) when the graph is there and no file exists
    identity_location: str = ""
    #: host names besides localhost that requests may address (``api.allowed_hosts``)
    allowed_hosts: tuple[str, ...] = ()
    #: the AppIDs of every bot the daemon serves, in the config's order (empty: ``app_id``
    #: alone, if set); a request's ``?app_id=`` must name one of them
    app_ids: tuple[str, ...] = ()
    #: the ``self_id`` of each of them (their OneBot name, shown beside the AppID)
    self_ids: tuple[int, ...] = ()

    @property
    def served(self) -> tuple[str, ...]:
        """The AppIDs served: a request picks one with ``?app_id=`` (the first: default)."""
        return self.app_ids or ((self.app_id,) if self.app_id else ())
