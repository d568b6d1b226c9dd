"""``/readyz`` of ``gensokyo-idmap serve`` as a process: alive is not useful.

A daemon without ``bot.secret`` is alive (``/healthz`` 204) but not ready (``/readyz`` 503
naming ``bot.secret``), and its webhook refuses callbacks as ``not_configured``. With the
emulated platform a wrong secret is named at start (the token refused); the right one makes
the daemon ready once the token is obtained, and with ``qq.gateway`` only once a session is
established. A runtime store on a private redis-server that stops is named, and the daemon
is ready again once it answers. What a bot tells its frameworks (OneBot ``get_status``
and heartbeats, heard on a real forward-WS socket) follows the same rule: not online while
the session is not established or the token is refused.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import ClientSession, ClientWebSocketResponse

from gensokyo_idmap.testing import (
    APP,
    SECRET,
    EmulatedPlatform,
    WebhookSender,
    daemon_config,
    free_port,
    running_daemon,
)

from ..redis_server import PrivateRedis
from .test_inbound import group_message

TEST_SECONDS = 90.0
WAIT = 20.0


async def readyz(session: ClientSession, port: int) -> tuple[int, list[str]]:
    async with session.get(f"http://127.0.0.1:{port}/readyz") as resp:
        body = await resp.json()
        assert body["ready"] is (resp.status == 200) and isinstance(body["missing"], list)
        return resp.status, body["missing"]


async def until_readyz(session: ClientSession, port: int, alive: Callable[[], None],
                       holds: Callable[[int, list[str]], bool], what: str) -> None:
    """Until ``/readyz``'s (status, missing) ``holds`` (the last answer in the failure)."""
    last: tuple[int, list[str]] | None = None
    for _ in range(int(WAIT / 0.05)):
        alive()
        last = await readyz(session, port)
        if holds(*last):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{what}: /readyz still answers {last}")


async def until_ready(session: ClientSession, port: int, alive: Callable[[], None],
                      what: str) -> None:
    await until_readyz(session, port, alive, lambda status, _: status == 200, what)


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), TEST_SECONDS))


def test_without_a_secret_the_daemon_is_alive_but_not_ready(tmp_path: Path) -> None:
    webhook, api = free_port(), free_port()

    async def scenario() -> None:
        config = daemon_config(tmp_path / "data", secret="", webhook=f"127.0.0.1:{webhook}",
                               api=f"127.0.0.1:{api}")
        async with running_daemon(config, tmp_path, listening=[webhook, api]), \
                ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{api}/healthz") as resp:
                assert resp.status == 204  # liveness: the stores work
            status, missing = await readyz(session, api)
            assert status == 503 and len(missing) == 1, missing
            assert "bot.secret not set" in missing[0]
            sender = WebhookSender(f"http://127.0.0.1:{webhook}/qqbot", APP, SECRET,
                                   session=session)
            body = group_message(1)
            answer = await sender.post_raw(body, sender.headers(body))
            assert answer.status == 401
            error = answer.json()["error"]
            assert error["code"] == "not_configured" and "bot.secret" in error["message"]

    run(scenario)


def test_a_wrong_secret_is_named_and_the_right_one_makes_the_daemon_ready(
        tmp_path: Path) -> None:
    """Webhook only (no gateway): the token is asked for at start all the same, so a wrong
    secret shows before the first reply would fail."""
    webhook, api = free_port(), free_port()

    async def scenario() -> None:
        async with EmulatedPlatform() as platform, ClientSession() as session:
            qq = {**platform.qq_config(), "gateway": False}
            wrong = daemon_config(tmp_path / "data", secret="not-the-secret",
                                  webhook=f"127.0.0.1:{webhook}", api=f"127.0.0.1:{api}",
                                  qq=qq)
            async with running_daemon(wrong, tmp_path / "wrong", listening=[api]) as daemon:
                await until_readyz(session, api, daemon.alive, lambda _, missing: any(
                    "access token not obtained" in reason and "100016" in reason
                    for reason in missing), "the token refused, named")
                status, missing = await readyz(session, api)
                assert status == 503 and "not-the-secret" not in repr(missing)
            right = daemon_config(tmp_path / "data", webhook=f"127.0.0.1:{webhook}",
                                  api=f"127.0.0.1:{api}", qq=qq)
            async with running_daemon(right, tmp_path / "right", listening=[api]) as daemon:
                await until_ready(session, api, daemon.alive, "the token obtained")
                assert platform.tokens_issued >= 1

    (tmp_path / "wrong").mkdir()
    (tmp_path / "right").mkdir()
    run(scenario)


def test_with_the_gateway_the_daemon_is_ready_once_its_session_is_established(
        tmp_path: Path) -> None:
    api = free_port()

    async def scenario() -> None:
        async with EmulatedPlatform() as platform, ClientSession() as session:
            platform.hold_sessions()  # the socket opens; READY waits
            config = daemon_config(tmp_path / "data", platform=platform,
                                   api=f"127.0.0.1:{api}")
            async with running_daemon(config, tmp_path, listening=[api]) as daemon:
                await until_readyz(session, api, daemon.alive, lambda *answer: answer == (
                    503, ["gateway not connected: no session established"]),
                    "token obtained, no session")
                assert platform.identifies == []  # held: not answered yet
                platform.release_sessions()
                await until_ready(session, api, daemon.alive, "the session established")
                assert len(platform.identifies) == 1

    run(scenario)


