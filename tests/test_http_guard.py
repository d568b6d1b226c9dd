"""gensokyo_idmap.http_guard: the caps' arithmetic (property tests), one guarded aiohttp
listener on loopback (what is closed, what is not, what a request it cannot parse costs the
log), and the accept-error log of a real process out of file descriptors."""

from __future__ import annotations

import asyncio
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import ClientSession, ClientTimeout, WSMsgType, web
from hypothesis import given
from aiohttp.http_exceptions import HttpProcessingError
from hypothesis import strategies as st

from gensokyo_idmap import counters
from gensokyo_idmap.http_guard import (
    PROCESS_RESERVE,
    ConnectionPlan,
    Deadlines,
    connection_caps,
    parse_error,
)
from gensokyo_idmap.logging import configure_logging
from gensokyo_idmap.testing import free_port, until

from .conftest import run

WEBHOOK = "webhook.listen"
OTHERS = ["api.listen", "onebot.forward_ws", "onebot.http_api"]
CHILD = Path(__file__).resolve().parent / "accept_storm_child.py"


# --- the caps -------------------------------------------------------------------------------


@given(fd_limit=st.integers(16, 1 << 20), most=st.integers(1, 100_000),
       others=st.lists(st.sampled_from(OTHERS), unique=True), webhook=st.booleans())
