"""What the console shows of the parts the API may not import (pure data).

The API layer never imports the QQ side, the OneBot side or the bridge (an import-linter
contract): the daemon, which holds them, hands the console a :data:`LinkStatus` callable
that describes them in these plain shapes (``gensokyo_idmap/link_status.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeAlias

from gensokyo_idmap.readiness import PlatformReadiness

__all__ = ["FrameworkLink", "GatewayLink", "LinkStatus", "LinkView", "WebhookEvent"]


@dataclass(frozen=True, slots=True)
class GatewayLink:
    session_id: str | None
    seq: int | None
    resumes: int
    identifies: int
    pauses: int
    #: connecting, connected (a session established), paused (reading stops until events
    #: can be processed) or stopped (closed for good): ``link_metrics.GATEWAY_STATES``
    state: str = "connecting"


@dataclass(frozen=True, slots=True)
class WebhookEvent:
    event_type: str
    at: float  # unix seconds


@dataclass(frozen=True, slots=True)
class FrameworkLink:
    """One framework connection: its transport, its name (a URL without credentials, or
    a count of forward connections), and what it is owed: events handed over but not yet
    confirmed, and of them how many wait in outbox.db; ``problem``: why the framework
    refuses the connection, while it does (a reverse-WS handshake refused: the access
    token), else None."""

    transport: str
    name: str
    connected: bool | None
    owed: int
    durable: int
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class LinkView:
    gateway: GatewayLink | None = None
    webhook: bool = False
    last_webhook: WebhookEvent | None = None
    frameworks: tuple[FrameworkLink, ...] = field(default_factory=tuple)
    #: the platform side as ``/readyz`` judges it (None: not known, nothing said of it)
    platform: PlatformReadiness | None = None


#: Called for each overview: what the daemon's platform link and frameworks look like now.
LinkStatus: TypeAlias = Callable[[], LinkView]
