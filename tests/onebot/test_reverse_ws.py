"""Reverse WebSocket client against a real framework-side WS server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiohttp import WSMsgType, web
from aiohttp.test_utils import TestServer
from structlog.testing import capture_logs

from gensokyo_idmap.onebot.reverse_ws import ReverseWsClient
from gensokyo_idmap.onebot.status import BotStatus

from gensokyo_idmap.testing import framework_server, until

TIMEOUT = 10


class Framework:
    """A minimal OneBot framework endpoint: records handshakes and frames, can drop peers."""

    def __init__(self) -> None:
        self.handshakes: list[dict[str, str]] = []
        self.frames: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.sockets: list[web.WebSocketResponse] = []

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.handshakes.append(dict(request.headers))
        self.sockets.append(ws)
        async for message in ws:
            if message.type == WSMsgType.TEXT:
                await self.frames.put(json.loads(message.data))
        return ws

    async def next_frame(self, skip_heartbeats: bool = True) -> dict[str, Any]:
        while True:
            frame = await asyncio.wait_for(self.frames.get(), TIMEOUT)
            if not (skip_heartbeats and frame.get("meta_event_type") == "heartbeat"):
                return frame


async def start(framework: Framework) -> TestServer:
    app = web.Application()
    app.router.add_get("/onebot/v11/ws", framework.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server


async def dialling(framework: Framework, self_id: int = 1,
                   **options: Any) -> tuple[TestServer, ReverseWsClient]:
    """The framework's server, and a started client dialling it."""
    server = await start(framework)
    client = ReverseWsClient(str(server.make_url("/onebot/v11/ws")), self_id, **options)
    client.start()
    return server, client


def test_handshake_lifecycle_events_and_heartbeats() -> None:
    async def main() -> None:
        framework = Framework()
        server = await start(framework)
        now = [BotStatus(online=True, good=True)]  # what the daemon would say of the bot
        client = ReverseWsClient(str(server.make_url("/onebot/v11/ws")), 10001,
                                 access_token="tok-xyz", heartbeat_interval=0.05,
                                 clock=lambda: 1700000000, status=lambda: now[0])
        client.publish({"post_type": "message", "n": 1})  # before connecting: waits
        client.start()
        try:
            first = await framework.next_frame()
            assert first == {"time": 1700000000, "self_id": 10001, "post_type": "meta_event",
                             "meta_event_type": "lifecycle", "sub_type": "connect"}
            assert await framework.next_frame() == {"post_type": "message", "n": 1}
            client.publish({"post_type": "message", "n": 2})
            assert await framework.next_frame() == {"post_type": "message", "n": 2}
            beat = await framework.next_frame(skip_heartbeats=False)
            while beat.get("meta_event_type") != "heartbeat":
                beat = await framework.next_frame(skip_heartbeats=False)
            assert beat["status"] == {"online": True, "good": True} and beat["interval"] == 50
            now[0] = BotStatus(online=False, good=False)  # its platform link went down
            while beat.get("status", {}).get("online") is not False:  # asked at each beat
                beat = await framework.next_frame(skip_heartbeats=False)
            assert beat["status"] == {"online": False, "good": False}
            headers = framework.handshakes[0]
            assert headers["X-Self-ID"] == "10001"
            assert headers["X-Client-Role"] == "Universal"
            assert headers["Authorization"] == "Bearer tok-xyz"
        finally:
            await client.close()
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_reconnects_and_delivers_what_was_queued_meanwhile() -> None:
    async def main() -> None:
        framework = Framework()
        server, client = await dialling(framework, 10001, reconnect_interval=0.05,
                                        heartbeat_interval=60)
        try:
            assert (await framework.next_frame())["sub_type"] == "connect"
            await framework.sockets[0].close()  # the framework restarts
            for _ in range(200):
                if not client.connected.is_set():
                    break
                await asyncio.sleep(0.01)
            client.publish({"post_type": "message", "n": 3})
            assert (await framework.next_frame())["sub_type"] == "connect"
            assert await framework.next_frame() == {"post_type": "message", "n": 3}
            assert client.connects == 2 and len(framework.handshakes) == 2
        finally:
            await client.close()
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_full_queue_drops_the_oldest_and_counts() -> None:
    async def main() -> None:
        client = ReverseWsClient("ws://127.0.0.1:9/unused", 1, queue_size=2)
        for n in range(5):
            client.publish({"n": n})
        assert client.dropped == 3
        assert client.queue.pending() == [{"n": 3}, {"n": 4}]

    asyncio.run(main())


