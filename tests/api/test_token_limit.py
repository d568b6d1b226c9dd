"""Wrong Bearer tokens on ``/v1`` and ``/getid`` through a real socket: 10 a minute per
client, then 429 with ``Retry-After`` (the right token too) until the window passes on a
fake clock; another client untouched; one count with the console's login; the lockout
logged once and no token ever."""

from __future__ import annotations

from typing import Any

import pytest

from gensokyo_idmap.api.failure_limit import FailureLimit
from gensokyo_idmap.logging import configure_logging

from ..conftest import FakeClock
from .conftest import ServeApi, scenario

TOKEN = "api-token-s3cret-4242"
LOCAL_PROXY = ("127.0.0.1/32",)  # the test's client is a proxy on loopback: XFF names clients
GUESSER = {"X-Forwarded-For": "198.51.100.7"}
NEIGHBOUR = {"X-Forwarded-For": "198.51.100.8"}


def bearer(token: str, client: dict[str, str]) -> dict[str, str]:
    return {**client, "Authorization": f"Bearer {token}"}


async def call(c: Any, path: str, headers: dict[str, str], **params: str
               ) -> tuple[int, Any, str | None]:
    """(status, JSON body, Retry-After) of one GET."""
    async with c.session.get(c.base + path, headers=headers, params=params or None) as resp:
        return resp.status, await resp.json(), resp.headers.get("Retry-After")


def lockouts(capsys: pytest.CaptureFixture[str]) -> tuple[list[str], str]:
    captured = capsys.readouterr()
    logged = captured.out + captured.err
    return [line for line in logged.splitlines() if "api.token refused" in line], logged


