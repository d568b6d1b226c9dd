"""The console's view of the platform link and the framework connections (composition side).

The console (``api/console``) may not import the QQ side, the OneBot side or the bridge;
the daemon makes one :class:`LinkWatch`, fills it in as it starts each part, and hands it
to the API as its :data:`~gensokyo_idmap.api.console.status.LinkStatus`. Reads only what
the parts already keep (the gateway's session, seq and counts; each framework's queue and
outbox count): nothing is counted twice. The same view carries what ``/readyz`` needs of
the platform side (:class:`~gensokyo_idmap.readiness.PlatformReadiness`): the bot's
settings, the access token's state, the gateway's session.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from gensokyo_idmap.api.console.status import (
    FrameworkLink,
    GatewayLink,
    LinkView,
    WebhookEvent,
)
from gensokyo_idmap.bridge.outbox import Outbox
from gensokyo_idmap.onebot.forward_ws import ForwardWsRouter
from gensokyo_idmap.onebot.http_post import HttpPostTarget
from gensokyo_idmap.onebot.reverse_ws import ReverseWsClient
from gensokyo_idmap.qq.events import QQEvent
from gensokyo_idmap.qq.gateway import GatewayClient
from gensokyo_idmap.qq.token import AccessTokenManager
from gensokyo_idmap.readiness import GatewayReadiness, PlatformReadiness
from gensokyo_idmap.redaction import redact_url

__all__ = ["LinkWatch"]


def _state(gateway: GatewayClient) -> str:
    """The gateway's state as ``/metrics`` and the console name it."""
    if gateway.fatal is not None:
        return "stopped"
    if gateway.paused:
        return "paused"
    return "connected" if gateway.connected else "connecting"


class LinkWatch:
    """The parts of one daemon the console describes; set as the daemon makes them."""

    def __init__(self, outbox: Outbox, *, app_id: bool = False, secret: bool = False,
                 gateway_wanted: bool = False) -> None:
        """``app_id``, ``secret``: whether ``bot.app_id`` and ``bot.secret`` are set;
        ``gateway_wanted``: ``qq.gateway``."""
        self.outbox = outbox
        self.app_id = app_id
        self.secret = secret
        self.gateway_wanted = gateway_wanted
        self.tokens: AccessTokenManager | None = None
        self.gateway: GatewayClient | None = None
        self.webhook = False
        self.last_webhook: WebhookEvent | None = None
        self.clients: Sequence[ReverseWsClient] = ()
        self.posts: Sequence[HttpPostTarget] = ()
        self.forward: ForwardWsRouter | None = None

    def saw_webhook(self, event: QQEvent) -> None:
        self.last_webhook = WebhookEvent(event.event_type, time.time())

    def readiness(self) -> PlatformReadiness:
        tokens, gateway = self.tokens, self.gateway
        return PlatformReadiness(
            app_id=self.app_id, secret=self.secret,
            token_obtained=tokens is not None and tokens.obtained,
            token_failure=None if tokens is None else tokens.failure,
            webhook=self.webhook, gateway_wanted=self.gateway_wanted,
            gateway=None if gateway is None else GatewayReadiness(
                gateway.connected, gateway.paused, gateway.fatal))

    def __call__(self) -> LinkView:
        gateway = self.gateway
        frameworks = [
            FrameworkLink("reverse_ws", redact_url(client.url), client.connected.is_set(),
                          len(client.queue), self.outbox.durable_count(client.outbox_name),
                          problem=client.problem)
            for client in self.clients]
        frameworks += [
            FrameworkLink("http_post", redact_url(post.url), None, len(post.queue),
                          self.outbox.durable_count(post.outbox_name))
            for post in self.posts]
        if self.forward is not None:
            owed = self.forward.owed()
            frameworks += [FrameworkLink("forward_ws", f"connection {n}", True, events, 0)
                           for n, events in enumerate(owed, 1)]
            if not owed:
                frameworks.append(FrameworkLink("forward_ws", "no connection", False, 0, 0))
        return LinkView(
            gateway=None if gateway is None else GatewayLink(
                gateway.session_id, gateway.seq, gateway.resumes, gateway.identifies,
                gateway.pauses, _state(gateway)),
            webhook=self.webhook, last_webhook=self.last_webhook,
            frameworks=tuple(frameworks), platform=self.readiness())