def test_actions_are_answered() -> None:
    async def main() -> None:
        framework = Framework()
        server = await start(framework)

        async def on_action(frame: dict[str, Any]) -> dict[str, Any]:
            return {"status": "ok", "retcode": 0, "data": {"echoed": frame["params"]},
                    "echo": frame.get("echo")}

        handled = ReverseWsClient(str(server.make_url("/onebot/v11/ws")), 1,
                                  heartbeat_interval=60, on_action=on_action)
        handled.start()
        try:
            await framework.next_frame()  # connect
            await framework.sockets[0].send_json({"action": "x", "params": {"a": 1}, "echo": "e1"})
            assert await framework.next_frame() == {"status": "ok", "retcode": 0,
                                                    "data": {"echoed": {"a": 1}}, "echo": "e1"}
            await framework.sockets[0].send_str("{bad")
            assert (await framework.next_frame())["retcode"] == 1400
        finally:
            await handled.close()
        plain = ReverseWsClient(str(server.make_url("/onebot/v11/ws")), 1, heartbeat_interval=60)
        plain.start()
        try:
            await framework.next_frame()  # connect
            await framework.sockets[1].send_json({"action": "get_status", "echo": 7})
            reply = await framework.next_frame()
            assert (reply["status"], reply["retcode"], reply["echo"]) == ("failed", 1404, 7)
        finally:
            await plain.close()
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_drain_sends_what_is_queued_before_close() -> None:
    async def main() -> None:
        framework = Framework()
        server = await start(framework)
        client = ReverseWsClient(str(server.make_url("/onebot/v11/ws")), 1, heartbeat_interval=60,
                                 queue_size=3000)
        client.start()
        try:
            await framework.next_frame()  # connect
            for n in range(3000):  # ~6 MB: more than the socket takes in one go
                client.publish({"n": n, "pad": "x" * 2000})
            await client.drain(timeout=10)
            assert len(client.queue) == 0
            await client.close()
            got = [await framework.next_frame() for _ in range(3000)]
            assert [frame["n"] for frame in got] == list(range(3000))
        finally:
            await client.close()
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_refused_handshake_logs_the_status_and_the_url_without_credentials() -> None:
    """A framework answering 403 (a wrong token) was logged only as WSServerHandshakeError,
    and the URL as written, password included."""
    refusals: list[str | None] = []

    async def refuse(request: web.Request) -> web.StreamResponse:
        refusals.append(request.headers.get("Authorization"))
        return web.json_response({"message": "bad token"}, status=403)

    async def main() -> list[dict[str, Any]]:
        server = await framework_server(refuse)
        port = server.port
        client = ReverseWsClient(f"ws://user:pw-Zq9x@127.0.0.1:{port}/ws", 10001,
                                 reconnect_interval=0.01)
        try:
            with capture_logs() as logs:
                client.start()
                for _ in range(int(TIMEOUT / 0.01)):
                    if any(line["event"].startswith(REFUSED) for line in logs):
                        break
                    await asyncio.sleep(0.01)
                await client.close()
        finally:
            await server.close()
        return logs

    logs = asyncio.run(asyncio.wait_for(main(), TIMEOUT * 2))
    refused = [line for line in logs if line["event"].startswith(REFUSED)]
    assert refused and refusals  # the framework was reached, and refused
    first = refused[0]
    assert first["status"] == 403
    assert first["url"].startswith("ws://***@127.0.0.1:") and first["url"].endswith("/ws")
    assert "pw-Zq9x" not in repr(logs)


