"""The daemon process: open the stores, run until told to stop, close cleanly.

The composition root: :func:`build_daemon` makes and connects the parts, registering each
one's clean-up on an :class:`~contextlib.AsyncExitStack`; :func:`serve_until_stopped` runs
the built daemon; :func:`run_daemon` does both. Rules live in the modules that own them.

The stores and the sweeper; the platform side (webhook receiver, gateway client, OpenAPI
client) feeding the inbound bridge; the OneBot side (reverse WS clients, forward WS server,
HTTP POST targets, HTTP API server), whose actions all go to one ActionService.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, ExitStack, closing
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Final, TypeAlias

import aiohttp
import structlog
from aiohttp import web

from gensokyo_idmap.admission import Admission
from gensokyo_idmap.api import ApiServer
from gensokyo_idmap.api.failure_limit import FailureLimit
from gensokyo_idmap.api.settings import ApiSettings
from gensokyo_idmap.bot_runtime import BotRuntime, every_client, every_post, make_bot
from gensokyo_idmap.bots import BotSettings, orphaned_outboxes, resolve_bots
from gensokyo_idmap.bridge.chat_turns import ChatTurns
from gensokyo_idmap.bridge.dedup import window_seconds
from gensokyo_idmap.bridge.inbound import InboundPipeline, SharedBatches
from gensokyo_idmap.bridge.outbox import Outbox, TrackedSink
from gensokyo_idmap.config import Config
from gensokyo_idmap.errors import BadInputError, StoreError, UnreachableError
from gensokyo_idmap.health import ServerCheck, server_problems
from gensokyo_idmap.hostport import parse_host_port
from gensokyo_idmap.http_guard import ConnectionPlan, Deadlines, quiet_accept_errors
from gensokyo_idmap.identity_backend import (
    cached_identity_store,
    identity_store_location,
    open_identity_store,
)
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.link_status import BotWatch, LinkWatch
from gensokyo_idmap.memory import run_trimmer
from gensokyo_idmap.onebot.forward_ws import ForwardWsRouter
from gensokyo_idmap.onebot.http_api import HttpApiServer
from gensokyo_idmap.onebot.http_post import HttpPostTarget
from gensokyo_idmap.onebot.reverse_ws import ReverseWsClient
from gensokyo_idmap.ops.config_check import refuse_bad_startup
from gensokyo_idmap.qq import events as qq_events
from gensokyo_idmap.qq.events import QQEvent
from gensokyo_idmap.qq.gateway import (
    DISCOVERY_FIRST_DELAY,
    DISCOVERY_MAX_DELAY,
    PROBE_MAX_INTERVAL,
    BackendProbe,
    GatewayClient,
    GatewayState,
    SessionStore,
    discover_gateway_retrying,
)
from gensokyo_idmap.qq.token import AccessTokenManager
from gensokyo_idmap.qq.webhook import WebhookReceiver, WebhookRouter
from gensokyo_idmap.redaction import redact_url
from gensokyo_idmap.runtime.blocks import IdBlocks, reserve_in
from gensokyo_idmap.runtime.claims import ClaimStore, DeliveryLog, DurableClaims
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore, open_msgid_store
from gensokyo_idmap.runtime.msgid import MessageIds, MsgIdMap
from gensokyo_idmap.runtime.replies import ReplyBudget, seq_base_for_process
from gensokyo_idmap.store.base import IdentityStore
from gensokyo_idmap.store.lmdb.env import LmdbEnv
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.store.lmdb.mapped_pages import run_releaser
from gensokyo_idmap.store.lmdb.outbox import LmdbOutboxStore
from gensokyo_idmap.store.serve_lock import ServeLock
from gensokyo_idmap.tables import Tables

if TYPE_CHECKING:
    from gensokyo_idmap.store.postgres.identity import PgIdentityStore

__all__ = ["Daemon", "StorePreparation", "build_daemon", "run_daemon", "serve_until_stopped"]

log = structlog.get_logger("gensokyo_idmap.app")

#: How long a listener's clean-up waits for the requests in flight when the daemon stops.
SHUTDOWN_SECONDS = 5.0

#: Run once the stores are open, before anything else starts: the CLI's ``serve`` hands in
#: the start-up migration (``migrate.startup.migrate_if_found``); the package itself never
#: imports ``migrate``.
StorePreparation: TypeAlias = Callable[
    [Config, "LmdbIdentityStore | PgIdentityStore", LmdbMsgIdStore], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Daemon:
    """What a built daemon runs: its listeners, its bots' gateway sessions and framework
    connections (the ready line names them)."""

    config: Config
    webhook: web.AppRunner | None
    forward: ForwardWsRouter | None
    onebot_api: web.AppRunner | None
    identity_api: web.AppRunner | None
    gateways: Sequence[asyncio.Task[None]]
    clients: Sequence[ReverseWsClient]
    posts: Sequence[HttpPostTarget]
    #: Opening the graph whose server was down at start (:func:`_reach_graph`): a schema
    #: refused once it answers ends the daemon with that error.
    opening: asyncio.Task[None] | None = None
    #: each bot's parts, in the config's order
    bots: Sequence[BotRuntime] = ()
    #: set once the ready line is out: the memory chore's first trim waits for it
    started: asyncio.Event = field(kw_only=True)

    @property
    def gateway(self) -> asyncio.Task[None] | None:
        """The first bot's gateway session (None: its gateway is off)."""
        return self.gateways[0] if self.gateways else None

    def listeners(self) -> list[str]:
        config = self.config
        several = len(self.bots) > 1
        listeners = ([f"webhook http://{config.webhook.listen}{config.webhook.path}"]
                     if self.webhook is not None else [])
        if self.forward is not None:
            listeners.append(f"forward ws ws://{config.onebot.forward_ws}/"
                             + (" (/<self_id>/ for each bot)" if several else ""))
        if self.onebot_api is not None:
            listeners.append(f"onebot http api http://{config.onebot.http_api}/"
                             + (" (/<self_id>/ for each bot)" if several else ""))
        if self.identity_api is not None:
            listeners.append(f"identity api http://{config.api.listen}/ "
                             "(/v1, /getid, /healthz, /readyz, /metrics, console /ui/)")
        for runtime in self.bots:
            bot = runtime.settings
            if runtime.gateway is not None:
                listeners.append(f"qq gateway via {bot.qq.api_base}/gateway/bot"
                                 + (f" (app_id {bot.app_id})" if several else ""))
        listeners += [f"reverse ws {c.url}" + (f" (self_id {c.self_id})" if several else "")
                      for c in self.clients]
        listeners += [f"http post {p.url}" + (f" (self_id {p.self_id})" if several else "")
                      for p in self.posts]
        return listeners


