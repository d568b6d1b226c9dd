"""Forward WebSocket server: token on upgrade, per-connection queues, actions, close."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import ClientSession, WSMsgType, WSServerHandshakeError, web
from aiohttp.test_utils import TestServer
from structlog.testing import capture_logs
from yarl import URL

from gensokyo_idmap.admission import Admission
from gensokyo_idmap.bridge.inbound import BridgeSettings, InboundBridge, InboundPipeline
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.runtime.msgid import MsgIdMap
from gensokyo_idmap.onebot.forward_ws import ForwardWsServer
from gensokyo_idmap.qq.events import parse_dispatch, parse_envelope
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore

from gensokyo_idmap.testing.loopback import raw_request
from gensokyo_idmap.testing.wait import until

TIMEOUT = 10
APP = "102000001"


def serve(server: ForwardWsServer,
          scenario: Callable[[ClientSession, str], Awaitable[None]],
          timeout: float = TIMEOUT) -> None:
    async def main() -> None:
        app = web.Application()
        app.add_routes(server.routes())
        http = TestServer(app, host="127.0.0.1")
        await http.start_server()
        try:
            async with ClientSession() as session:
                await asyncio.wait_for(scenario(session, str(http.make_url("/"))), timeout)
        finally:
            await server.close()
            await http.close()

    asyncio.run(main())


async def next_json(ws: Any) -> dict[str, Any]:
    while True:
        message = await asyncio.wait_for(ws.receive(), TIMEOUT)
        frame: dict[str, Any] = json.loads(message.data)
        if frame.get("meta_event_type") != "heartbeat":
            return frame


@pytest.mark.parametrize("how", ["bearer", "token", "query"])
def test_right_token_connects_and_every_connection_gets_the_events(how: str) -> None:
    server = ForwardWsServer(10001, access_token="s3cret", heartbeat_interval=60,
                             clock=lambda: 1700000000)

    async def scenario(session: ClientSession, url: str) -> None:
        headers = {"bearer": {"Authorization": "Bearer s3cret"},
                   "token": {"Authorization": "Token s3cret"}, "query": {}}[how]
        target = url + ("?access_token=s3cret" if how == "query" else "")
        async with session.ws_connect(target, headers=headers) as a, \
                session.ws_connect(url, headers={"Authorization": "Bearer s3cret"}) as b:
            for ws in (a, b):
                assert (await next_json(ws))["sub_type"] == "connect"
            while server.connections < 2:
                await asyncio.sleep(0.01)
            server.publish({"post_type": "message", "n": 1})
            for ws in (a, b):
                assert await next_json(ws) == {"post_type": "message", "n": 1}

    serve(server, scenario)


@pytest.mark.parametrize("path", ["/", "/api", "/event/"])
@pytest.mark.parametrize(("headers", "query", "status"), [
    ({}, "", 401), ({"Authorization": "Basic s3cret"}, "", 401),
    ({"Authorization": "Bearer wrong"}, "", 403), ({}, "?access_token=wrong", 403),
    ({"Authorization": "Token s3cret"}, "", 101), ({}, "?access_token=s3cret", 101)])
def test_missing_token_401_wrong_403_on_every_path(path: str, headers: dict[str, str],
                                                    query: str, status: int) -> None:
    server = ForwardWsServer(1, access_token="s3cret", heartbeat_interval=60)

    async def scenario(session: ClientSession, url: str) -> None:
        target = url.rstrip("/") + path + query
        if status == 101:
            async with session.ws_connect(target, headers=headers):
                pass
            return
        with pytest.raises(WSServerHandshakeError) as err:
            async with session.ws_connect(target, headers=headers):
                pass
        assert err.value.status == status
        assert server.refused == 1 and server.connections == 0

    serve(server, scenario)


def test_api_path_answers_actions_and_sends_no_event() -> None:
    async def on_action(frame: dict[str, Any]) -> dict[str, Any]:
        return {"status": "ok", "retcode": 0, "data": frame["action"], "echo": frame["echo"]}

    server = ForwardWsServer(1, heartbeat_interval=0.05, on_action=on_action)

    async def scenario(session: ClientSession, url: str) -> None:
        async with session.ws_connect(url + "api") as api, \
                session.ws_connect(url + "api/") as api_slash:
            for n, ws in enumerate((api, api_slash)):
                await ws.send_json({"action": "get_status", "echo": n})
                # the first frame is the answer: no lifecycle event, no heartbeat before it
                message = await asyncio.wait_for(ws.receive(), TIMEOUT)
                assert json.loads(message.data) == {"status": "ok", "retcode": 0,
                                                    "data": "get_status", "echo": n}
            assert server.connections == 0  # events are not handed to /api connections
            assert server.publish({"post_type": "message"}) is None
            await asyncio.sleep(0.2)  # several heartbeat intervals: still nothing comes
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(api.receive(), 0.1)
            closing = asyncio.create_task(server.close())
            message = await asyncio.wait_for(api.receive(), TIMEOUT)
            assert message.type.name in ("CLOSE", "CLOSED")
            await asyncio.wait_for(closing, TIMEOUT)

    serve(server, scenario)


def test_event_path_gets_events_and_ignores_actions() -> None:
    called: list[Any] = []

    async def on_action(frame: dict[str, Any]) -> dict[str, Any]:
        called.append(frame)
        return {"status": "ok", "retcode": 0, "data": None, "echo": frame.get("echo")}

    server = ForwardWsServer(1, heartbeat_interval=60, on_action=on_action,
                             clock=lambda: 1700000000)

    async def scenario(session: ClientSession, url: str) -> None:
        async with session.ws_connect(url + "event", autoping=False) as ws:
            assert (await next_json(ws))["sub_type"] == "connect"
            probe = await asyncio.wait_for(ws.receive(), TIMEOUT)  # the ping after it
            assert probe.type == WSMsgType.PING
            await until(lambda: server.connections == 1)
            await ws.send_json({"action": "send_msg", "params": {}, "echo": 1})
            await ws.send_str("not json")
            await ws.ping(b"after")  # read in order: once it is answered, so were those
            message = await asyncio.wait_for(ws.receive(), TIMEOUT)
            assert (message.type, message.data) == (WSMsgType.PONG, b"after")
            server.publish({"post_type": "message", "n": 1})
            # the next frame is the event: the action got no answer, not even an error
            message = await asyncio.wait_for(ws.receive(), TIMEOUT)
            assert json.loads(message.data) == {"post_type": "message", "n": 1}
        assert called == []

    serve(server, scenario)


def test_actions_answered_and_close_sends_a_close_frame() -> None:
    async def on_action(frame: dict[str, Any]) -> dict[str, Any]:
        return {"status": "ok", "retcode": 0, "data": frame["action"], "echo": frame["echo"]}

    server = ForwardWsServer(1, heartbeat_interval=60, on_action=on_action)

    async def scenario(session: ClientSession, url: str) -> None:
        async with session.ws_connect(url) as ws:
            await next_json(ws)
            await ws.send_json({"action": "get_status", "params": {}, "echo": 5})
            assert await next_json(ws) == {"status": "ok", "retcode": 0, "data": "get_status",
                                           "echo": 5}
            closing = asyncio.create_task(server.close())
            message = await asyncio.wait_for(ws.receive(), TIMEOUT)
            assert message.type.name in ("CLOSE", "CLOSED")
            await asyncio.wait_for(closing, TIMEOUT)
        for _ in range(100):
            if server.connections == 0:
                break
            await asyncio.sleep(0.01)
        assert server.connections == 0

    serve(server, scenario)


@pytest.mark.parametrize("token", [b"Authorization: Bearer s3cret\xff\r\n",
                                   b"Authorization: Token \xc3\x28\r\n"])
def test_a_token_that_is_not_utf8_is_refused_403_not_a_500(token: bytes) -> None:
    server = ForwardWsServer(10001, access_token="s3cret", heartbeat_interval=60)

    async def scenario(session: ClientSession, url: str) -> None:
        port = URL(url).port
        assert port is not None
        status, body = await raw_request(port, (
            b"GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            + token))
        assert status == 403
        assert json.loads(body) == {"status": "failed", "retcode": 1403, "data": None,
                                    "message": "access token wrong",
                                    "wording": "access token wrong", "echo": None}
        assert server.connections == 0 and server.refused == 1

    serve(server, scenario)


# --- a client that falls behind slows nobody (issue 14 item 4) ------------------------------


def test_a_client_whose_queue_overflows_is_closed_with_1013_and_its_events_fail() -> None:
    """The client reads frames but answers no ping after the first, so nothing it got is
    confirmed: once its queue (20) is full it is closed with 1013, logged with its address,
    and the futures of what it had turn False (nobody waits for it any more)."""
    server = ForwardWsServer(1, heartbeat_interval=60, queue_size=20, window=10)

    async def scenario(session: ClientSession, url: str) -> None:
        async with session.ws_connect(url, autoping=False) as ws:
            host, port = ws.get_extra_info("sockname")[:2]
            await next_json(ws)  # connect
            probe = await asyncio.wait_for(ws.receive(), TIMEOUT)
            await ws.pong(probe.data)  # it reads: its confirmations are waited for
            await until(lambda: server.connections == 1
                        and all(queue.answered for queue in server._queues))
            with capture_logs() as logs:
                futures = [server.publish({"n": n}) for n in range(25)]
                message = await asyncio.wait_for(ws.receive(), TIMEOUT)
                while message.type == WSMsgType.TEXT or message.type == WSMsgType.PING:
                    message = await asyncio.wait_for(ws.receive(), TIMEOUT)
            assert message.type == WSMsgType.CLOSE and message.data == 1013
            assert futures[20:] == [None] * 5  # no connection left to wait for
            early = [f for f in futures[:20] if f is not None]
            assert early and [f.result() for f in early] == [False] * len(early)
            assert server.fell_behind == 1 and server.connections == 0
            [line] = [e for e in logs if e["event"].startswith("[onebot] forward ws client fell")]
            assert line["peer"] == f"{host}:{port}" and line["code"] == 1013

    serve(server, scenario)


def test_a_client_that_never_reads_does_not_hold_up_intake_or_the_other_client(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore) -> None:
    """Two forward-WS clients, one that never reads. 150 group messages go through the real
    pipeline one after the other (each "acknowledged" only once the pipeline returns, as the
    webhook does): all 150 come back, the reading client gets every one in order, and the
    stuck client is closed for want of pongs. Before, every event waited the full
    ``delivery_wait`` (2 s) for the stuck client: 300 s for 150 events."""
    server = ForwardWsServer(1, heartbeat_interval=60, ping_timeout=3)
    bridge = InboundBridge(IdentityGraph(identity_store), MsgIdMap(msgid_store),
                           BridgeSettings(app_id=APP, self_id=1))
    pipeline = InboundPipeline(bridge, [server])
    count = 150

    async def scenario(session: ClientSession, url: str) -> None:
        stuck = await session.ws_connect(url)  # never reads: no pong ever comes back
        host, port = stuck.get_extra_info("sockname")[:2]
        reader = await session.ws_connect(url)
        got: list[int] = []

        async def read() -> None:
            async for message in reader:
                if message.type == WSMsgType.TEXT:
                    frame = json.loads(message.data)
                    if frame.get("post_type") == "message":
                        got.append(int(frame["raw_message"].rsplit(" ", 1)[-1]))

        reading = asyncio.create_task(read())
        try:
            while server.connections < 2:
                await asyncio.sleep(0.01)
            with capture_logs() as logs:
                acked = 0
                for n in range(count):
                    await pipeline(group_message(n))
                    acked += 1
                await until(lambda: len(got) == count and server.connections == 1, 10,
                            lambda: f"{len(got)} of {count} events, "
                                    f"{server.connections} connections (1 expected)")
            assert acked == count
            assert got == list(range(count))
            assert server.connections == 1  # the stuck one was closed
            dropped = [e for e in logs if e["event"] == "[onebot] no pong in time: "
                       "connection dropped" or e["event"].startswith("[onebot] forward ws "
                                                                    "client fell behind")]
            assert dropped and f"{host}:{port}" in str(dropped[0]), dropped
        finally:
            reading.cancel()
            await asyncio.gather(reading, return_exceptions=True)
            await stuck.close()
            await reader.close()

    async def bounded(session: ClientSession, url: str) -> None:
        await asyncio.wait_for(scenario(session, url), 60)

    serve(server, bounded, timeout=90)


def test_a_client_that_never_answered_a_ping_is_not_waited_for() -> None:
    """The ping after the lifecycle event goes unanswered: the client reads nothing (as far
    as anyone can tell), so publishing to it offers nothing to wait on, and once
    ``ping_timeout`` has passed it is closed with 1013."""
    server = ForwardWsServer(1, heartbeat_interval=60, ping_timeout=1.0)

    async def scenario(session: ClientSession, url: str) -> None:
        async with session.ws_connect(url, autoping=False) as ws:
            await next_json(ws)  # connect
            probe = await asyncio.wait_for(ws.receive(), TIMEOUT)
            assert probe.type == WSMsgType.PING  # never answered
            await until(lambda: server.connections == 1)
            assert server.publish({"post_type": "message", "n": 1}) is None
            message = await asyncio.wait_for(ws.receive(), TIMEOUT)
            while message.type in (WSMsgType.TEXT, WSMsgType.PING):
                message = await asyncio.wait_for(ws.receive(), TIMEOUT)
            assert (message.type, message.data) == (WSMsgType.CLOSE, 1013)
            assert server.connections == 0

    serve(server, scenario)


def test_waits_for_a_client_that_stops_answering_end_at_the_lag_grace(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore) -> None:
    """A client answers the first ping, then no more. The pipeline, told to wait up to 60 s
    for confirmations, returns once the client lags (LAG_GRACE), not after those 60 s: its
    events' futures turn False then, though it is still connected and gets the events."""
    server = ForwardWsServer(1, heartbeat_interval=60, ping_timeout=30)
    bridge = InboundBridge(IdentityGraph(identity_store), MsgIdMap(msgid_store),
                           BridgeSettings(app_id=APP, self_id=1))
    pipeline = InboundPipeline(bridge, [server])
    pipeline.delivery_wait = 60

    async def scenario(session: ClientSession, url: str) -> None:
        async with session.ws_connect(url, autoping=False) as ws:
            await next_json(ws)  # connect
            probe = await asyncio.wait_for(ws.receive(), TIMEOUT)
            await ws.pong(probe.data)
            await until(lambda: server.connections == 1
                        and all(queue.answered for queue in server._queues))
            await asyncio.wait_for(pipeline(group_message(1)), TIMEOUT)
            assert server.connections == 1  # not closed: lagging is not ping_timeout
            frame = await next_json(ws)
            assert frame["post_type"] == "message"

    serve(server, scenario, timeout=2 * TIMEOUT)