# --- a refused token is named (issue 33.9) ---------------------------------------------------

REFUSED = "[onebot] reverse ws refused"
TOKEN_REFUSED = "[onebot] reverse ws refused: the framework refused our access token"


class Gate:
    """A framework endpoint that refuses the handshake with ``status`` (401 or 403, as a
    framework refuses a wrong token) or, with ``status`` None, takes the connection and
    holds it until told to refuse again (then it closes it)."""

    def __init__(self, status: int | None) -> None:
        self.status = status
        self.attempts = 0
        self.accepted = 0
        self.tokens: list[str | None] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.attempts += 1
        self.tokens.append(request.headers.get("Authorization"))
        if self.status is not None:
            return web.json_response({"message": "wrong access token"}, status=self.status)
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.accepted += 1
        async for _ in ws:  # heartbeats keep coming; refuse again: close
            if self.status is not None:
                break
        await ws.close()
        return ws


def _warnings(logs: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [line for line in logs if line["event"] == event and line["log_level"] == "warning"]


def test_a_wrong_token_is_named_once_per_state_change() -> None:
    """401, then 403, then 401 again: one warning that the framework refused our access
    token, naming the URL and the status, never the token; the link connected, then
    refused again: a second warning; ``problem`` says it while it lasts."""
    gate = Gate(401)
    problems: list[str | None] = []

    async def attempts(n: int) -> None:
        await until(lambda: gate.attempts >= n, TIMEOUT, f"{n} attempts")

    async def main() -> list[dict[str, Any]]:
        server = await framework_server(gate.handle)
        client = ReverseWsClient(f"ws://127.0.0.1:{server.port}/ws?access_token=tok-Wq7",
                                 10001, access_token="tok-Wq7",
                                 reconnect_interval=0.01, heartbeat_interval=0.02)
        try:
            with capture_logs() as logs:
                client.start()
                await attempts(3)
                problems.append(client.problem)
                gate.status = 403
                await attempts(gate.attempts + 3)
                gate.status = 401
                await attempts(gate.attempts + 3)
                assert len(_warnings(logs, TOKEN_REFUSED)) == 1, logs
                gate.status = None  # the right token now: connected
                await until(lambda: client.connected.is_set(), TIMEOUT, "connected")
                problems.append(client.problem)
                gate.status = 403  # and refused again
                await until(lambda: len(_warnings(logs, TOKEN_REFUSED)) == 2, TIMEOUT,
                            "the second refusal named")
                await attempts(gate.attempts + 3)
                problems.append(client.problem)
                await client.close()
        finally:
            await server.close()
        return logs

    logs = asyncio.run(asyncio.wait_for(main(), TIMEOUT * 3))
    named = _warnings(logs, TOKEN_REFUSED)
    assert [line["status"] for line in named] == [401, 403]
    for line in named:
        assert line["url"].endswith("/ws?access_token=***"), line
    assert "tok-Wq7" not in repr(logs)
    assert gate.tokens[0] == "Bearer tok-Wq7"  # it was sent, and refused
    # the refusals in between are quiet, and none is "unavailable"
    assert len([line for line in logs if line["event"] == TOKEN_REFUSED]) >= 9
    assert not [line for line in logs if line["event"] == "[onebot] reverse ws unavailable"]
    assert problems == ["the framework refused our access token (HTTP 401)", None,
                        "the framework refused our access token (HTTP 403)"]


def test_a_framework_wanting_a_token_when_none_is_set_says_so() -> None:
    """Without ``access_token`` a 401 means the framework wants one; and a refusal that
    ends in an outage (the framework gone) is a change of state: named too."""
    gate = Gate(401)

    async def main() -> tuple[list[dict[str, Any]], str | None, str | None]:
        server = await framework_server(gate.handle)
        client = ReverseWsClient(f"ws://127.0.0.1:{server.port}/ws", 10001,
                                 reconnect_interval=0.01)
        try:
            with capture_logs() as logs:
                client.start()
                await until(lambda: gate.attempts >= 3, TIMEOUT, "3 attempts")
                refused = client.problem
                await server.close()
                await until(lambda: bool(_warnings(logs, "[onebot] reverse ws unavailable")),
                            TIMEOUT, "the outage named")
                gone = client.problem
                await client.close()
        finally:
            await server.close()
        return logs, refused, gone

    logs, refused, gone = asyncio.run(asyncio.wait_for(main(), TIMEOUT * 2))
    wanted = "[onebot] reverse ws refused: the framework wants an access token and none is set"
    assert len(_warnings(logs, wanted)) == 1
    assert refused == "the framework wants an access token and none is set (HTTP 401)"
    assert gone is None


# --- delivered means confirmed (issue 14 item 3) ---------------------------------------------


class PingAwareFramework(Framework):
    """A framework endpoint that reads frames but answers pings only while ``answering``
    (aiohttp answers them itself unless ``autoping`` is off); it records what each of its
    connections got, by ``n``."""

    def __init__(self) -> None:
        super().__init__()
        self.answering = False
        self.pings = 0
        self.got: list[list[int]] = []  # per connection

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=False)
        await ws.prepare(request)
        self.sockets.append(ws)
        got: list[int] = []
        self.got.append(got)
        async for message in ws:
            if message.type == WSMsgType.PING:
                self.pings += 1
                if self.answering:
                    await ws.pong(message.data)
            elif message.type == WSMsgType.TEXT:
                frame = json.loads(message.data)
                if "n" in frame:
                    got.append(frame["n"])
        return ws