async def run_daemon(config: Config, stop: asyncio.Event | None = None, *,
                     prepare: StorePreparation | None = None) -> None:
    """Run until SIGINT/SIGTERM (or ``stop`` is set).

    A config ``config check`` refuses is refused here too, before anything is opened.
    """
    refuse_bad_startup(config)
    stop = stop or asyncio.Event()
    async with AsyncExitStack() as stack:
        daemon = await build_daemon(config, stop, stack, prepare=prepare)
        await serve_until_stopped(daemon, stop)


async def serve_until_stopped(daemon: Daemon, stop: asyncio.Event) -> None:
    """Say what the daemon serves, and wait for the stop."""
    log.info(
        "[app] ready",
        listeners=daemon.listeners() or "none configured (webhook.listen, onebot.reverse_ws)",
        cli="gensokyo-idmap identity --help",
    )
    daemon.started.set()
    stopped = asyncio.ensure_future(stop.wait())
    try:
        if daemon.opening is not None:
            await asyncio.wait((stopped, daemon.opening), return_when=asyncio.FIRST_COMPLETED)
            if daemon.opening.done() and not daemon.opening.cancelled():
                daemon.opening.result()  # the graph's refusal, if it was one
        await stopped
    finally:
        stopped.cancel()
    log.info("[app] stopping")


