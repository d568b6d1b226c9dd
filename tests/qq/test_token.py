"""Access token manager against an emulated token endpoint on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer
from structlog.testing import capture_logs

from gensokyo_idmap.errors import PlatformError
from gensokyo_idmap.qq.token import AccessTokenManager

from ..conftest import FakeClock

APP = "102000001"
SECRET = "tok-secret-Qw7"


class TokenEndpoint:
    """The platform's getAppAccessToken: checks the body, hands out numbered tokens."""

    def __init__(self, expires_in: Any = "7200") -> None:
        self.expires_in = expires_in
        self.calls = 0
        self.refuse = False

    async def handle(self, request: web.Request) -> web.Response:
        self.calls += 1
        body = await request.json()
        assert body == {"appId": APP, "clientSecret": SECRET}
        if self.refuse:
            return web.json_response({"code": 100016, "message": "invalid appid or secret"})
        await asyncio.sleep(0.01)
        return web.json_response({"access_token": f"T{self.calls}",
                                  "expires_in": self.expires_in})


def with_manager(endpoint: TokenEndpoint, clock: FakeClock,
                 scenario: Callable[[AccessTokenManager], Awaitable[None]]) -> None:
    async def main() -> None:
        app = web.Application()
        app.router.add_post("/app/getAppAccessToken", endpoint.handle)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        try:
            async with ClientSession() as session:
                manager = AccessTokenManager(
                    APP, SECRET, session, clock=clock,
                    token_url=str(server.make_url("/app/getAppAccessToken")))
                await asyncio.wait_for(scenario(manager), 10)
        finally:
            await server.close()

    asyncio.run(main())


@pytest.mark.parametrize("expires_in", ["7200", 7200, 7200.0])
def test_token_is_cached_and_refreshed_before_expiry(expires_in: Any, clock: FakeClock) -> None:
    endpoint = TokenEndpoint(expires_in)

    async def scenario(manager: AccessTokenManager) -> None:
        assert await manager.authorization() == "QQBot T1"
        clock.advance(7000)
        assert await manager.get() == "T1"  # 200 s left: still good
        clock.advance(160)
        assert await manager.get() == "T2"  # inside the refresh margin: a new one
        manager.invalidate()  # e.g. an OpenAPI 401
        assert await manager.get() == "T3"

    with_manager(endpoint, clock, scenario)
    assert endpoint.calls == 3


def test_concurrent_callers_share_one_request(clock: FakeClock) -> None:
    endpoint = TokenEndpoint()

    async def scenario(manager: AccessTokenManager) -> None:
        tokens = await asyncio.gather(*(manager.get() for _ in range(20)))
        assert set(tokens) == {"T1"}

    with_manager(endpoint, clock, scenario)
    assert endpoint.calls == 1


def test_refusal_is_a_platform_error_without_the_secret(clock: FakeClock) -> None:
    endpoint = TokenEndpoint()
    endpoint.refuse = True

    async def scenario(manager: AccessTokenManager) -> None:
        with capture_logs() as logs:
            with pytest.raises(PlatformError) as err:
                await manager.get()
        assert "100016" in err.value.message and SECRET not in err.value.message
        assert SECRET not in repr(logs) and SECRET not in repr(manager)

    with_manager(endpoint, clock, scenario)


def test_unreachable_endpoint_is_a_platform_error(clock: FakeClock) -> None:
    async def main() -> None:
        async with ClientSession() as session:
            manager = AccessTokenManager(APP, SECRET, session, clock=clock,
                                         token_url="http://127.0.0.1:9/token")
            with pytest.raises(PlatformError, match="failed"):
                await manager.get()

    asyncio.run(main())


def test_keep_fresh_retries_a_refusal_and_says_why_until_a_token_comes(
        clock: FakeClock) -> None:
    endpoint = TokenEndpoint()
    endpoint.refuse = True

    async def scenario(manager: AccessTokenManager) -> None:
        assert (manager.obtained, manager.failure) == (False, None)  # not asked yet
        keeper = asyncio.create_task(manager.keep_fresh(first_delay=0.01, max_delay=0.02))
        try:
            while endpoint.calls < 2:  # refused, and asked again
                await asyncio.sleep(0.01)
            assert not manager.obtained
            assert manager.failure is not None and "100016" in manager.failure
            assert SECRET not in manager.failure
            endpoint.refuse = False
            while not manager.obtained:
                await asyncio.sleep(0.01)
            assert manager.failure is None
            calls = endpoint.calls
            await asyncio.sleep(0.05)  # a valid token: the keeper waits for its margin
            assert endpoint.calls == calls
        finally:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)

    with_manager(endpoint, clock, scenario)


def test_keep_fresh_fetches_again_once_the_token_enters_its_margin(clock: FakeClock) -> None:
    endpoint = TokenEndpoint(expires_in="60")  # 60 s, margin 50: due for refresh in 10 s

    async def scenario(manager: AccessTokenManager) -> None:
        keeper = asyncio.create_task(manager.keep_fresh(first_delay=0.01, max_delay=0.02))
        try:
            while not manager.obtained:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            assert endpoint.calls == 1  # still valid: looked at, not fetched
            clock.advance(11)  # in the margin now
            while endpoint.calls < 2:
                await asyncio.sleep(0.01)
            assert await manager.get() == "T2"
        finally:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)

    with_manager(endpoint, clock, scenario)