def test_an_event_counts_as_delivered_once_a_pong_confirms_it_not_once_written() -> None:
    async def main() -> None:
        framework = PingAwareFramework()
        server, client = await dialling(framework, heartbeat_interval=60)
        try:
            # the client's side of the handshake may finish after the server's: publish
            # hands out a future only once the client counts itself connected
            await until(lambda: framework.got and client.connected.is_set(),
                        what="the connection")
            future = client.publish({"post_type": "message", "n": 1})
            assert future is not None
            await until(lambda: framework.got[0] == [1], what="the event")
            await asyncio.sleep(0.05)
            assert not future.done()  # on the wire, read even, but not confirmed
            await until(lambda: framework.pings >= 1, what="the ping after it")
            framework.answering = True
            # the queue's own future: on a loaded machine the unanswered ping may already be
            # overdue (LAG_GRACE), and then publish rightly offers no future to wait on
            future2 = client.queue.publish({"post_type": "message", "n": 2})
            assert await asyncio.wait_for(future2, TIMEOUT) is True
            assert future.result() is True  # the later pong confirms the earlier event too
        finally:
            await client.close()
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 30))


@pytest.mark.parametrize("how", ["close", "abort"])
def test_unconfirmed_events_are_sent_again_after_a_reconnect_in_order(how: str) -> None:
    """The framework reads five events but confirms none, then goes away (a close frame, or
    the TCP connection just drops): the next connection gets all five again, in order,
    before the event published meanwhile."""

    async def main() -> None:
        framework = PingAwareFramework()
        server, client = await dialling(framework, heartbeat_interval=60,
                                        reconnect_interval=0.05)
        try:
            await until(lambda: framework.got, what="the connection")
            futures = [client.queue.publish({"n": n}) for n in range(5)]
            await until(lambda: framework.got[0] == list(range(5)), what="five events")
            first = framework.sockets[0]
            if how == "close":
                await first.close()
            else:
                assert first._req is not None and first._req.transport is not None
                first._req.transport.abort()
            await until(lambda: not client.connected.is_set(), what="the client to notice")
            futures.append(client.queue.publish({"n": 5}))
            framework.answering = True
            await until(lambda: len(framework.got) == 2 and len(framework.got[1]) == 6,
                        what="the second connection")
            assert framework.got[1] == [0, 1, 2, 3, 4, 5]
            assert await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT) == [True] * 6
        finally:
            await client.close()
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_framework_that_stops_reading_is_dropped_after_the_ping_timeout() -> None:
    """The first connection never reads (a frozen framework: the TCP buffers fill, no pong
    ever comes): after ``ping_timeout`` the connection is dropped, although the close frame
    cannot get through, and the next one gets every event, in order."""

    async def main() -> None:
        framework = PingAwareFramework()
        framework.answering = True
        frozen, thawed = asyncio.Event(), asyncio.Event()

        async def handle(request: web.Request) -> web.StreamResponse:
            if not frozen.is_set():
                frozen.set()
                ws = web.WebSocketResponse(autoping=False)
                await ws.prepare(request)
                framework.got.append([])
                await thawed.wait()  # reads nothing until the test ends
                return ws
            return await framework.handle(request)

        app = web.Application()
        app.router.add_get("/onebot/v11/ws", handle)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        client = ReverseWsClient(str(server.make_url("/onebot/v11/ws")), 1,
                                 heartbeat_interval=60, reconnect_interval=0.05,
                                 ping_timeout=0.5, queue_size=500)
        client.start()
        try:
            await until(lambda: client.connected.is_set(), what="the first connection")
            with capture_logs() as logs:
                futures = [client.queue.publish({"n": n, "pad": "x" * 40_000})
                           for n in range(300)]  # 12 MB: more than the socket buffers hold
                await until(lambda: len(framework.got) == 2 and len(framework.got[1]) == 300,
                            what="every event on the second connection", timeout=20)
            assert framework.got[1] == list(range(300))
            assert await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT) == [True] * 300
            assert client.connects == 2
            assert any(e["event"] == "[onebot] no pong in time: connection dropped"
                       for e in logs)
        finally:
            thawed.set()
            await client.close()
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 40))


