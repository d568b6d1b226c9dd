"""HTTP POST reporting against a real receiver on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from structlog.testing import capture_logs

from gensokyo_idmap.onebot.http_post import HttpPostTarget, sign_body

from ..conftest import unencodable

TIMEOUT = 10


async def receiving(receiver: Any) -> TestServer:
    """A framework on 127.0.0.1 whose every POST ``receiver`` answers (started)."""
    app = web.Application()
    app.router.add_post("/{path:.*}", receiver)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server


def test_reference_signature_vector() -> None:
    assert sign_body("s3cret", b'{"a":1}') == "sha1=79999786a1bff10cd4d7dd0b0752574af76be0b5"


def test_events_are_posted_in_order_with_headers_and_a_checkable_signature() -> None:
    received: list[tuple[dict[str, str], bytes]] = []
    fail_first = [True]

    async def receiver(request: web.Request) -> web.Response:
        body = await request.read()
        if fail_first and fail_first.pop():
            return web.Response(status=502)  # a hiccup: the event must be retried
        received.append((dict(request.headers), body))
        return web.Response(status=204)

    async def main() -> HttpPostTarget:
        server = await receiving(receiver)
        target = HttpPostTarget(str(server.make_url("/onebot")), 10001, secret="s3cret",
                                retry_delay=0.01)
        target.start()
        try:
            for n in range(3):
                target.publish({"self_id": 10001, "post_type": "message", "n": n})
            for _ in range(int(TIMEOUT / 0.01)):
                if len(received) == 3:
                    break
                await asyncio.sleep(0.01)
        finally:
            await target.close()
            await server.close()
        return target

    target = asyncio.run(main())
    assert [json.loads(body)["n"] for _, body in received] == [0, 1, 2]
    for headers, body in received:
        assert headers["X-Self-ID"] == "10001"
        assert headers["Content-Type"] == "application/json"
        assert headers["X-Signature"] == sign_body("s3cret", body)
    assert target.delivered == 3 and target.failed == 0


def test_a_dead_receiver_costs_its_own_events_only() -> None:
    async def main() -> tuple[int, int]:
        target = HttpPostTarget("http://127.0.0.1:9/nothing", 1, queue_size=2, retry_delay=0.001)
        target.start()
        for n in range(5):
            target.publish({"n": n})  # never waits, even though nothing listens
        for _ in range(500):
            if target.failed + target.queue.dropped >= 5:
                break
            await asyncio.sleep(0.01)
        await target.close()
        return target.failed, target.queue.dropped

    failed, dropped = asyncio.run(asyncio.wait_for(main(), 30))
    assert failed + dropped == 5 and dropped >= 1


def test_an_event_that_cannot_be_encoded_is_dropped_and_the_next_ones_are_posted() -> None:
    """A poison event must not stop the sender (it used to kill its task: nothing was
    posted again until a restart)."""
    received: list[bytes] = []
    before = unencodable("http_post")

    async def receiver(request: web.Request) -> web.Response:
        received.append(await request.read())
        return web.Response(status=204)

    async def main() -> tuple[list[bool], list[Any]]:
        app = web.Application()
        app.router.add_post("/onebot", receiver)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        target = HttpPostTarget(str(server.make_url("/onebot")), 10001, retry_delay=0.01)
        target.start()
        try:
            with capture_logs() as logs:
                futures = [target.publish({"post_type": "message", "n": 0, "text": "\ud83d"}),
                           target.publish({"post_type": "message", "n": 1})]
                done = await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT)
        finally:
            await target.close()
            await server.close()
        return done, logs

    done, logs = asyncio.run(main())
    assert done == [True, True]  # settled: nothing is owed for what no one can be sent
    assert [json.loads(body)["n"] for body in received] == [1]
    assert unencodable("http_post") == before + 1
    assert [line["event"] for line in logs if line["log_level"] == "error"] == [
        "[onebot] event cannot be encoded: dropped"]


def test_a_quick_operation_answer_is_carried_out_with_its_event() -> None:
    operations: list[tuple[dict[str, Any], dict[str, Any]]] = []

    async def receiver(request: web.Request) -> web.Response:
        event = await request.json()
        if event["n"] == 0:
            return web.json_response({"reply": "pong", "at_sender": False})
        if event["n"] == 1:
            return web.Response(text="not json")  # ignored, logged
        return web.Response(status=204)

    async def on_quick_operation(event: dict[str, Any], operation: dict[str, Any]) -> None:
        operations.append((event, operation))

    async def main() -> HttpPostTarget:
        app = web.Application()
        app.router.add_post("/onebot", receiver)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        target = HttpPostTarget(str(server.make_url("/onebot")), 1,
                                on_quick_operation=on_quick_operation)
        target.start()
        try:
            written = [target.publish({"post_type": "message", "n": n}) for n in range(3)]
            await asyncio.wait_for(asyncio.gather(*written), TIMEOUT)
        finally:
            await target.close()  # waits for the operations still running
            await server.close()
        return target

    target = asyncio.run(main())
    assert operations == [({"post_type": "message", "n": 0}, {"reply": "pong",
                                                              "at_sender": False})]
    assert target.delivered == 3


@pytest.mark.parametrize(("retries", "slow"), [(0, False), (3, False), (1, True)])
def test_retries_and_timeout_are_the_configured_ones(retries: int, slow: bool) -> None:
    """``max_retries`` more tries after a failure (a 5xx, or no answer within
    ``timeout_seconds``), then the event is given up; the next one is posted."""
    tries: list[int] = []

    async def receiver(request: web.Request) -> web.Response:
        n = json.loads(await request.read())["n"]
        tries.append(n)
        if n == 0:
            if slow:
                await asyncio.sleep(2)  # far beyond the timeout: a failed try
            return web.Response(status=503)
        return web.Response(status=204)

    async def main() -> HttpPostTarget:
        server = await receiving(receiver)
        target = HttpPostTarget(str(server.make_url("/")), 1, retries=retries,
                                retry_delay=0.001, timeout=0.2)
        target.start()
        try:
            first, second = target.publish({"n": 0}), target.publish({"n": 1})
            assert await asyncio.wait_for(first, TIMEOUT) is False
            assert await asyncio.wait_for(second, TIMEOUT) is True
        finally:
            await target.close()
            await server.close()
        return target

    target = asyncio.run(main())
    assert tries == [0] * (retries + 1) + [1]
    assert (target.failed, target.delivered) == (1, 1)
