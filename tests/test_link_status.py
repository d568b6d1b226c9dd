"""What the console's overview shows of the framework connections, read from real ones: a
reverse-WS client not connected yet, with events durably owed in a real outbox.db; a
forward-WS server with and without a framework connected."""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path

import aiohttp
from aiohttp import web

from gensokyo_idmap.bridge.outbox import Backlog, Outbox
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
            assert view.platform == PlatformReadiness(app_id=False, secret=False)
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
