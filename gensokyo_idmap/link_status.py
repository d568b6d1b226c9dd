"""The console's view of the platform link and the framework connections (composition side).

The console (``api/console``) may not import the QQ side, the OneBot side or the bridge;
the daemon makes one :class:`LinkWatch`, fills it in as it starts each part, and hands it
to the API as its :data:`~gensokyo_idmap.api.console.status.LinkStatus`. Reads only what
the parts already keep (the gateway's session, seq and counts; each framework's queue and
outbox count): nothing is counted twice. The same view carries what ``/readyz`` needs of
the platform side of each bot (:class:`~gensokyo_idmap.readiness.PlatformReadiness`): its
settings, its access token's state, its gateway's session.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from gensokyo_idmap.api.console.status import (
    BotLink,
    FrameworkLink,
    GatewayLink,
    LinkView,
    WebhookEvent,
)
from gensokyo_idmap.bots import BotSettings
from gensokyo_idmap.bridge.outbox import Outbox
from gensokyo_idmap.onebot.forward_ws import ForwardWsRouter
from gensokyo_idmap.onebot.http_post import HttpPostTarget
from gensokyo_idmap.onebot.reverse_ws import ReverseWsClient
from gensokyo_idmap.qq.events import QQEvent
from gensokyo_idmap.qq.gateway import GatewayClient
from gensokyo_idmap.qq.token import AccessTokenManager
from gensokyo_idmap.readiness import GatewayReadiness, PlatformReadiness
from gensokyo_idmap.redaction import redact_url

__all__ = ["BotWatch", "LinkWatch"]


def _state(gateway: GatewayClient) -> str:
    """The gateway's state as ``/metrics`` and the console name it."""
    if gateway.fatal is not None:
        return "stopped"
    if gateway.paused:
        return "paused"
    return "connected" if gateway.connected else "connecting"


class BotWatch:
    """One bot's platform link, set as the daemon makes its parts: its access token, its
    gateway session, the last callback the webhook took for it."""

    def __init__(self, bot: BotSettings, *, named: bool = False) -> None:
        """``named``: the daemon serves several bots, so each of its readiness reasons
        names it."""
        self.app_id = bot.app_id
        self.self_id = bot.self_id
        self.key = bot.key
        self.secret = bool(bot.secret_value)
        self.gateway_wanted = bot.qq.gateway
        self.name = f"{bot.key} (AppID {bot.app_id or '-'})" if named else ""
        self.tokens: AccessTokenManager | None = None
        self.gateway: GatewayClient | None = None
        self.last_webhook: WebhookEvent | None = None
        #: whether the daemon's webhook listener takes its callbacks
        self.webhook = False

    def saw_webhook(self, event: QQEvent) -> None:
        self.last_webhook = WebhookEvent(event.event_type, time.time())

    def readiness(self) -> PlatformReadiness:
        tokens, gateway = self.tokens, self.gateway
        return PlatformReadiness(
            app_id=bool(self.app_id), secret=self.secret,
            token_obtained=tokens is not None and tokens.obtained,
            token_failure=None if tokens is None else tokens.failure,
            webhook=self.webhook, gateway_wanted=self.gateway_wanted,
            gateway=None if gateway is None else GatewayReadiness(
                gateway.connected, gateway.paused, gateway.fatal),
            key=self.key, name=self.name)

    def link(self) -> BotLink:
        gateway = self.gateway
        return BotLink(
            self.app_id, self.self_id,
            gateway=None if gateway is None else GatewayLink(
                gateway.session_id, gateway.seq, gateway.resumes, gateway.identifies,
                gateway.pauses, _state(gateway)),
            last_webhook=self.last_webhook, platform=self.readiness())


class LinkWatch:
    """The parts of one daemon the console describes; set as the daemon makes them."""

    def __init__(self, outbox: Outbox) -> None:
        self.outbox = outbox
        #: each bot's platform link, in the config's order (:meth:`add`)
        self.bots: list[BotWatch] = []
        self.webhook = False
        self.clients: Sequence[ReverseWsClient] = ()
        self.posts: Sequence[HttpPostTarget] = ()
        self.forward: ForwardWsRouter | None = None

    def add(self, bots: Sequence[BotSettings]) -> list[BotWatch]:
        """A :class:`BotWatch` of each of ``bots`` (the daemon's, in the config's order)."""
        made = [BotWatch(bot, named=len(bots) > 1) for bot in bots]
        self.bots += made
        return made

    def _app_id_of(self, self_id: int) -> str:
        return next((bot.app_id for bot in self.bots if bot.self_id == self_id), "")

    def __call__(self) -> LinkView:
        frameworks = [
            FrameworkLink("reverse_ws", redact_url(client.url), client.connected.is_set(),
                          len(client.queue), self.outbox.durable_count(client.outbox_name),
                          problem=client.problem, bot=self._app_id_of(client.self_id))
            for client in self.clients]
        frameworks += [
            FrameworkLink("http_post", redact_url(post.url), None, len(post.queue),
                          self.outbox.durable_count(post.outbox_name),
                          bot=self._app_id_of(post.self_id))
            for post in self.posts]
        if self.forward is not None:
            n = 0
            for server in self.forward.servers.values():
                bot = self._app_id_of(server.self_id)
                owed = server.owed()
                frameworks += [FrameworkLink("forward_ws", f"connection {n + k}", True,
                                             events, 0, bot=bot)
                               for k, events in enumerate(owed, 1)]
                n += len(owed)
                if not owed:
                    frameworks.append(FrameworkLink("forward_ws", "no connection", False, 0, 0,
                                                    bot=bot))
        bots = tuple(bot.link() for bot in self.bots)
        seen = [bot.last_webhook for bot in bots if bot.last_webhook is not None]
        return LinkView(
            gateway=bots[0].gateway if bots else None, webhook=self.webhook,
            last_webhook=max(seen, key=lambda event: event.at) if seen else None,
            frameworks=tuple(frameworks), platform=bots[0].platform if bots else None,
            bots=bots)
