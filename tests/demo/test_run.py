"""The demo in this process: the emulated platform, the real daemon on loopback ports and
the script's users; a framework connected by reverse WebSocket answers every message, and
its answers come back as lines from the emulated platform. Also what the demo changes in
a config (and what not), and the CLI's refusals."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from aiohttp import WSMsgType, web
from aiohttp.test_utils import TestServer
from click.testing import CliRunner

from gensokyo_idmap.cli import main
from gensokyo_idmap.config import Config
from gensokyo_idmap.demo.run import (
    DemoOptions,
    _drive,
    banner,
    console_url,
    demo_config,
    run_demo,
)
from gensokyo_idmap.demo.script import CAST, conversation
from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.testing import (
    APP,
    SECRET,
    EmulatedPlatform,
    WebhookSender,
    framework_server,
    free_port,
    until,
    ws_url,
)


@pytest.fixture(autouse=True)
def _structlog_defaults() -> Iterator[None]:
    yield
    structlog.reset_defaults()


def listeners(reverse_ws: list[str]) -> dict[str, Any]:
    return {"bot": {"app_id": "102000001", "secret": ""},
            "webhook": {"listen": f"127.0.0.1:{free_port()}"},
            "onebot": {"reverse_ws": reverse_ws, "forward_ws": f"127.0.0.1:{free_port()}",
                       "reconnect_interval_seconds": 0.1, "heartbeat_interval_seconds": 60},
            "api": {"listen": f"127.0.0.1:{free_port()}"}}


def test_users_talk_through_the_daemon_and_the_bot_s_answers_show(tmp_path: Path) -> None:
    lines: list[str] = []
    events: list[dict[str, Any]] = []

    async def bot(request: web.Request) -> web.WebSocketResponse:
        """A framework answering every message with ``echo: <text>`` (send_msg)."""
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for frame in ws:
            if frame.type != WSMsgType.TEXT:
                continue
            event = json.loads(frame.data)
            if event.get("post_type") in ("message", "notice"):
                events.append(event)
            if event.get("post_type") == "message":
                await ws.send_json({"action": "send_msg", "echo": len(events), "params": {
                    "message_type": event["message_type"], "user_id": event["user_id"],
                    "group_id": event.get("group_id"),
                    "message": "echo: " + event["raw_message"]}})
        return ws

    async def scenario() -> None:
        server = await framework_server(bot)
        stop = asyncio.Event()
        config = Config.model_validate(listeners([ws_url(server)]))
        demo = asyncio.create_task(run_demo(
            config, DemoOptions(data_dir=tmp_path / "data-demo", seed=3, pace=0.05),
            lines.append, stop))
        try:
            await until(lambda: sum(" bot: echo: " in line for line in lines) >= 5
                        and any(e["post_type"] == "notice" for e in events), 30,
                        lambda: "\n".join(lines[-20:]), alive=lambda: demo.done()
                        and demo.result())
        finally:
            stop.set()
            await asyncio.wait_for(demo, 30)
            await server.close()

    asyncio.run(scenario())
    assert lines[0].startswith("demo: simulated QQ users chat through the daemon (seed 3")
    assert any(line.startswith("  console: http://127.0.0.1:") for line in lines)
    said = [line for line in lines[len(banner(Config(), DemoOptions())):]
            if " bot: " not in line and not line.startswith(" ")]
    assert len(said) >= 5
    # the stores are the demo's data dir's, and hold the cast the daemon saw
    store = LmdbIdentityStore(tmp_path / "data-demo" / "openid-map.db", readonly=True)
    try:
        with store.read() as view:
            known = [p for p in CAST.people if view.vuin_of(OpenId(APP, p.openid).key)]
    finally:
        store.close()
    assert known
    assert {e["user_id"] for e in events} <= set(range(1, 100))  # vUINs, not OpenIDs


def test_the_demo_config_keeps_the_listeners_and_brings_its_own_bot_and_stores(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        async with EmulatedPlatform() as platform:
            given = Config.model_validate({**listeners(["ws://127.0.0.1:8080/onebot/v11/ws"]),
                                           "idmap": {"data_dir": "data", "backend": "postgres",
                                                     "postgres_dsn": "postgresql://h/db"}})
            config = demo_config(given, platform, tmp_path / "d")
            assert (config.bot.app_id, config.bot.secret.get_secret_value()) == (APP, SECRET)
            assert config.qq.api_base == platform.url("/").rstrip("/")
            assert config.qq.token_url == platform.url("/app/getAppAccessToken")
            assert (config.idmap.data_dir, config.idmap.backend,
                    config.idmap.runtime_backend) == (tmp_path / "d", "lmdb", "lmdb")
            assert (config.webhook, config.onebot, config.api) == (
                given.webhook, given.onebot, given.api)
            assert console_url(config) == f"http://{given.api.listen}/ui/"
            assert console_url(config.model_copy(update={
                "api": config.api.model_copy(update={"listen": ""})})) is None
            with pytest.raises(BadInputError, match="webhook.listen"):
                demo_config(Config(), platform, tmp_path / "d")

    asyncio.run(scenario())


def test_the_cli_refuses_a_config_it_cannot_use(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(main, ["demo", "--config", str(tmp_path / "none.yml")])
    assert missing.exit_code == 2 and "cannot read" in missing.stderr
    quiet = tmp_path / "quiet.yml"
    quiet.write_text("webhook: {listen: ''}\n")
    no_webhook = runner.invoke(main, ["demo", "--config", str(quiet), "--data-dir",
                                      str(tmp_path / "d")])
    assert no_webhook.exit_code == 2 and "webhook.listen" in no_webhook.stderr
    assert not (tmp_path / "d").exists()
    negative = runner.invoke(main, ["demo", "--pace", "-1"])
    assert negative.exit_code == 2


def test_an_event_the_webhook_did_not_take_is_posted_again(tmp_path: Path) -> None:
    """As the platform retries: the same event (same body) again, then the next one."""
    bodies: list[bytes] = []
    answers = [503]

    async def webhook(request: web.Request) -> web.Response:
        bodies.append(await request.read())
        return web.Response(status=answers.pop(0) if answers else 200)

    async def scenario() -> list[str]:
        app = web.Application()
        app.router.add_post("/qqbot", webhook)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        lines: list[str] = []
        stop = asyncio.Event()
        try:
            async with WebhookSender(str(server.make_url("/qqbot")), APP, SECRET) as sender:
                driving = asyncio.create_task(_drive(conversation(1, 0.0), sender,
                                                     lines.append, stop))
                await until(lambda: len(bodies) >= 3, 20)
                stop.set()
                await asyncio.wait_for(driving, 20)
        finally:
            await server.close()
        return lines

    lines = asyncio.run(scenario())
    assert bodies[0] == bodies[1] != bodies[2]  # refused once, posted again, then the next
    assert len(lines) >= 2  # one line per step, not per post
