"""The console's login through a real socket: anonymous visits keep no state (a flood of them
logs no operator out), wrong tokens are limited per client address, and what a reverse proxy
says (X-Forwarded-For, X-Forwarded-Proto) counts from an ``api.trusted_proxies`` peer only."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from http.cookies import Morsel
from typing import Any

import aiohttp
import pytest

from gensokyo_idmap.api.console.form_tokens import COOKIE as FORM_COOKIE
from gensokyo_idmap.api.console.sessions import COOKIE
from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.logging import configure_logging

from ...conftest import run
from ..conftest import ALICE, APP_ID, BOB, TIMEOUT
from .conftest import Browser, ServeConsole, csrf_of

TOKEN = "console-token-5678"
FLOOD = 1_100  # more than the 1,000 sessions the old code kept
LOCAL_PROXY = ("127.0.0.1/32",)  # the test's client is then a proxy on loopback
ELSEWHERE = ("10.255.0.0/16",)  # proxies exist, but the test's client is none of them


def scenario(serve_console: ServeConsole, body: Callable[[Browser], Awaitable[None]],
             **server: Any) -> None:
    async def main() -> None:
        async with serve_console(**server) as browser:
            await asyncio.wait_for(body(browser), 60)

    run(main())


async def flood(browser: Browser, path: str) -> None:
    """``FLOOD`` cookie-less GETs of ``path``, 20 at a time."""
    async with aiohttp.ClientSession(timeout=TIMEOUT,
                                     cookie_jar=aiohttp.DummyCookieJar()) as anonymous:
        async def one(_: int) -> None:
            async with anonymous.get(browser.base + path, allow_redirects=False) as resp:
                assert resp.status in (200, 303), resp.status
                await resp.read()

        for start in range(0, FLOOD, 20):
            await asyncio.gather(*map(one, range(start, min(start + 20, FLOOD))))


async def log_in(browser: Browser, token: str = TOKEN, **kwargs: Any) -> aiohttp.ClientResponse:
    status, page, _ = await browser.get("/ui/login", **kwargs)
    assert status == 200, page
    _, _, resp = await browser.post("/ui/login", {"csrf": csrf_of(page), "token": token},
                                    allow_redirects=False, **kwargs)
    return resp


async def bind_bob_to(browser: Browser, graph: IdentityGraph, vuin: int) -> None:
    """The bind form through its confirmation, as a browser fills it."""
    csrf = await browser.csrf(f"/ui/identities/{vuin}")
    status, page, _ = await browser.post("/ui/bind", {"csrf": csrf, "key": BOB,
                                                      "vuin": str(vuin), "confirm": "yes"})
    assert status == 200 and "moved" in page, page
    assert graph.lookup(OpenId(APP_ID, BOB)) == vuin


def test_a_flood_of_anonymous_login_pages_logs_no_operator_out(
        serve_console: ServeConsole, graph: IdentityGraph) -> None:
    async def body(operator: Browser) -> None:
        alice = await graph.resolve([OpenId(APP_ID, ALICE)])
        await graph.resolve([OpenId(APP_ID, BOB)])
        assert (await log_in(operator)).status == 303
        await flood(operator, "/ui/login")
        status, page, _ = await operator.get("/ui/", allow_redirects=False)
        assert status == 200 and "Overview" in page  # still logged in
        assert len(operator.server.console.sessions) == 1  # the flood made none
        await bind_bob_to(operator, graph, alice.vuin)  # and its forms work
        async with aiohttp.ClientSession(timeout=TIMEOUT,
                                         cookie_jar=aiohttp.CookieJar(unsafe=True)) as other:
            newcomer = Browser(other, operator.base, operator.server)
            assert (await log_in(newcomer)).status == 303  # the login form still works
            status, page, _ = await newcomer.get("/ui/")
            assert status == 200 and "Overview" in page
        assert len(operator.server.console.sessions) == 2

    scenario(serve_console, body, token=TOKEN)


def test_a_flood_of_visits_by_address_leaves_an_open_form_working(
        serve_console: ServeConsole, graph: IdentityGraph) -> None:
    """Without a token the address admits: the forms' tokens are signed, not kept."""
    async def body(operator: Browser) -> None:
        alice = await graph.resolve([OpenId(APP_ID, ALICE)])
        await graph.resolve([OpenId(APP_ID, BOB)])
        csrf = await operator.csrf(f"/ui/identities/{alice.vuin}")
        await flood(operator, "/ui/")
        status, page, _ = await operator.post("/ui/bind", {
            "csrf": csrf, "key": BOB, "vuin": str(alice.vuin), "confirm": "yes"})
        assert status == 200 and "moved" in page, page
        assert len(operator.server.console.sessions) == 0

    scenario(serve_console, body)


