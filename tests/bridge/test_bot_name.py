"""The bot's name for ``get_login_info``: ``GET /users/@me`` of the emulated platform, asked
once; the fallback ``QQBot <appid>`` without platform access or on a refusal, logged, with
the platform asked again only after a while."""

from __future__ import annotations

import asyncio

from aiohttp import ClientSession
from structlog.testing import capture_logs

from gensokyo_idmap.bridge.bot_name import RETRY_SECONDS, BotName
from gensokyo_idmap.testing.platform_emulator import APP, BOT_USER, EmulatedPlatform

from ..conftest import FakeClock, run


def test_the_name_is_asked_once_and_kept(clock: FakeClock) -> None:
    async def main() -> None:
        async with EmulatedPlatform() as platform, ClientSession() as session:
            name = BotName(platform.openapi(session), APP, clock)
            answers = await asyncio.gather(*(name.get() for _ in range(5)))
            assert answers == [BOT_USER["username"]] * 5
            assert await name.get() == "bot"
            assert len(platform.api_requests("GET", "/users/@me")) == 1  # one request

    run(asyncio.wait_for(main(), 20))


def test_a_refusal_answers_the_fallback_and_is_asked_again_later(clock: FakeClock) -> None:
    async def main() -> None:
        async with EmulatedPlatform() as platform, ClientSession() as session:
            name = BotName(platform.openapi(session, backoff_seconds=0.01), APP, clock)
            platform.fail_next = [(403, {"code": 11264, "message": "no permission"})] * 9
            with capture_logs() as logs:
                assert await name.get() == f"QQBot {APP}"
                asked = len(platform.api_requests("GET", "/users/@me"))
                assert await name.get() == f"QQBot {APP}"  # not asked again at once
            assert len(platform.api_requests("GET", "/users/@me")) == asked
            [warning] = [line for line in logs if line["log_level"] == "warning"]
            assert warning["nickname"] == f"QQBot {APP}" and "11264" in warning["reason"]
            platform.fail_next = []
            clock.advance(RETRY_SECONDS + 1)
            assert await name.get() == "bot"  # the platform answers again

    run(asyncio.wait_for(main(), 20))


def test_an_answer_without_a_username_is_a_refusal(clock: FakeClock) -> None:
    async def main() -> None:
        async with EmulatedPlatform() as platform, ClientSession() as session:
            platform.bot_user = {"id": "1", "username": "", "bot": True}
            name = BotName(platform.openapi(session), APP, clock)
            with capture_logs() as logs:
                assert await name.get() == f"QQBot {APP}"
            assert "no username" in logs[-1]["reason"]
            platform.bot_user["username"] = "Sakuya"
            clock.advance(RETRY_SECONDS + 1)
            assert await name.get() == "Sakuya"

    run(asyncio.wait_for(main(), 20))


def test_without_platform_access_the_fallback(clock: FakeClock) -> None:
    name = BotName(None, APP, clock)
    with capture_logs() as logs:
        assert run(name.get()) == run(name.get()) == f"QQBot {APP}"
    assert len(logs) == 1  # said once
