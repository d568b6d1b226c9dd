"""One bot's parts in a daemon of any number of bots (composition side).

Every bot shares the daemon's stores (the identity graph, the message ids, the delivery
claims, the outbox) and its listeners (webhook, forward WS, OneBot HTTP API, identity API);
each has its own platform client (HTTP client, access token, OpenAPI), gateway session,
reply budget (its count of the replies to each message: two bots given one platform
message id each have its five), action service (sends with its token, as its AppID),
inbound bridge (events translated with its AppID, each with its ``self_id``), framework
connections (a reverse-WS client per framework URL, an HTTP POST target per URL, its
forward-WS server behind the shared listener) and inbound pipeline. :func:`make_bot` makes
them from its :class:`~gensokyo_idmap.bots.BotSettings`; the daemon (``app.py``) starts
them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from functools import partial

import aiohttp

from gensokyo_idmap import jsonio
from gensokyo_idmap.admission import Admission
from gensokyo_idmap.api.failure_limit import FailureLimit
from gensokyo_idmap.bots import BotSettings
from gensokyo_idmap.bridge.actions import ActionService
from gensokyo_idmap.bridge.inbound import BridgeSettings, EventSink, InboundBridge
from gensokyo_idmap.bridge.outbound import OutboundSender, OutboundSettings
from gensokyo_idmap.bridge.outbox import Backlog, Outbox
from gensokyo_idmap.config import Config
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.onebot.forward_ws import ForwardWsServer
from gensokyo_idmap.onebot.http_post import HttpPostTarget
from gensokyo_idmap.onebot.reverse_ws import ReverseWsClient
from gensokyo_idmap.qq.events import Interaction
from gensokyo_idmap.qq.openapi import OpenApiClient
from gensokyo_idmap.qq.token import AccessTokenManager
from gensokyo_idmap.runtime.msgid import MessageIds
from gensokyo_idmap.runtime.replies import ReplyBudget
from gensokyo_idmap.tables import Named

__all__ = ["BotRuntime", "PlatformClient", "make_bot"]


@dataclass(frozen=True, slots=True)
class PlatformClient:
    """A bot's side of the platform API: one HTTP client, its access token, OpenAPI."""

    http: aiohttp.ClientSession
    tokens: AccessTokenManager
    openapi: OpenApiClient

    async def acknowledge(self, event: Interaction) -> None:
        await self.openapi.ack_interaction(event.interaction_id)


@dataclass(slots=True)
class BotRuntime:
    """One bot's parts (made, not started: the daemon starts them in its order)."""

    settings: BotSettings
    platform: PlatformClient | None
    actions: ActionService
    #: its count of the replies to each message it received (its own: per bot)
    budget: ReplyBudget
    bridge: InboundBridge
    clients: list[ReverseWsClient]
    posts: list[HttpPostTarget]
    #: its server behind the shared forward-WS listener (None: ``onebot.forward_ws`` off)
    forward: ForwardWsServer | None = None
    gateway: asyncio.Task[None] | None = field(default=None)

    def memory_tables(self) -> list[Named]:
        """Its in-memory tables, and those of the daemon it reaches (the graph's, shared
        with the other bots: registered once), for :mod:`gensokyo_idmap.tables`."""
        return [*self.budget.memory_tables(), *self.bridge.memory_tables(),
                *self.actions.sender.memory_tables()]

    @property
    def sinks(self) -> list[EventSink]:
        """Where its events go: each framework connection of this bot."""
        sinks: list[EventSink] = [*self.clients, *self.posts]
        if self.forward is not None:
            sinks.append(self.forward)
        return sinks


def platform_client(bot: BotSettings, stack: AsyncExitStack) -> PlatformClient | None:
    """The platform client of ``bot`` (its token URL and API base), its HTTP client closed
    with ``stack``; None without an AppID and a secret."""
    if not bot.platform_ready:
        return None
    http = aiohttp.ClientSession(json_serialize=jsonio.dumps)
    stack.push_async_callback(http.close)
    tokens = AccessTokenManager(bot.app_id, bot.secret_value, http, token_url=bot.qq.token_url)
    return PlatformClient(http, tokens, OpenApiClient(bot.qq.api_base, tokens, http))


def make_bot(config: Config, bot: BotSettings, graph: IdentityGraph, msgids: MessageIds,
             budget: ReplyBudget, outbox: Outbox, stack: AsyncExitStack, *,
             confirm_on_write: bool = False,
             token_failures: FailureLimit | None = None) -> BotRuntime:
    """The parts of ``bot`` over the shared stores (its HTTP client closes with
    ``stack``). ``confirm_on_write``: the benchmark's switch (``app.BENCH_CONFIRM_ON_WRITE``);
    ``token_failures``: the daemon's one count of wrong OneBot tokens per client."""
    platform = platform_client(bot, stack)
    onebot = config.onebot
    actions = ActionService(OutboundSender(
        graph, msgids, None if platform is None else platform.openapi, OutboundSettings(
            app_id=bot.app_id, self_id=bot.self_id, op_userid_type=onebot.op_userid_type,
            send_error=onebot.send_error,
            reads_off_loop=(config.idmap.backend == "postgres"
                            or config.idmap.runtime_backend == "redis"),
            unsupported_segments=onebot.unsupported_segments), budget),
        list_channels_as_groups=onebot.list_channels_as_groups)
    clients = [
        ReverseWsClient(url, bot.self_id, access_token=token or None, on_action=actions,
                        reconnect_interval=onebot.reconnect_interval_seconds,
                        heartbeat_interval=onebot.heartbeat_interval_seconds,
                        ping_timeout=onebot.ping_timeout_seconds,
                        backlog=partial(Backlog, outbox), confirm_on_write=confirm_on_write,
                        outbox_name=bot.outbox_name("reverse_ws", url))
        for url, token in bot.reverse_ws]
    posts = [HttpPostTarget(target.url, bot.self_id, secret=onebot.token(target.secret),
                            retries=target.max_retries,
                            retry_delay=target.retry_interval_seconds,
                            timeout=target.timeout_seconds, backlog=partial(Backlog, outbox),
                            on_quick_operation=actions.quick_operation,
                            outbox_name=bot.outbox_name("http_post", target.url))
             for target in bot.http_post]
    forward = ForwardWsServer(
        bot.self_id, access_token=onebot.token(onebot.forward_ws_access_token),
        on_action=actions, heartbeat_interval=onebot.heartbeat_interval_seconds,
        ping_timeout=onebot.ping_timeout_seconds, confirm_on_write=confirm_on_write,
        admission=Admission(config.api.allowed_hosts),
        token_failures=token_failures) if onebot.forward_ws else None
    bridge = InboundBridge(graph, msgids, BridgeSettings(
        app_id=bot.app_id, self_id=bot.self_id, message_format=onebot.message_format,
        link_union_openid=config.idmap.link_union_openid, extensions=onebot.extensions,
        op_userid_type=onebot.op_userid_type, white_prefixes=tuple(onebot.white_prefixes),
        black_prefixes=tuple(onebot.black_prefixes), remove_at=onebot.remove_at,
        reads_off_loop=config.idmap.runtime_backend == "redis"))
    return BotRuntime(bot, platform, actions, budget, bridge, clients, posts, forward)


def every_client(bots: Sequence[BotRuntime]) -> list[ReverseWsClient]:
    return [client for bot in bots for client in bot.clients]


def every_post(bots: Sequence[BotRuntime]) -> list[HttpPostTarget]:
    return [post for bot in bots for post in bot.posts]