async def build_daemon(config: Config, stop: asyncio.Event, stack: AsyncExitStack, *,
                       prepare: StorePreparation | None = None) -> Daemon:
    """Open the stores, start every part and connect them; each part's clean-up goes onto
    ``stack`` as it is made, so closing ``stack`` stops the daemon, in this order: signal
    handlers; intake (gateway session, webhook, OneBot HTTP API, identity API); framework
    connections (reverse WS drained, HTTP POST, forward WS), queued sends, the HTTP client,
    the sweeper; the outbox; the stores; the serve lock.

    The data dir's serve lock is held from before the first store opens until the last one
    closed: a second daemon on the same data dir is refused (:class:`DataDirInUseError`)
    instead of sharing its gateway session.
    """
    stack.enter_context(ServeLock(config.idmap.data_dir))
    # put back once the last listener closed: asyncio's accept retries fire after that
    stack.callback(quiet_accept_errors(asyncio.get_running_loop()))
    _limit_server_waits(config)
    backing, store, msgid_store, outbox_store = await _open_stores(config, stack, prepare)
    outbox = Outbox(outbox_store)
    stack.push_async_callback(outbox.settle)
    # A stack's clean-ups run last in, first out. These stages, entered in the reverse of
    # the stop order, keep that order whatever order the parts are made in: each stage
    # stops before the one left of it.
    services, forward_side, posts_side, clients_side, intake = [
        await stack.enter_async_context(AsyncExitStack()) for _ in range(5)]
    _handle_signals(stop, stack)
    opening = _reach_graph(backing)
    if opening is not None:
        services.push_async_callback(_cancel, opening)

    graph = IdentityGraph(store)
    window = window_seconds(config.webhook.max_age_seconds)
    msgids, claims, budget_for = await _runtime_state(config, store, msgid_store, window,
                                                      services)
    _log_stores_open(config, graph, msgids)
    plan = _connection_plan(config)
    sweeper = asyncio.create_task(
        msgids.run_sweeper(stop, config.idmap.msgid_sweep_interval_seconds))
    services.push_async_callback(_stop_periodic, sweeper, stop)
    tables = Tables()  # the in-memory tables, filled in as their parts are made
    started = asyncio.Event()
    trimmer = asyncio.create_task(run_trimmer(stop, sweep=tables.sweep,  # the memory chore
                                              started=started))
    services.push_async_callback(_stop_periodic, trimmer, stop)
    mapped = [store for store in (backing, msgid_store, outbox_store)
              if isinstance(store, LmdbEnv)]
    releaser = asyncio.create_task(run_releaser(stop, mapped))  # their read pages unmapped
    services.push_async_callback(_stop_periodic, releaser, stop)
    bots = resolve_bots(config)
    _warn_of_names_left_behind(config, bots, outbox_store)
    watch = LinkWatch(outbox)
    watches = watch.add(bots)
    watch.config = config
    identity_api = (await _start_api(config, bots, graph, msgids, outbox_store,
                                     _server_checks(config, graph, msgids, services), watch,
                                     plan, tables)
                    if config.api.listen else None)
    if identity_api is not None:
        intake.push_async_callback(identity_api.cleanup)
    # one count of wrong OneBot tokens per client, for every bot's forward WS and the HTTP
    # API (api.token's is the API listener's own: another secret)
    onebot_failures = FailureLimit()
    if config.onebot.forward_ws or config.onebot.http_api:
        tables.add("onebot_token_failures", onebot_failures)
    runtimes = [make_bot(config, bot, graph, msgids, budget_for(bot), outbox, services,
                         confirm_on_write=_bench_confirm_on_write(),
                         token_failures=onebot_failures) for bot in bots]
    for runtime in runtimes:
        platform = runtime.platform
        if platform is not None:  # a wrong secret shows now, not at the first reply (/readyz)
            keeper = asyncio.create_task(platform.tokens.keep_fresh())
            services.push_async_callback(_cancel, keeper)  # before its HTTP client closes
        services.push_async_callback(runtime.actions.drain)  # queued (_async) sends, before http
    for runtime, seen in zip(runtimes, watches, strict=True):
        if runtime.platform is not None:
            seen.tokens = runtime.platform.tokens
    # the console's test message goes out as the chat's bot would send it, and each
    # chat's replies left are its bot's
    watch.actions = {runtime.settings.app_id: runtime.actions for runtime in runtimes
                     if runtime.settings.app_id}
    watch.replies = {runtime.settings.app_id: runtime.budget.used for runtime in runtimes
                     if runtime.settings.app_id}

    clients = every_client(runtimes)
    watch.clients = clients
    for client in reversed(clients):
        clients_side.push_async_callback(_drain_and_close, client)
    deliveries = DeliveryLog(ttl=window, claims=claims)
    for client in clients:
        _restore_owed(client, deliveries)
        client.start()
        log.info("[onebot] reverse ws", url=client.url, self_id=client.self_id)
    posts = every_post(runtimes)
    for post in reversed(posts):
        posts_side.push_async_callback(post.close)
    watch.posts = posts
    for post in posts:
        _restore_owed(post, deliveries)
        post.start()
        log.info("[onebot] http post", url=post.url, self_id=post.self_id)
    forward: ForwardWsRouter | None = None
    if config.onebot.forward_ws:
        forward = ForwardWsRouter([runtime.forward for runtime in runtimes
                                   if runtime.forward is not None])
        forward_runner = await _listen(forward.routes(), config.onebot.forward_ws,
                                       "onebot.forward_ws", plan)
        forward_side.push_async_callback(forward_runner.cleanup)
        forward_side.push_async_callback(forward.close)  # its connections, then its listener
        watch.forward = forward
        log.info("[onebot] forward ws listening", url=f"ws://{config.onebot.forward_ws}/",
                 self_ids=_self_ids(bots))
    onebot_api: web.AppRunner | None = None
    if config.onebot.http_api:
        api = HttpApiServer({runtime.settings.self_id: runtime.actions for runtime in runtimes},
                            access_token=config.onebot.token(
                                config.onebot.http_api_access_token),
                            admission=Admission(config.api.allowed_hosts),
                            token_failures=onebot_failures)
        onebot_api = await _listen(api.routes(), config.onebot.http_api, "onebot.http_api",
                                   plan)
        intake.push_async_callback(onebot_api.cleanup)
        log.info("[onebot] http api listening", url=f"http://{config.onebot.http_api}/",
                 self_ids=_self_ids(bots))

    turns = ChatTurns()  # one for every bot: a chat's scene names its AppID
    tables.add_from(*runtimes, msgids, deliveries, turns)
    tables.add_all(qq_events.memory_tables())
    pipelines = [InboundPipeline(
        runtime.bridge, runtime.sinks, deliveries,
        acknowledge=None if runtime.platform is None else runtime.platform.acknowledge,
        key_scope=runtime.settings.scope, turns=turns)
        for runtime in runtimes]
    # every bot's events of one turn (webhook callbacks; with several bots, the gateways'
    # reads too) are one batch: ten bots' traffic costs what one bot's does
    batches = SharedBatches()
    intake.push_async_callback(batches.drain)  # after the intake: what it started ends
    webhook: web.AppRunner | None = None
    if config.webhook.listen:
        receivers = []
        for runtime, pipeline, seen in zip(runtimes, pipelines, watches, strict=True):
            receivers.append(WebhookReceiver.for_secret(  # an AppID each: checked at start
                runtime.settings.app_id, runtime.settings.secret_value,
                _watched(batches.of(pipeline), seen),
                max_age_seconds=config.webhook.max_age_seconds))
            seen.webhook = True
        webhook = await _start_webhook(config, WebhookRouter(receivers), plan)
        watch.webhook = True
        intake.push_async_callback(webhook.cleanup)  # nothing new is acknowledged
    gateways: list[asyncio.Task[None]] = []
    for runtime, pipeline, seen in zip(runtimes, pipelines, watches, strict=True):
        bot = runtime.settings
        if not bot.qq.gateway:
            continue
        if runtime.platform is None:  # refused at start (check_startup)
            raise BadInputError("qq.gateway", True,
                                f"the gateway needs the AppID and secret of {bot.key}")
        gateway = asyncio.create_task(_run_gateway(
            config, bot, runtime.platform.http, runtime.platform.tokens,
            pipeline.process_batch if len(runtimes) == 1 else batches.batches_of(pipeline),
            _backend_probe(config, msgids, services), seen, opening))
        # stop intake first: the saved seq is the last processed
        intake.push_async_callback(_cancel, gateway)
        runtime.gateway = gateway
        gateways.append(gateway)
    return Daemon(config, webhook, forward, onebot_api, identity_api, gateways, clients, posts,
                  opening, tuple(runtimes), started=started)