def test_the_eleventh_wrong_bearer_on_v1_is_429_until_the_window_passes(
        serve_api: ServeApi, capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info")
    clock = FakeClock(1000.0)
    limit = FailureLimit(clock=clock)

    async def body(c: Any) -> None:
        for n in range(10):
            status, answer, _ = await call(c, "/v1/stats", bearer(f"guess-{n:04d}", GUESSER))
            assert (status, answer["error"]["code"]) == (401, "unauthorized"), n
            clock.advance(1)
        for token in ("guess-0010", TOKEN):  # while refused, not even the right one
            status, answer, wait = await call(c, "/v1/stats", bearer(token, GUESSER))
            assert (status, answer["error"]["code"]) == (429, "too_many_requests"), token
            assert wait == "50"  # the first failure (at 1000) ages out at 1060; now 1010
            assert "198.51.100.7" in answer["error"]["message"]
        assert (await call(c, "/v1/stats", GUESSER))[0] == 429  # no header: refused alike
        # another client is not touched
        assert (await call(c, "/v1/stats", bearer("guess-n", NEIGHBOUR)))[0] == 401
        assert (await call(c, "/v1/stats", bearer(TOKEN, NEIGHBOUR)))[0] == 200
        clock.advance(50)  # the first failure is a window old: one more try
        assert (await call(c, "/v1/stats", bearer(TOKEN, GUESSER)))[0] == 200
        # the right token forgot the failures: a full ten again
        for n in range(10):
            assert (await call(c, "/v1/stats", bearer(f"again-{n}", GUESSER)))[0] == 401
        assert (await call(c, "/v1/stats", bearer(TOKEN, GUESSER)))[0] == 429

    scenario(serve_api, body, token=TOKEN, trusted_proxies=LOCAL_PROXY, token_failures=limit)
    lines, logged = lockouts(capsys)
    assert len(lines) == 2, logged  # one per lockout, not one per refusal
    assert "198.51.100.7" in lines[0] and "/v1" in lines[0]
    assert TOKEN not in logged and "guess-" not in logged and "again-" not in logged


def test_requests_without_a_token_are_not_guesses(serve_api: ServeApi) -> None:
    """A script that forgot its header (or sent another scheme) is told 401 each time and
    never locked out: it guessed nothing."""
    async def body(c: Any) -> None:
        for n in range(25):
            headers = GUESSER if n % 2 else {**GUESSER, "Authorization": f"Basic x{n}"}
            assert (await call(c, "/v1/stats", headers))[0] == 401
        assert (await call(c, "/v1/stats", bearer(TOKEN, GUESSER)))[0] == 200
        assert len(c.server.token_failures) == 0

    scenario(serve_api, body, token=TOKEN, trusted_proxies=LOCAL_PROXY)


def test_wrong_bearer_tokens_on_getid_count_and_lock_out_a_peer_the_network_refuses(
        serve_api: ServeApi, capsys: pytest.CaptureFixture[str]) -> None:
    """``/getid`` takes a Bearer token from a peer outside ``api.getid_allow``: its wrong
    ones are limited as on ``/v1``; a peer the network admits needs no token and is never
    refused."""
    configure_logging("info")
    clock = FakeClock(1000.0)
    limit = FailureLimit(clock=clock)
    allowed = {"X-Forwarded-For": "203.0.113.5"}

    async def body(c: Any) -> None:
        for n in range(10):
            status, answer, _ = await call(c, "/getid", bearer(f"guess-{n}", GUESSER),
                                           type="1", id="42")
            assert status == 403 and "not allowed" in answer["error"], (n, answer)
        for token in ("guess-x", TOKEN):
            status, answer, wait = await call(c, "/getid", bearer(token, GUESSER),
                                              type="1", id="42")
            assert (status, wait) == (429, "60"), (token, status)
            assert "too many wrong tokens" in answer["error"]
        status, answer, _ = await call(c, "/getid", allowed, type="1", id="42")
        assert status == 200 and "row" in answer
        assert (await call(c, "/getid", bearer(TOKEN, NEIGHBOUR), type="1", id="42"))[0] \
            == 200
        clock.advance(61)
        assert (await call(c, "/getid", bearer(TOKEN, GUESSER), type="1", id="42"))[0] == 200

    scenario(serve_api, body, token=TOKEN, trusted_proxies=LOCAL_PROXY,
             getid_allow=("203.0.113.0/24",), token_failures=limit)
    lines, logged = lockouts(capsys)
    assert len(lines) == 1 and "/getid" in lines[0], logged
    assert TOKEN not in logged and "guess-" not in logged


def test_v1_getid_and_the_console_share_one_count_per_client(serve_api: ServeApi) -> None:
    """Five wrong on ``/v1``, five on ``/getid``: the client is refused everywhere, the
    console's pages (a Bearer header there too) included; a guesser gets 10 in all."""
    async def body(c: Any) -> None:
        for n in range(5):
            assert (await call(c, "/v1/stats", bearer(f"v1-{n}", GUESSER)))[0] == 401
            assert (await call(c, "/getid", bearer(f"getid-{n}", GUESSER), type="1",
                               id="1"))[0] == 403
        assert (await call(c, "/v1/stats", bearer(TOKEN, GUESSER)))[0] == 429
        assert (await call(c, "/getid", bearer(TOKEN, GUESSER), type="1", id="1"))[0] == 429
        async with c.session.get(c.base + "/ui/", headers=bearer(TOKEN, GUESSER),
                                 allow_redirects=False) as resp:
            assert resp.status == 429 and 1 <= int(resp.headers["Retry-After"]) <= 60
        async with c.session.get(c.base + "/ui/", headers=bearer(TOKEN, NEIGHBOUR),
                                 allow_redirects=False) as resp:
            assert resp.status == 200

    scenario(serve_api, body, token=TOKEN, trusted_proxies=LOCAL_PROXY)


def test_wrong_bearer_tokens_on_the_console_pages_count_too(serve_api: ServeApi) -> None:
    """A script's Bearer header on ``/ui/`` is a guess like any other."""
    async def body(c: Any) -> None:
        for n in range(10):
            async with c.session.get(c.base + "/ui/", headers=bearer(f"g{n}", GUESSER),
                                     allow_redirects=False) as resp:
                assert resp.status == 303  # to the login page, as without a token
        assert (await call(c, "/v1/stats", bearer(TOKEN, GUESSER)))[0] == 429

    scenario(serve_api, body, token=TOKEN, trusted_proxies=LOCAL_PROXY)