def test_the_caps_stay_below_the_limit_and_the_webhook_has_the_largest(
        fd_limit: int, most: int, others: list[str], webhook: bool) -> None:
    listeners = [WEBHOOK, *others] if webhook else others
    caps = connection_caps(fd_limit, listeners, most=most, first=WEBHOOK)
    assert sorted(caps) == sorted(listeners)
    assert all(1 <= cap <= most for cap in caps.values())
    budget = fd_limit - min(PROCESS_RESERVE, fd_limit // 4)
    assert sum(caps.values()) <= max(budget, len(listeners))  # below the limit, reserve kept
    if webhook:
        assert all(caps[WEBHOOK] >= caps[name] for name in others)


def test_the_caps_under_the_usual_limit_of_1024() -> None:
    caps = connection_caps(1024, [WEBHOOK, *OTHERS], most=1000, first=WEBHOOK)
    assert caps == {WEBHOOK: 384, "api.listen": 128, "onebot.forward_ws": 128,
                    "onebot.http_api": 128}
    assert connection_caps(1 << 20, [WEBHOOK, *OTHERS], most=1000, first=WEBHOOK) == {
        name: 1000 for name in [WEBHOOK, *OTHERS]}


# --- one guarded listener -------------------------------------------------------------------

#: Short deadlines, for the tests that wait for them to pass.
SHORT = Deadlines(header_seconds=0.3, body_seconds=0.6)
#: Deadlines no step of a test comes near, however loaded the machine.
LONG = Deadlines(header_seconds=30, body_seconds=30)
HALF_HEAD = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


async def guarded(app: web.Application, deadlines: Deadlines, cap: int = 100
                  ) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await ConnectionPlan(deadlines, {"test": cap}).site(runner, "127.0.0.1", port,
                                                        "test").start()
    return runner, port


async def closed_by_peer(reader: asyncio.StreamReader, timeout: float = 10) -> bytes:
    """What came before the daemon closed the connection (fails if it stays open)."""
    try:
        return await asyncio.wait_for(reader.read(), timeout)
    except ConnectionResetError:
        return b""


def test_requests_and_websockets_longer_than_the_deadlines_are_not_cut() -> None:
    """Only a client that is late with its head or body is closed: a handler may take its
    time, a WebSocket may stay open, a connection may carry several requests."""
    deadlines = Deadlines(header_seconds=1.0, body_seconds=1.0)
    past = 2.5 * deadlines.body_seconds

    async def slow(request: web.Request) -> web.Response:
        await request.read()
        if request.query.get("slow"):
            await asyncio.sleep(past)
        return web.Response(text="done")

    async def socket(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for message in ws:
            await ws.send_str(message.data)
        return ws

    async def main() -> None:
        app = web.Application()
        app.add_routes([web.post("/slow", slow), web.get("/ws", socket)])
        runner, port = await guarded(app, deadlines)
        try:
            async with ClientSession(timeout=ClientTimeout(total=10)) as session:
                for query in ("?slow=1", ""):  # the second on the same connection
                    async with session.post(f"http://127.0.0.1:{port}/slow{query}",
                                            data=b"{}") as resp:
                        assert (resp.status, await resp.text()) == (200, "done")
                async with session.ws_connect(f"ws://127.0.0.1:{port}/ws") as ws:
                    await asyncio.sleep(past)
                    await ws.send_str("still here")
                    message = await ws.receive()
                    assert (message.type, message.data) == (WSMsgType.TEXT, "still here")
        finally:
            await runner.cleanup()

    run(main())


def test_at_its_cap_a_listener_closes_the_longest_waiting_to_answer_a_fresh_request() -> None:
    """Cap 3, three clients dripping half a head: a fresh request closes the oldest of them
    and is answered. Three requests being answered: a fourth connection is closed at once,
    none of the three is cut."""
    release = asyncio.Event()

    async def hello(request: web.Request) -> web.Response:
        if request.query.get("wait"):
            await release.wait()
        return web.Response(text="hello")

    async def main() -> None:
        app = web.Application()
        app.add_routes([web.get("/", hello)])
        runner, port = await guarded(app, LONG, cap=3)
        try:
            slow = []
            for _ in range(3):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(HALF_HEAD)
                await writer.drain()
                slow.append((reader, writer))
                await asyncio.sleep(0.01)  # so the first is the oldest
            async with ClientSession(timeout=ClientTimeout(total=5)) as session:
                async with session.get(f"http://127.0.0.1:{port}/") as resp:
                    assert await resp.text() == "hello"
            assert await closed_by_peer(slow[0][0]) == b""
            for reader, _ in slow[1:]:  # still open: nothing comes, no end either
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(reader.read(1), 0.2)
            for _, writer in slow:
                writer.close()

            async with ClientSession(timeout=ClientTimeout(total=10)) as session:
                busy = [asyncio.create_task(session.get(f"http://127.0.0.1:{port}/?wait=1"))
                        for _ in range(3)]
                await until(lambda: len(runner.server.connections) == 3  # type: ignore[union-attr]
                            and all(not t.done() for t in busy), 5, "three busy requests")
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                assert await closed_by_peer(reader) == b""  # refused, not answered
                writer.close()
                release.set()
                for resp in await asyncio.gather(*busy):
                    assert await resp.text() == "hello"
                    resp.release()
        finally:
            await runner.cleanup()

    run(main())


def test_a_half_head_or_a_slow_body_is_cut_even_while_it_drips() -> None:
    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=await request.read())

    async def dripping(port: int, first: bytes) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(first)
        try:
            for _ in range(200):  # 10 s at most
                try:
                    data = await asyncio.wait_for(reader.read(), 0.05)
                except TimeoutError:
                    writer.write(b"a")
                    continue
                return data
            raise AssertionError("still open after 10 s")
        except ConnectionResetError:
            return b""
        finally:
            writer.close()

    async def main() -> None:
        app = web.Application()
        app.add_routes([web.post("/", echo)])
        runner, port = await guarded(app, SHORT)
        try:
            results = await asyncio.gather(
                dripping(port, HALF_HEAD),
                dripping(port, b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               b"Content-Length: 100000\r\n\r\n{"))
            assert results == [b"", b""]
        finally:
            await runner.cleanup()

    run(main())


# --- accept errors --------------------------------------------------------------------------


def _limited(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


def test_running_out_of_descriptors_logs_one_line_a_minute_with_the_count(
        tmp_path: Path) -> None:
    """A real listener under a limit of 64 open files, 300 connections at it for 3 s:
    Python 3.11's accept loop fails thousands of times; one line says so at once, the
    closing one how many followed, and no traceback is written."""
    child = subprocess.Popen(
        [sys.executable, str(CHILD), "3", "60"], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, preexec_fn=lambda: _limited(64))
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())

        async def flood() -> None:
            writers = []
            for _ in range(300):
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", port)
                except OSError:
                    continue
                writers.append(writer)
            await asyncio.sleep(2)
            for writer in writers:
                writer.close()

        run(flood())
        _, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    log = err.decode(errors="replace")
    assert child.returncode == 0, log
    assert "Traceback" not in log, log[:3000]
    lines = [line for line in log.splitlines() if "out of file descriptors" in line]
    assert len(lines) == 2, log[:3000]  # the first at once; what followed, at the end
    assert "EMFILE=1 " in lines[0], lines[0]
    counted = re.search(r"EMFILE=(\d+)", lines[1])
    assert counted is not None and int(counted.group(1)) > 1, lines[1]


# --- requests aiohttp cannot parse ----------------------------------------------------------

SECRET = "tok-s3cret-in-a-bad-line"
#: Heads aiohttp cannot parse, each on a connection of its own: a bad header name, a header
#: line and a request line past 8 KiB (each holding a secret), a bad chunk size, a bad
#: version; the secret must never reach the log.
MALFORMED = (
    b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header " + SECRET.encode() + b"\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + SECRET.encode()
    + b"a" * 9000 + b"\r\n\r\n",
    b"GET /" + SECRET.encode() + b"b" * 9000 + b" HTTP/1.1\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"GET / HTTP/9.Z\r\nHost: 127.0.0.1\r\n\r\n",
)


def test_a_flood_of_malformed_requests_is_answered_400_and_logged_in_a_line_or_two(
        capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    """200 requests aiohttp cannot parse, on a real guarded listener: each answered 400;
    the log has no traceback, no byte of theirs, and one line at once and one at the stop
    with the counts (aiohttp wrote a traceback for each); the metric counts all 200. A
    handler's own bug still logs its traceback."""
    configure_logging("info")
    count = counters.HTTP_MALFORMED.labels("test")
    before = count.value

    async def bug(request: web.Request) -> web.Response:
        raise RuntimeError("a bug of ours")

    async def main() -> None:
        app = web.Application()
        app.add_routes([web.get("/bug", bug)])
        runner, port = await guarded(app, LONG)
        try:
            for n in range(200):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(MALFORMED[n % len(MALFORMED)])
                answer = await closed_by_peer(reader)
                writer.close()
                assert answer.startswith(b"HTTP/1.0 400 ") or answer.startswith(
                    b"HTTP/1.1 400 "), (n, answer[:80])
            async with ClientSession(timeout=ClientTimeout(total=10)) as session, \
                    session.get(f"http://127.0.0.1:{port}/bug") as resp:
                assert resp.status == 500
        finally:
            await runner.cleanup()

    run(main())
    captured = capsys.readouterr()
    logged = captured.out + captured.err + caplog.text  # ours; aiohttp's (stdlib logging)
    assert count.value - before == 200
    lines = [line for line in logged.splitlines() if "requests not understood" in line]
    assert len(lines) == 2, logged[:3000]  # the first at once; what followed, at the stop
    assert "listener=test" in lines[0] and "peer=127.0.0.1" in lines[0]
    counted = sum(int(found) for found in re.findall(r"\b[A-Z][A-Za-z]+=(\d+)\b", lines[1]))
    assert counted == 199, lines[1]
    assert SECRET not in logged and "aaaa" not in logged and "bbbb" not in logged
    assert logged.count("Traceback") == 1 and "a bug of ours" in logged  # the bug's alone
    assert "Error handling request" in logged  # said once, for the bug


@given(st.text(max_size=40), st.sampled_from(["b'", 'b"', "bytearray(b'"]))
def test_a_parse_error_is_a_few_words_without_the_request_bytes(
        quoted: str, opening: str) -> None:
    """aiohttp's messages quote what they could not parse (a header's value, a token in
    it): the line keeps the words before the quote only."""
    exc = HttpProcessingError(message=f"Invalid header value char: {opening}{quoted}'\n  ^")
    assert parse_error(exc) == "Invalid header value char"
    assert parse_error(HttpProcessingError(message="x" * 300)) == "x" * 80
