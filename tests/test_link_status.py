"""What the console's overview shows of the framework connections, read from real ones: a
reverse-WS client not connected yet, with events durably owed in a real outbox.db; a
forward-WS server with and without a framework connected."""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path

import aiohttp
from aiohttp import web

from gensokyo_idmap.bots import resolve_bots
from gensokyo_idmap.bridge.outbox import Backlog, Outbox
from gensokyo_idmap.config import Config
from gensokyo_idmap.link_status import LinkWatch
from gensokyo_idmap.onebot.forward_ws import ForwardWsRouter, ForwardWsServer
from gensokyo_idmap.onebot.reverse_ws import ReverseWsClient
from gensokyo_idmap.readiness import PlatformReadiness
from gensokyo_idmap.store.lmdb.outbox import LmdbOutboxStore
from gensokyo_idmap.testing import until

from .conftest import run


def test_frameworks_with_what_they_are_owed(tmp_path: Path) -> None:
    async def main() -> None:
        with LmdbOutboxStore(tmp_path / "outbox.db") as store:
            outbox = Outbox(store)
            watch = LinkWatch(outbox)
            client = ReverseWsClient("ws://user:pw@127.0.0.1:9/ws", 10001,
                                     backlog=partial(Backlog, outbox))
            await outbox.keep([(client.outbox_name, outbox.allocate(), {"n": 1}, None)])
            server = ForwardWsServer(10001)
            forward = ForwardWsRouter([server])
            watch.clients, watch.forward = [client], forward
            view = watch()
            assert view.gateway is None and view.last_webhook is None
            assert view.platform is None and view.bots == ()  # told of no bot
            watch.add(resolve_bots(Config()))  # `bot`, with neither AppID nor secret
            assert watch().platform == PlatformReadiness(app_id=False, secret=False)
            reverse, nobody = view.frameworks
            assert (reverse.transport, reverse.connected, reverse.durable) == (
                "reverse_ws", False, 1)
            assert "pw" not in reverse.name and "127.0.0.1:9" in reverse.name
            assert (nobody.transport, nobody.connected) == ("forward_ws", False)

            app = web.Application()
            app.add_routes(forward.routes())
            runner = web.AppRunner(app)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = runner.addresses[0][1]
            try:
                async with aiohttp.ClientSession() as session, \
                        session.ws_connect(f"ws://127.0.0.1:{port}/", autoping=False) as ws:
                    await ws.receive()  # the lifecycle event
                    await until(lambda: forward.connections, what="the connection")
                    server.publish({"post_type": "message"})  # never confirmed: no pong
                    (connected,) = [f for f in watch().frameworks
                                    if f.transport == "forward_ws"]
                    assert connected.connected and connected.owed >= 1
            finally:
                await forward.close()
                await runner.cleanup()
                await client.close()

    run(asyncio.wait_for(main(), 20))


def test_each_bot_has_its_link_its_frameworks_and_its_readiness(tmp_path: Path) -> None:
    """Issue 34.5: per bot, in the config's order: its token, gateway and last webhook
    event, its frameworks (each named with its AppID, a forward-WS row of its own) and its
    readiness, whose reasons name it and its keys."""
    config = Config.model_validate({
        "bots": [{"app_id": "102000001", "secret": "s1"},
                 {"app_id": "102000002", "self_id": 20002}],
        "onebot": {"reverse_ws": ["ws://127.0.0.1:9/ws"]}})
    bots = resolve_bots(config)

    async def main() -> None:
        with LmdbOutboxStore(tmp_path / "outbox.db") as store:
            outbox = Outbox(store)
            watch = LinkWatch(outbox)
            first, second = watch.add(bots)
            clients = [ReverseWsClient("ws://127.0.0.1:9/ws", bot.self_id,
                                       backlog=partial(Backlog, outbox),
                                       outbox_name=bot.outbox_name("reverse_ws",
                                                                   "ws://127.0.0.1:9/ws"))
                       for bot in bots]
            await outbox.keep([(clients[1].outbox_name, outbox.allocate(), {"n": 1}, None)])
            watch.clients = clients
            watch.forward = ForwardWsRouter([ForwardWsServer(bot.self_id) for bot in bots])
            view = watch()
            assert [(bot.app_id, bot.self_id) for bot in view.bots] == [
                ("102000001", 102000001), ("102000002", 20002)]
            assert [(f.transport, f.bot, f.durable) for f in view.frameworks] == [
                ("reverse_ws", "102000001", 0), ("reverse_ws", "102000002", 1),
                ("forward_ws", "102000001", 0), ("forward_ws", "102000002", 0)]
            assert view.platform == view.bots[0].platform
            assert view.bots[1].platform is not None
            assert view.bots[1].platform.key == "bots.1"
            assert view.bots[1].platform.name == "bots.1 (AppID 102000002)"
            assert view.platforms == [bot.platform for bot in view.bots]
            for client in clients:
                await client.close()

    run(asyncio.wait_for(main(), 20))