def _warn_of_names_left_behind(config: Config, bots: Sequence[BotSettings],
                               outbox_store: LmdbOutboxStore) -> None:
    """Say at start what a change of the config left behind under names no part of this
    daemon has (docs/bots.md): events owed in outbox.db to a connection it no longer makes
    (a framework URL or a bot removed, or the move from ``bot`` to ``bots``, which names
    each connection with its bot's ``self_id``), which nothing delivers until a connection
    of that name comes back; and, with ``bots``, the gateway session ``bot`` kept, which no
    bot resumes."""
    with outbox_store.read() as view:
        orphaned = orphaned_outboxes(view.sinks(), bots)
    if orphaned:
        log.warning("[onebot] events owed to connections this config does not make: not "
                    "delivered", owed={redact_url(name): n for name, n in orphaned.items()},
                    fix="run the config that had them until they are delivered "
                        "(gensokyo-idmap stats shows what is owed), then change it")
    legacy_session = config.files.gateway_state
    if (any(bot.listed and bot.qq.gateway for bot in bots) and config.idmap.backend == "lmdb"
            and legacy_session.is_file()):
        log.warning("[qq] gateway session of bot not resumed: with bots each bot's session "
                    "is its own file", path=str(legacy_session),
                    sessions=[bot.session_file for bot in bots if bot.qq.gateway],
                    effect="the platform does not replay what came while the daemon was "
                           "stopped", fix="delete it: no bot reads it")