def test_wrong_tokens_are_limited_per_client_address(
        serve_console: ServeConsole, capsys: pytest.CaptureFixture[str]) -> None:
    """Behind a trusted proxy each client its proxy names counts alone. A client refused
    is refused with the right token too (the limit would limit nothing otherwise)."""
    configure_logging("info")
    guesser = {"X-Forwarded-For": "198.51.100.7"}
    neighbour = {"X-Forwarded-For": "198.51.100.8"}

    async def body(browser: Browser) -> None:
        page = (await browser.get("/ui/login", headers=guesser))[1]
        csrf = csrf_of(page)
        for n in range(10):
            status, page, _ = await browser.post("/ui/login", {
                "csrf": csrf, "token": f"guess-{n:04d}"}, headers=guesser)
            assert status == 401 and "wrong token" in page, (n, status)
        for token in ("guess-0010", TOKEN, "guess-0011"):
            status, page, resp = await browser.post("/ui/login", {
                "csrf": csrf, "token": token}, headers=guesser, allow_redirects=False)
            assert status == 429, (token, status)
            assert 1 <= int(resp.headers["Retry-After"]) <= 60
            assert "too many wrong tokens from 198.51.100.7" in page
        status, page, _ = await browser.post("/ui/login", {"csrf": csrf, "token": "guess-n"},
                                             headers=neighbour)
        assert status == 401  # another address is not touched
        status, _, _ = await browser.post("/ui/login", {"csrf": csrf, "token": TOKEN},
                                          headers=neighbour, allow_redirects=False)
        assert status == 303

    scenario(serve_console, body, token=TOKEN, trusted_proxies=LOCAL_PROXY)
    captured = capsys.readouterr()
    logged = captured.out + captured.err
    lockouts = [line for line in logged.splitlines() if "api.token refused" in line]
    assert len(lockouts) == 1, logged  # once, not once per refusal
    assert "198.51.100.7" in lockouts[0]
    assert TOKEN not in logged and "guess-" not in logged


def test_an_untrusted_peer_cannot_choose_the_address_the_limit_counts(
        serve_console: ServeConsole) -> None:
    async def body(browser: Browser) -> None:
        csrf = csrf_of((await browser.get("/ui/login"))[1])
        for n in range(10):
            status, _, _ = await browser.post("/ui/login", {"csrf": csrf, "token": "guess"},
                                              headers={"X-Forwarded-For": f"198.51.100.{n}"})
            assert status == 401
        status, page, _ = await browser.post("/ui/login", {"csrf": csrf, "token": "guess"},
                                             headers={"X-Forwarded-For": "198.51.100.99"})
        assert status == 429 and "from 127.0.0.1" in page

    scenario(serve_console, body, token=TOKEN, trusted_proxies=ELSEWHERE)


