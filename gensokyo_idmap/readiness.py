"""What ``/readyz`` tells: whether the daemon can do its job now, and if not, what is missing.

``/healthz`` is liveness: the process answers and its stores can be read and written. A
daemon that is alive may still be useless: without ``bot.secret`` it verifies no callback
and sends nothing; without an access token the platform refuses its replies; with
``qq.gateway`` on, no event comes in until a session is established. A load balancer, a
supervisor or an operator asks ``/readyz`` for that, and gets each missing part named.

This module is the rule only (pure: a snapshot in, reasons out); the daemon fills the
snapshot from the parts it holds (``link_status.py``), one per bot, and the API answers
with it. A daemon of several bots is ready when every bot is; each reason then names its
bot (``bots.1 (AppID 102000002): gateway not connected: …``).
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
    """The platform side of one bot, as configured and as it is now."""

    app_id: bool
    secret: bool
    #: a token was obtained, at any time
    token_obtained: bool = False
    #: why the last attempt to obtain one failed (None after one that did not, or none yet)
    token_failure: str | None = None
    webhook: bool = False
    gateway_wanted: bool = False
    gateway: GatewayReadiness | None = None
    #: where the bot's keys are in the config (``bot``, ``bots.1``): the keys a reason names
    key: str = "bot"
    #: what each of its reasons starts with when the daemon serves several bots
    #: (``bots.1 (AppID 102000002)``); empty: one bot, its reasons as they always were
    name: str = ""


def _platform(state: PlatformReadiness) -> list[str]:
    found = _missing_of(state)
    return [f"{state.name}: {reason}" for reason in found] if state.name else found


def _missing_of(state: PlatformReadiness) -> list[str]:
    if not (state.app_id and state.secret):
        unset = [name for name, given in ((f"{state.key}.app_id", state.app_id),
                                          (f"{state.key}.secret", state.secret)) if not given]
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


def missing(platform: PlatformReadiness | Sequence[PlatformReadiness] | None,
            backends: Sequence[str] = ()) -> list[str]:
    """Every reason the daemon cannot do its job now: what the platform side of each bot
    lacks (``platform``: one bot's, or each bot's in the config's order; None: not known
    here, nothing said about it), then ``backends``, the problems of its stores and servers
    as ``/healthz`` finds them. Empty: ready: every bot can do its job."""
    states = [platform] if isinstance(platform, PlatformReadiness) else list(platform or ())
    return [reason for state in states for reason in _platform(state)] + list(backends)