def _self_ids(bots: Sequence[BotSettings]) -> list[int] | int:
    return [bot.self_id for bot in bots] if len(bots) > 1 else bots[0].self_id


async def _open_stores(
    config: Config, stack: AsyncExitStack, prepare: StorePreparation | None
) -> tuple[LmdbIdentityStore | PgIdentityStore, IdentityStore, LmdbMsgIdStore,
           LmdbOutboxStore]:
    """The three stores, prepared (migrated): their closing joins ``stack`` only then, with
    the ``[app] stopped`` line after it; a store that fails to open or prepare closes the
    ones opened before it. The graph comes twice: as opened, and as the daemon uses it
    (behind its cache). A graph on a PostgreSQL that is down begins in an outage
    (:func:`_reach_graph` opens it later); one whose schema is refused is an error here."""
    with ExitStack() as opening:
        store = open_identity_store(config, wait_for_server=True)  # idmap.backend
        graph_store = opening.enter_context(closing(cached_identity_store(config, store)))
        msgid_store = opening.enter_context(closing(open_msgid_store(config.msgid_db_path)))
        outbox_store = opening.enter_context(closing(LmdbOutboxStore(config.outbox_db_path)))
        if prepare is not None:
            await prepare(config, store, msgid_store)
        stack.callback(log.info, "[app] stopped")
        stack.enter_context(opening.pop_all())
    return store, graph_store, msgid_store, outbox_store


#: How long the daemon waits before asking a graph server that was down at start again,
#: doubling up to the second figure (the gateway's pause asks as often).
REACH_FIRST_SECONDS: Final = 1.0
REACH_MAX_SECONDS: Final = PROBE_MAX_INTERVAL


def _reach_graph(store: LmdbIdentityStore | PgIdentityStore) -> asyncio.Task[None] | None:
    """A task opening a graph whose server was down at start, once it answers (its schema
    checked and upgraded then, as at any start); None for a graph that is open. Meanwhile
    the store refuses every call as during any outage of its server. A schema refused
    then is raised by the task: the daemon stops with it (:func:`serve_until_stopped`)."""
    if isinstance(store, LmdbIdentityStore) or not store.waiting_for_server:
        return None
    graph = store

    async def reaching() -> None:
        delay = REACH_FIRST_SECONDS
        while True:
            await asyncio.sleep(delay)
            if await asyncio.to_thread(graph.reach):
                return
            delay = min(delay * 2, REACH_MAX_SECONDS)

    return asyncio.create_task(reaching())


#: Each bot's reply budget: a count of its own of the replies to each message (two bots
#: given one platform message id each have its five replies).
BudgetFor: TypeAlias = Callable[[BotSettings], ReplyBudget]


