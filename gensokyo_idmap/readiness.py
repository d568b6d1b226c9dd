"""What ``/readyz`` tells: whether the daemon can do its job now, and if not, what is missing.

``/healthz`` is liveness: the process answers and its stores can be read and written. A
daemon that is alive may still be useless: without ``bot.secret`` it verifies no callback
and sends nothing; without an access token the platform refuses its replies; with
``qq.gateway`` on, no event comes in until a session is established. A load balancer, a
supervisor or an operator asks ``/readyz`` for that, and gets each missing part named.

This module is the rule only (pure: a snapshot in, reasons out); the daemon fills the
snapshot from the parts it holds (``link_status.py``), and the API answers with it.
Reasons name settings and states, never a secret's value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["GatewayReadiness", "PlatformReadiness", "missing"]


@dataclass(frozen=True, slots=True)
class GatewayReadiness:
    """The gateway client as readiness sees it (None in :class:`PlatformReadiness` while
    the client is not made yet: the gateway's URL is being discovered)."""

    connected: bool
    paused: bool = False
    #: why the client stopped for good (a fatal close code), or None
    fatal: str | None = None


@dataclass(frozen=True, slots=True)
class PlatformReadiness:
    """The platform side of one daemon, as configured and as it is now."""

    app_id: bool
    secret: bool
    #: a token was obtained, at any time
    token_obtained: bool = False
    #: why the last attempt to obtain one failed (None after one that did not, or none yet)
    token_failure: str | None = None
    webhook: bool = False
    gateway_wanted: bool = False
    gateway: GatewayReadiness | None = None


def _platform(state: PlatformReadiness) -> list[str]:
    if not (state.app_id and state.secret):
        unset = [name for name, given in (("bot.app_id", state.app_id),
                                          ("bot.secret", state.secret)) if not given]
        return [f"{' and '.join(unset)} not set: callbacks cannot be verified and the "
                "platform cannot be asked for an access token"]
    found: list[str] = []
    if state.token_failure is not None:
        found.append(f"platform access token not obtained: {state.token_failure}")
    elif not state.token_obtained:
        found.append("platform access token not obtained yet")
    if state.gateway_wanted:
        gateway = state.gateway
        if gateway is None:
            found.append("gateway not connected: its URL is not discovered yet")
        elif gateway.fatal is not None:
            found.append(f"gateway stopped: {gateway.fatal}")
        elif not gateway.connected:
            found.append("gateway not connected: no session established")
        elif gateway.paused:
            found.append("gateway paused: events cannot be processed now")
    if not (state.webhook or state.gateway_wanted):
        found.append("no event source: neither webhook.listen nor qq.gateway is on")
    return found


def missing(platform: PlatformReadiness | None, backends: Sequence[str] = ()) -> list[str]:
    """Every reason the daemon cannot do its job now: what the platform side lacks
    (``platform``; None: not known here, nothing said about it), then ``backends``, the
    problems of its stores and servers as ``/healthz`` finds them. Empty: ready."""
    found = _platform(platform) if platform is not None else []
    return found + list(backends)