async def cookie_of(base: str, path: str, name: str, *, form: dict[str, str] | None = None,
                    headers: dict[str, str]) -> Morsel[str]:
    """The ``name`` cookie an answer sets (read from Set-Cookie itself: a client's jar
    would keep a ``Secure`` one from an http:// URL to itself)."""
    async with aiohttp.ClientSession(timeout=TIMEOUT,
                                     cookie_jar=aiohttp.DummyCookieJar()) as session:
        method = session.get if form is None else session.post
        async with method(base + path, data=form, headers=headers,
                          allow_redirects=False) as resp:
            await resp.read()
            assert name in resp.cookies, (resp.status, resp.headers)
            return resp.cookies[name]


async def secure_flags(browser: Browser, headers: dict[str, str]) -> tuple[bool, bool]:
    """Whether the login page's cookie and the session cookie of a login are ``Secure``."""
    form_cookie = await cookie_of(browser.base, "/ui/login", FORM_COOKIE, headers=headers)
    async with aiohttp.ClientSession(timeout=TIMEOUT,
                                     cookie_jar=aiohttp.DummyCookieJar()) as session:
        async with session.get(browser.base + "/ui/login",
                               headers={**headers, "Cookie": f"{FORM_COOKIE}="
                                        f"{form_cookie.value}"}) as resp:
            csrf = csrf_of(await resp.text())
    session_cookie = await cookie_of(
        browser.base, "/ui/login", COOKIE, form={"csrf": csrf, "token": TOKEN},
        headers={**headers, "Cookie": f"{FORM_COOKIE}={form_cookie.value}"})
    return bool(form_cookie["secure"]), bool(session_cookie["secure"])


def test_cookies_are_secure_when_a_trusted_proxy_says_https(
        serve_console: ServeConsole) -> None:
    https = {"X-Forwarded-Proto": "https"}

    async def trusted(browser: Browser) -> None:
        assert await secure_flags(browser, https) == (True, True)
        assert await secure_flags(browser, {}) == (False, False)
        assert await secure_flags(browser, {"X-Forwarded-Proto": "http"}) == (False, False)

    async def untrusted(browser: Browser) -> None:
        assert await secure_flags(browser, https) == (False, False)  # ignored

    scenario(serve_console, trusted, token=TOKEN, trusted_proxies=LOCAL_PROXY)
    scenario(serve_console, untrusted, token=TOKEN, trusted_proxies=ELSEWHERE)


def test_behind_a_trusted_proxy_the_address_rules_see_the_forwarded_client(
        serve_console: ServeConsole) -> None:
    """Without a token the address admits: through a proxy on loopback, the client it
    names must be allowed itself (the proxy's own address would admit everyone)."""
    async def body(browser: Browser) -> None:
        outside = {"X-Forwarded-For": "198.51.100.7"}
        status, page, _ = await browser.get("/ui/", headers=outside)
        assert status == 403 and "198.51.100.7 is not allowed" in page
        async with browser.session.get(browser.base + "/v1/stats", headers=outside) as resp:
            assert resp.status == 403
        async with browser.session.get(browser.base + "/getid?type=2&id=1",
                                       headers=outside) as resp:
            assert resp.status == 403
        status, _, _ = await browser.get("/ui/")  # the proxy's own request: loopback
        assert status == 200
        status, _, _ = await browser.get("/ui/", headers={"X-Forwarded-For": "127.0.0.1"})
        assert status == 200

    scenario(serve_console, body, trusted_proxies=LOCAL_PROXY)


def test_a_form_token_from_before_a_restart_is_refused(serve_console: ServeConsole) -> None:
    """The signing key is per process: a form opened before a restart asks for a reload."""
    async def body(browser: Browser) -> None:
        csrf = csrf_of((await browser.get("/ui/login"))[1])
        pages = browser.server.console.pages()
        pages.form_tokens = type(pages.form_tokens)()
        status, page, _ = await browser.post("/ui/login", {"csrf": csrf, "token": TOKEN})
        assert status == 403 and re.search(r"reload the page", page)
        assert (await log_in(browser)).status == 303  # a reload mends it

    scenario(serve_console, body, token=TOKEN)