async def _runtime_state(config: Config, graph_store: IdentityStore, msgid_store: LmdbMsgIdStore,
                         window: float, stack: AsyncExitStack
                         ) -> tuple[MessageIds, ClaimStore, BudgetFor]:
    """Message ids, delivery claims and each bot's reply counts: in msgid-map.db and this
    process's memory, or on the Redis every daemon of the prefix shares
    (``idmap.runtime_backend``; the client closes with ``stack``; a bot's counts there are
    under its :attr:`~gensokyo_idmap.bots.BotSettings.scope`). Redis is asked once (a
    ``PING``): one that is down at start degrades the daemon as it would later
    (:mod:`gensokyo_idmap.runtime.redis.state`), the outage logged now. The message ids'
    high-water mark is in ``graph_store`` (:mod:`gensokyo_idmap.runtime.blocks`)."""
    seq_base = seq_base_for_process(time.time())
    ttl = config.idmap.msgid_ttl_seconds
    keep = config.idmap.keep_message_content
    blocks = IdBlocks(partial(reserve_in, graph_store))
    stack.callback(blocks.close)  # a reservation under way ends before the stores close
    if config.idmap.runtime_backend == "redis":
        # imported here: redis-py is an optional extra, needed only by this backend
        from gensokyo_idmap.runtime.redis.connection import RedisRuntime
        from gensokyo_idmap.runtime.redis.scripts import RedisMsgIds
        from gensokyo_idmap.runtime.redis.state import RedisClaims, RedisMsgIdMap, RedisReplyBudget

        runtime = RedisRuntime(config.idmap.redis_url, config.idmap.redis_prefix)
        stack.push_async_callback(runtime.aclose)
        ids = RedisMsgIds(runtime)
        msgids = RedisMsgIdMap(ids, ttl_seconds=ttl, keep_content=keep, blocks=blocks)
        await msgids.ask_at_start()
        return msgids, RedisClaims(ids, window), lambda bot: RedisReplyBudget(
            ids, seq_base=seq_base, scope=bot.scope)
    return (MsgIdMap(msgid_store, ttl_seconds=ttl, keep_content=keep, blocks=blocks),
            DurableClaims(msgid_store, window), lambda _: ReplyBudget(seq_base=seq_base))


def _limit_server_waits(config: Config) -> None:
    """A PostgreSQL that hangs stops the reads the daemon's tasks make (and hand to worker
    threads) after ``LOOP_WAIT_SECONDS``, not never: for this task and every one it makes
    from here on (:mod:`gensokyo_idmap.store.postgres.connection`)."""
    if config.idmap.backend == "postgres":
        from gensokyo_idmap.store.postgres.connection import LOOP_WAIT_SECONDS, WAIT_LIMIT

        WAIT_LIMIT.set(LOOP_WAIT_SECONDS)


def _server_checks(config: Config, graph: IdentityGraph | None, msgids: MessageIds,
                   stack: AsyncExitStack) -> list[tuple[object, ServerCheck]]:
    """(store, its server) for the stores on a server: ``/healthz`` asks PostgreSQL
    ``select 1`` and Redis ``PING`` for them (the probe's connection closes with ``stack``).

    Without ``graph``, PostgreSQL is only asked whether it answers, not whether the store's
    last write failed: the gateway's pause waits on that (a write goes through only once it
    resumes, so waiting for one would wait for ever)."""
    checks: list[tuple[object, ServerCheck]] = []
    if config.idmap.backend == "postgres":
        from gensokyo_idmap.store.postgres.ping import PgPing  # psycopg: an optional extra

        ping = (PgPing(config.idmap.postgres_dsn) if graph is None
                else PgPing(config.idmap.postgres_dsn, known=graph.store.health))
        stack.push_async_callback(ping.aclose)
        checks.append((None if graph is None else graph.store, ping))
    if config.idmap.runtime_backend == "redis":
        from gensokyo_idmap.runtime.redis.connection import RedisRuntime  # redis-py: an extra

        runtime = msgids.store  # RedisMsgIdMap.store
        assert isinstance(runtime, RedisRuntime)
        checks.append((runtime, runtime))
    return checks


def _backend_probe(config: Config, msgids: MessageIds,
                   stack: AsyncExitStack) -> BackendProbe | None:
    """What the gateway asks while its reading is paused (``qq/gateway`` rule 6): whether
    PostgreSQL and Redis answer; None for a daemon on LMDB alone (nothing to ask)."""
    servers = [check for _, check in _server_checks(config, None, msgids, stack)]
    if not servers:
        return None

    async def probe() -> list[str]:
        return await server_problems(servers)

    return probe


def _log_stores_open(config: Config, graph: IdentityGraph, msgids: MessageIds) -> None:
    try:
        with graph.store.read() as view:
            counts = view.counts()
    except UnreachableError:  # a graph whose server is down (said once, by the store)
        log.info("[idmap] store open", path=identity_store_location(config),
                 identities="unknown until its server answers",
                 app_id=config.first_bot.app_id or None)
    else:
        log.info("[idmap] store open", path=identity_store_location(config),
                 identities=counts.identities, vuins=counts.vuins,
                 app_id=config.first_bot.app_id or None)
    if config.idmap.runtime_backend == "redis":  # not counted: a SCAN of a shared server
        log.info("[idmap] msgid store open", redis=redact_url(config.idmap.redis_url),
                 prefix=config.idmap.redis_prefix, ttl_seconds=config.idmap.msgid_ttl_seconds)
        return
    log.info(
        "[idmap] msgid store open",
        path=str(config.msgid_db_path),
        entries=msgids.counts().live_or_unswept,
        ttl_seconds=config.idmap.msgid_ttl_seconds,
    )