def test_a_stop_does_not_wait_for_a_client_that_does_not_take_its_close_frame() -> None:
    """A client that handshakes and then neither reads nor answers: once its queue is full
    it is closed with 1013 and given ping_timeout (30 s) to take the close frame; the
    server's close (the daemon's stop) drops it at once instead of waiting that long."""
    server = ForwardWsServer(1, heartbeat_interval=60, ping_timeout=30, queue_size=20)

    async def scenario(session: ClientSession, url: str) -> None:
        port = URL(url).port
        assert port is not None
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                         b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                         b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
            assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 101 ")
            await until(lambda: server.connections == 1)
            for n in range(21):
                server.publish({"post_type": "message", "n": n})
            assert server.fell_behind == 1 and server.connections == 0
            await asyncio.sleep(0.1)
            assert server._sessions  # waiting for the client to take the close frame
            await asyncio.wait_for(server.close(), TIMEOUT)
            assert not server._sessions
        finally:
            writer.close()

    serve(server, scenario)


def group_message(n: int) -> Any:
    raw = {"op": 0, "s": n + 1, "t": "GROUP_AT_MESSAGE_CREATE",
           "id": f"GROUP_AT_MESSAGE_CREATE:{n}",
           "d": {"id": f"ROBOT1.0_fw{n}", "content": f"m {n}",
                 "timestamp": "2025-01-01T12:00:00+08:00", "group_openid": "A" * 32,
                 "author": {"id": "B" * 32, "member_openid": "B" * 32}}}
    return parse_dispatch(parse_envelope(json.dumps(raw).encode()), APP)