def test_a_framework_that_never_answers_the_handshake_is_given_up_and_dialled_again() -> None:
    """A frozen framework's kernel still accepts TCP connections; the upgrade is never
    answered. The handshake times out after ``ping_timeout`` and the client dials again."""

    async def main() -> None:
        accepted = 0
        held: list[asyncio.StreamWriter] = []

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal accepted
            accepted += 1
            held.append(writer)  # read nothing, answer nothing

        tcp = await asyncio.start_server(accept, "127.0.0.1", 0)
        port = tcp.sockets[0].getsockname()[1]
        client = ReverseWsClient(f"ws://127.0.0.1:{port}/ws", 1, ping_timeout=0.3,
                                 reconnect_interval=0.05)
        client.start()
        try:
            await until(lambda: accepted >= 3, what="three attempts")
            assert client.connects == 0
        finally:
            await client.close()
            for writer in held:
                writer.close()
            tcp.close()
            await tcp.wait_closed()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_an_event_that_cannot_be_encoded_is_dropped_and_the_rest_go_out() -> None:
    """A lone surrogate cannot be UTF-8: that event is dropped from this framework with an
    error line and a count, never retried; the events after it are delivered."""

    async def main() -> None:
        framework = PingAwareFramework()
        framework.answering = True
        server, client = await dialling(framework, heartbeat_interval=60,
                                        reconnect_interval=0.05)
        try:
            await until(lambda: framework.got, what="the connection")
            with capture_logs() as logs:
                poison = client.queue.publish({"n": -1, "raw_message": "\ud83d"})
                rest = [client.queue.publish({"n": n}) for n in range(3)]
                assert await asyncio.wait_for(asyncio.gather(*rest), TIMEOUT) == [True] * 3
            assert framework.got == [[0, 1, 2]] and client.connects == 1
            assert poison.result() is True and client.queue.unsendable_events == 1
            assert [e["event"] for e in logs if e["log_level"] == "error"] == [
                "[onebot] event cannot be encoded: dropped"]
        finally:
            await client.close()
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 30))