def _handle_signals(stop: asyncio.Event, stack: AsyncExitStack) -> None:
    """SIGINT and SIGTERM set ``stop``; the handlers go first when ``stack`` closes."""
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, stop.set)

    def remove() -> None:
        for sig in signals:
            loop.remove_signal_handler(sig)

    stack.callback(remove)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _drain_and_close(client: ReverseWsClient) -> None:
    await client.drain(timeout=2.0)  # what was acknowledged but not yet sent
    await client.close()


async def _stop_periodic(task: asyncio.Task[None], stop: asyncio.Event) -> None:
    stop.set()
    await task


#: Set (to any non-empty value) only by bench/inbound.py, to measure what confirmation by
#: ping costs: WebSocket events then count as delivered once written (the old rule).
#: Not a configuration key: it weakens the delivery guarantee.
BENCH_CONFIRM_ON_WRITE: Final = "GENSOKYO_IDMAP_BENCH_CONFIRM_ON_WRITE"


def _bench_confirm_on_write() -> bool:
    on = bool(os.environ.get(BENCH_CONFIRM_ON_WRITE))
    if on:
        log.warning("[onebot] benchmark switch: events count as delivered once written",
                    variable=BENCH_CONFIRM_ON_WRITE)
    return on


def _connection_plan(config: Config) -> ConnectionPlan:
    """The deadlines and connection caps of the listeners configured (``http``;
    :mod:`~gensokyo_idmap.http_guard`), the webhook's cap first."""
    fields = {"webhook.listen": config.webhook.listen, "api.listen": config.api.listen,
              "onebot.forward_ws": config.onebot.forward_ws,
              "onebot.http_api": config.onebot.http_api}
    return ConnectionPlan.for_listeners(
        Deadlines(config.http.header_timeout_seconds, config.http.body_timeout_seconds),
        [field for field, listen in fields.items() if listen],
        most=config.http.max_connections, first="webhook.listen")


async def _listen(routes: list[web.RouteDef] | web.Application, listen: str,
                  field: str, plan: ConnectionPlan) -> web.AppRunner:
    """An aiohttp server for ``routes`` (or an application) on ``host:port``, its
    connections held to ``plan``; a bad address names its key.

    Its clean-up waits at most ``SHUTDOWN_SECONDS`` for requests in flight (aiohttp's own
    default is a minute): a connection that arrives while the server stops (a framework
    reconnecting at once), or a handler stuck on its peer, must not hold the stop. A request
    cut short there was not answered, so the platform delivers it again; nothing is lost.
    """
    if isinstance(routes, web.Application):
        app = routes
    else:
        app = web.Application()
        app.add_routes(routes)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_SECONDS)
    await runner.setup()
    address = parse_host_port(listen, field)
    try:
        await plan.site(runner, address.host, address.port, field).start()
    except OSError as exc:
        await runner.cleanup()
        raise BadInputError(field, listen, f"cannot listen there: {exc.strerror}") from None
    return runner


async def _run_gateway(
    config: Config, bot: BotSettings, http: aiohttp.ClientSession, tokens: AccessTokenManager,
    pipeline: Callable[[Sequence[QQEvent]], Awaitable[None]],
    backends: BackendProbe | None, watch: BotWatch | None,
    opening: asyncio.Task[None] | None = None,
) -> None:
    """Discover the gateway URL, then keep the session of ``bot``'s shard (resuming the
    saved one: in the data dir, or in PostgreSQL with the graph, once ``opening`` opened a
    graph whose server was down at start); while a batch cannot be processed, reading
    pauses until ``backends`` answer. ``watch``: the console's view of the bot."""
    url = await discover_gateway_retrying(http, bot.qq.api_base, tokens)
    with ExitStack() as closing_state:
        state: SessionStore
        if config.idmap.backend == "postgres":
            from gensokyo_idmap.store.postgres.gateway_session import PgGatewaySession

            if opening is not None:
                await asyncio.shield(opening)  # its failure stops the daemon

            state = closing_state.enter_context(closing(PgGatewaySession(
                config.idmap.postgres_dsn, bot.app_id, bot.qq.shard)))
            await _retrying("[qq] gateway session not readable", state.load, bot.app_id)
        else:
            state = GatewayState(config.files.root / bot.session_file, bot.qq.shard)
        client = GatewayClient(url, bot.app_id, tokens, pipeline, state,
                               intents=bot.qq.intents, shard=bot.qq.shard,
                               backends=backends)
        if watch is not None:
            watch.gateway = client
        log.info("[qq] gateway", url=url, app_id=bot.app_id, intents=bot.qq.intents,
                 shard=list(bot.qq.shard), resuming=client.session_id is not None)
        await client.run(http)