@pytest.mark.parametrize(("headers", "status"), [
    ({"Host": "evil.example"}, 421), ({"Host": "localhost.evil.example:6700"}, 421),
    ({"Origin": "http://evil.example"}, 403), ({"Origin": "null"}, 403),
    ({"Origin": "http://localhost:3000"}, 403), ({"Sec-Fetch-Site": "cross-site"}, 403),
    ({"Host": "evil.example", "Origin": "http://evil.example"}, 421)])
def test_a_browser_pages_handshake_is_refused_whatever_its_token(
        headers: dict[str, str], status: int) -> None:
    """A page of another site (Origin) or at a rebound name (Host) may open a WebSocket to
    any address and read the events: no socket opens, with or without the token."""
    server = ForwardWsServer(1, access_token="s3cret", heartbeat_interval=60)

    async def scenario(session: ClientSession, url: str) -> None:
        with capture_logs() as logs:
            with pytest.raises(WSServerHandshakeError) as err:
                async with session.ws_connect(url, headers={
                        **headers, "Authorization": "Bearer s3cret"}):
                    pass
        assert err.value.status == status
        assert server.refused == 1 and server.connections == 0
        refused = [e for e in logs if e["event"] == "[onebot] request refused"]
        assert len(refused) == 1 and refused[0]["server"] == "forward_ws", logs
        assert "s3cret" not in str(logs)

    serve(server, scenario)


def test_frameworks_without_origin_and_the_listeners_own_origin_connect() -> None:
    """Frameworks send no Origin; a page served by the listener's own address would send
    that address; a listed name is taken as Host."""
    server = ForwardWsServer(1, heartbeat_interval=60,
                             admission=Admission(["gensokyo"]))

    async def scenario(session: ClientSession, url: str) -> None:
        own = url.rstrip("/")
        for headers in ({}, {"Origin": own}, {"Host": "gensokyo:6700"},
                        {"Host": "localhost"}, {"Origin": "https://gensokyo"}):
            async with session.ws_connect(url, headers=headers) as ws:
                assert (await next_json(ws))["sub_type"] == "connect", headers
        assert server.refused == 0

    serve(server, scenario)
