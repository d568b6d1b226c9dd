"""The console's view of the platform link and the framework connections (composition side).

The console (``api/console``) may not import the QQ side, the OneBot side or the bridge;
the daemon makes one :class:`LinkWatch`, fills it in as it starts each part, and hands it
to the API as its :data:`~gensokyo_idmap.api.console.status.LinkStatus` and its
:class:`~gensokyo_idmap.api.console.status.Controls`. Reads only what the parts already
keep (the gateway's session, seq and counts; each framework's queue and outbox count):
nothing is counted twice. The same view carries what ``/readyz`` needs of the platform side
of each bot (:class:`~gensokyo_idmap.readiness.PlatformReadiness`): its settings, its access
token's state, its gateway's session; and, by the same rule, what each bot tells its
frameworks of itself (:meth:`BotWatch.onebot_status`: OneBot's ``get_status`` and
heartbeats). What the console may do goes through the parts' own
rules: a backlog dropped by its :class:`~gensokyo_idmap.bridge.outbox.Backlog`, a test
message sent as the OneBot action a framework would send (by the chat's bot).
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from gensokyo_idmap.api.console.status import (
    BotLink,
    ConfigRow,
    FrameworkLink,
    GatewayLink,
    LinkView,
    SendOutcome,
    WebhookEvent,
)
from gensokyo_idmap.bots import BotSettings
from gensokyo_idmap.bridge.outbox import Backlog, Outbox, TrackedSink
from gensokyo_idmap.config import Config
from gensokyo_idmap.config_env import env_overrides
from gensokyo_idmap.config_view import config_keys
from gensokyo_idmap.errors import BadInputError, NotFoundError
from gensokyo_idmap.health import HealthSource, known_healthy
from gensokyo_idmap.identity import parse_scene
from gensokyo_idmap.onebot.forward_ws import ForwardWsRouter
from gensokyo_idmap.onebot.http_post import HttpPostTarget
from gensokyo_idmap.onebot.reverse_ws import ReverseWsClient
from gensokyo_idmap.onebot.status import BotStatus
from gensokyo_idmap.qq.events import QQEvent
from gensokyo_idmap.qq.gateway import GatewayClient
from gensokyo_idmap.qq.token import AccessTokenManager
from gensokyo_idmap.readiness import GatewayReadiness, PlatformReadiness, missing
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

    def __init__(self, bot: BotSettings, *, named: bool = False,
                 stores_healthy: Callable[[], bool] = lambda: True) -> None:
        """``named``: the daemon serves several bots, so each of its readiness reasons
        names it; ``stores_healthy``: whether the daemon's stores work, as they know it
        (:meth:`LinkWatch.stores_healthy`)."""
        self._stores_healthy = stores_healthy
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

    def onebot_status(self) -> BotStatus:
        """What this bot tells its frameworks (``get_status``, every heartbeat): online when
        its platform side lacks nothing ``/readyz`` would name (one rule:
        :func:`~gensokyo_idmap.readiness.missing`), good when online and the stores work.
        Reads attributes only: asked at every heartbeat of every connection."""
        online = not missing(self.readiness())
        return BotStatus(online=online, good=online and self._stores_healthy())

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

    def __init__(self, outbox: Outbox, stores: Sequence[HealthSource] = ()) -> None:
        """``stores``: the daemon's stores (graph, message ids, outbox), whose own account
        of their health (:meth:`~gensokyo_idmap.health.HealthSource.health`, what
        ``/healthz`` asks first) makes each bot's OneBot status good or not."""
        self.outbox = outbox
        self.stores = tuple(stores)
        #: each bot's platform link, in the config's order (:meth:`add`)
        self.watched: list[BotWatch] = []
        self.webhook = False
        self.clients: Sequence[ReverseWsClient] = ()
        self.posts: Sequence[HttpPostTarget] = ()
        self.forward: ForwardWsRouter | None = None
        #: the running configuration (the console's system page)
        self.config: Config | None = None
        #: each bot's OneBot actions, by AppID (a test message goes through them)
        self.actions: Mapping[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = {}
        #: each bot's count of the replies to a received message (its reply budget), by AppID
        self.replies: Mapping[str, Callable[[str], int]] = {}

    def add(self, bots: Sequence[BotSettings]) -> list[BotWatch]:
        """A :class:`BotWatch` of each of ``bots`` (the daemon's, in the config's order)."""
        made = [BotWatch(bot, named=len(bots) > 1, stores_healthy=self.stores_healthy)
                for bot in bots]
        self.watched += made
        return made

    def stores_healthy(self) -> bool:
        """Whether no store knows of a failure now (:func:`~gensokyo_idmap.health.known_healthy`:
        no I/O)."""
        return known_healthy(self.stores)

    def _app_id_of(self, self_id: int) -> str:
        return next((bot.app_id for bot in self.watched if bot.self_id == self_id), "")

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
        bots = tuple(bot.link() for bot in self.watched)
        seen = [bot.last_webhook for bot in bots if bot.last_webhook is not None]
        return LinkView(
            gateway=bots[0].gateway if bots else None, webhook=self.webhook,
            last_webhook=max(seen, key=lambda event: event.at) if seen else None,
            frameworks=tuple(frameworks), platform=bots[0].platform if bots else None,
            bots=bots)

    # --- Controls: what the console may ask --------------------------------------------------

    def config_rows(self) -> list[ConfigRow]:
        if self.config is None:
            return []
        return [ConfigRow(path, value, source) for path, value, source
                in config_keys(self.config, env_overrides(os.environ))]

    def bots(self) -> list[str]:
        return list(self.actions)

    def replies_used(self, app_id: str, reference: str) -> int:
        used = self.replies.get(app_id)
        return 0 if used is None else used(reference)

    async def drop_backlog(self, number: int, name: str) -> int:
        links = self().frameworks
        tracked: list[TrackedSink] = [*self.clients, *self.posts]
        if not 0 <= number < len(links) or links[number].name != name:
            raise NotFoundError(f"no framework {name!r} (the list changed: reload the page)")
        if number >= len(tracked) or not isinstance(tracked[number].backlog, Backlog):
            raise NotFoundError(f"{name} keeps no backlog to drop (a forward-WS connection "
                                "owes its events only while it is connected)")
        backlog = tracked[number].backlog
        assert isinstance(backlog, Backlog)
        return await backlog.drop()

    async def send_test(self, scene: str, text: str) -> SendOutcome:
        _, app_id, kind, target = parse_scene(scene)
        actions = self.actions.get(app_id)
        if actions is None:
            raise NotFoundError(f"{app_id} is not a bot of this daemon")
        message = {"type": "text", "data": {"text": text}}
        if kind in ("group", "c2c"):
            field = "group_id" if kind == "group" else "user_id"
            frame: dict[str, Any] = {"action": "send_msg", "params": {  # the chat's OpenID
                "message_type": "group" if kind == "group" else "private",
                field: target, "message": [message]}}
        elif kind == "channel":
            frame = {"action": "send_guild_channel_msg",
                     "params": {"channel_id": target, "message": [message]}}
        else:
            raise BadInputError("scene", scene, "a test message goes to a group, a C2C chat "
                                "or a channel")
        answer = await actions(frame)
        data = answer.get("data") if isinstance(answer.get("data"), dict) else {}
        retcode = int(answer.get("retcode", 0))
        return SendOutcome(ok=answer.get("status") == "ok" and retcode == 0, retcode=retcode,
                           detail=str(answer.get("message") or answer.get("wording") or ""),
                           message_id=(data or {}).get("message_id"))