async def _retrying(failure: str, call: Callable[[], object], app_id: str) -> None:
    """``call()`` on a thread until it raises no StoreError (each failure logged, naming
    the bot's ``app_id``), waiting 1 s, then twice as long each time up to a minute (the
    gateway's discovery delays)."""
    delay = DISCOVERY_FIRST_DELAY
    while True:
        try:
            await asyncio.to_thread(call)
            return
        except StoreError as err:
            log.warning(failure, app_id=app_id, reason=err.message, retry_in=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, DISCOVERY_MAX_DELAY)


async def _start_webhook(config: Config, router: WebhookRouter,
                         plan: ConnectionPlan) -> web.AppRunner:
    """The callback server of every bot: verified events go through each bot's bridge to
    its frameworks."""
    runner = await _listen(router.routes(config.webhook.path), config.webhook.listen,
                           "webhook.listen", plan)
    log.info("[qq] webhook listening", url=f"http://{config.webhook.listen}{config.webhook.path}",
             app_ids=list(router.receivers))
    return runner


def _restore_owed(sink: TrackedSink, deliveries: DeliveryLog) -> None:
    """Events owed to ``sink`` from before a restart go out first, and the platform's
    replay of them counts as a repeat."""
    assert sink.backlog is not None
    for key in sink.backlog.restore():
        deliveries.remember(key)


def _watched(batches: Callable[[QQEvent], Awaitable[None]], watch: BotWatch
             ) -> Callable[[QQEvent], Awaitable[None]]:
    """The webhook's entry: its events batched per turn of the loop (the callbacks of a
    flood share the pipeline's price, :mod:`~gensokyo_idmap.bridge.turn_batches`); the
    console's overview shows the last one."""

    def process(event: QQEvent) -> Awaitable[None]:
        watch.saw_webhook(event)
        return batches(event)

    return process


async def _start_api(config: Config, bots: Sequence[BotSettings], graph: IdentityGraph,
                     msgids: MessageIds, outbox_store: LmdbOutboxStore,
                     servers: Sequence[tuple[object, ServerCheck]],
                     watch: LinkWatch, plan: ConnectionPlan,
                     tables: Tables) -> web.AppRunner | None:
    """The identity HTTP API, /getid, /healthz, /metrics and the console on ``api.listen``.

    A taken address is fatal when ``api.listen`` was set; the default one being taken (a
    second daemon on the machine) only leaves the API off, loudly.
    """
    token = config.api.token.get_secret_value()  # without one, loopback: checked at start
    server = ApiServer(graph, msgids, ApiSettings(
        app_id=config.first_bot.app_id, identity_path=config.identity_db_path,
        # a file's location stays a Path, so /v1/stats reads its size as `stats` does
        identity_location=identity_store_location(config)
        if config.idmap.backend == "postgres" else "",
        msgid_path=config.msgid_db_path, token=token,
        getid_allow=tuple(config.api.getid_allow),
        trusted_proxies=tuple(config.api.trusted_proxies),
        allowed_hosts=tuple(config.api.allowed_hosts),
        app_ids=tuple(bot.app_id for bot in bots if bot.app_id),
        self_ids=tuple(bot.self_id for bot in bots if bot.app_id)),
        outbox=(config.outbox_db_path, outbox_store), servers=servers, link=watch,
        controls=watch, tables=tables)
    try:
        runner = await _listen(server.application(), config.api.listen, "api.listen", plan)
    except BadInputError as err:
        if "listen" in config.api.model_fields_set:
            raise
        log.warning("[api] not started: the default address is taken (set api.listen)",
                    listen=config.api.listen, reason=err.reason)
        return None
    log.info("[api] listening", url=f"http://{config.api.listen}/",
             console=f"http://{config.api.listen}/ui/",
             token_required=bool(token), getid_allow=config.api.getid_allow or "loopback")
    return runner