def test_a_runtime_store_that_stops_is_named_until_it_answers_again(tmp_path: Path) -> None:
    webhook, api = free_port(), free_port()
    redis = PrivateRedis(tmp_path)
    redis.start()

    async def scenario() -> None:
        async with EmulatedPlatform() as platform, ClientSession() as session:
            config = daemon_config(
                tmp_path / "data", webhook=f"127.0.0.1:{webhook}", api=f"127.0.0.1:{api}",
                qq={**platform.qq_config(), "gateway": False},
                idmap={"runtime_backend": "redis", "redis_url": redis.url,
                       "redis_prefix": "gsk-readyz:"})
            async with running_daemon(config, tmp_path, listening=[api]) as daemon:
                await until_ready(session, api, daemon.alive, "redis up, token obtained")
                redis.stop()
                status, missing = await readyz(session, api)
                assert status == 503 and missing == [
                    reason for reason in missing if reason.startswith(
                        f"redis at redis://127.0.0.1:{redis.port}/0")] != [], missing
                redis.start()
                await until_ready(session, api, daemon.alive, "redis answering again")

    try:
        run(scenario)
    finally:
        redis.stop()


async def next_heartbeat(ws: ClientWebSocketResponse) -> dict[str, Any]:
    """The ``status`` of the next heartbeat the framework's socket receives."""
    while True:
        frame = json.loads((await asyncio.wait_for(ws.receive(), WAIT)).data)
        if frame.get("meta_event_type") == "heartbeat":
            return frame["status"]


async def get_status(ws: ClientWebSocketResponse, echo: str) -> dict[str, Any]:
    """``get_status`` sent on the framework's socket: its answer's data (heartbeats and
    other events passed over)."""
    await ws.send_json({"action": "get_status", "echo": echo})
    while True:
        frame = json.loads((await asyncio.wait_for(ws.receive(), WAIT)).data)
        if frame.get("echo") == echo:
            assert frame["status"] == "ok", frame
            return frame["data"]


def status_daemon(tmp_path: Path, platform: EmulatedPlatform, forward: int,
                  **keys: Any) -> dict[str, Any]:
    """A daemon on ``platform``'s gateway, its forward WS on ``forward``, a heartbeat every
    0.1 s (the framework's socket sees the state change within a few)."""
    return daemon_config(tmp_path / "data", platform=platform,
                         onebot={"forward_ws": f"127.0.0.1:{forward}",
                                 "heartbeat_interval_seconds": 0.1}, **keys)


def test_get_status_and_heartbeats_say_offline_until_the_gateway_session_is_established(
        tmp_path: Path) -> None:
    """OneBot's ``online``: the bot is online on its platform, by ``/readyz``'s rule. With
    the token obtained but the session held, a real framework socket hears online false,
    good false, from ``get_status`` and from each heartbeat; once READY comes, true, true."""
    forward = free_port()

    async def scenario() -> None:
        async with EmulatedPlatform() as platform, ClientSession() as session:
            platform.hold_sessions()  # the socket opens; READY waits
            async with running_daemon(status_daemon(tmp_path, platform, forward), tmp_path,
                                      listening=[forward]) as daemon, \
                    session.ws_connect(f"ws://127.0.0.1:{forward}/") as ws:
                down = {"online": False, "good": False}
                assert await next_heartbeat(ws) == down
                assert await get_status(ws, "held") == down
                assert platform.identifies == []  # held: no session established
                platform.release_sessions()
                for _ in range(int(WAIT / 0.1)):
                    daemon.alive()
                    if (await next_heartbeat(ws))["online"]:
                        break
                assert await next_heartbeat(ws) == {"online": True, "good": True}
                assert await get_status(ws, "up") == {"online": True, "good": True}
                assert len(platform.identifies) == 1

    run(scenario)


def test_get_status_and_heartbeats_say_offline_while_the_platform_refuses_the_token(
        tmp_path: Path) -> None:
    """A wrong secret: the emulator refuses every token request (100016), the gateway is
    never reached, and the framework hears online false, good false, however long it
    listens."""
    forward, api = free_port(), free_port()

    async def scenario() -> None:
        async with EmulatedPlatform() as platform, ClientSession() as session:
            config = status_daemon(tmp_path, platform, forward, secret="not-the-secret",
                                   api=f"127.0.0.1:{api}")
            async with running_daemon(config, tmp_path, listening=[forward, api]) as daemon, \
                    session.ws_connect(f"ws://127.0.0.1:{forward}/") as ws:
                await until_readyz(session, api, daemon.alive, lambda _, missing: any(
                    "100016" in reason for reason in missing), "the token refused, named")
                down = {"online": False, "good": False}
                for n in range(3):
                    assert await next_heartbeat(ws) == down
                    assert await get_status(ws, f"refused {n}") == down
                assert platform.tokens_issued == 0 and platform.identifies == []

    run(scenario)
