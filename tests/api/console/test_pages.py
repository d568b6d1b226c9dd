"""Every console page through a real socket: access, sessions, CSRF, the forms' two steps,
bad input shown and nothing changed, the headers every answer carries."""

from __future__ import annotations

import asyncio
import json
import re
from http.cookies import Morsel
from pathlib import Path
from typing import Any

import pytest
import structlog
from aiohttp import web
from yarl import URL

from gensokyo_idmap.api.console.form_tokens import COOKIE as FORM_COOKIE
from gensokyo_idmap.api.console.pages import CSP
from gensokyo_idmap.api.console.sessions import COOKIE
from gensokyo_idmap.api.console.status import FrameworkLink, GatewayLink, LinkView, WebhookEvent
from gensokyo_idmap.identity import OpenId, RUin
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.logging import configure_logging
from gensokyo_idmap.logtail import TAIL
from gensokyo_idmap.readiness import PlatformReadiness
from gensokyo_idmap.runtime.msgid import MsgContext, MsgIdMap
from gensokyo_idmap.bridge.outbox import Outbox
from gensokyo_idmap.link_status import LinkWatch
from gensokyo_idmap.onebot.reverse_ws import ReverseWsClient
from gensokyo_idmap.store.lmdb.outbox import LmdbOutboxStore
from gensokyo_idmap.testing import framework_server, until

from ...conftest import run
from ..conftest import ALICE, APP_ID, BOB, GROUP
from .conftest import Browser, ServeConsole, csrf_of, non_loopback_address

TOKEN = "console-token-1234"


@pytest.fixture
def tail_logging() -> None:
    """Logging as the daemon sets it up (lines reach the tail), before the graph is made
    (it binds its logger once)."""
    configure_logging("debug")


def scenario(serve_console: ServeConsole, body: Any, **server: Any) -> None:
    async def main() -> None:
        async with serve_console(**server) as browser:
            await asyncio.wait_for(body(browser), 30)

    run(main())


async def _two_vuins(graph: IdentityGraph) -> tuple[int, int]:
    alice = await graph.resolve([OpenId(APP_ID, ALICE)], scene=f"group:{GROUP}")
    bob = await graph.resolve([OpenId(APP_ID, BOB)])
    return alice.vuin, bob.vuin


def test_every_page_answers_with_the_security_headers(serve_console: ServeConsole,
                                                      graph: IdentityGraph) -> None:
    async def body(browser: Browser) -> None:
        alice, _ = await _two_vuins(graph)
        for path in ("/ui/", "/ui/identities", f"/ui/identities/{alice}", "/ui/messages",
                     "/ui/logs", "/ui/overview.json", "/ui/chart.svg"):
            status, page, resp = await browser.get(path)
            assert status == 200, (path, page)
            assert resp.headers["Content-Security-Policy"] == CSP
            assert resp.headers["X-Content-Type-Options"] == "nosniff"
            if resp.content_type == "text/html":
                assert "<script>" not in page and "style=" not in page, path
                assert 'src="/ui/static/console.js"' in page
        status, script, resp = await browser.get("/ui/static/console.js")
        assert status == 200 and "EventSource" in script
        status, _, resp = await browser.get("/ui/static/console.css")
        assert status == 200 and resp.content_type == "text/css"

    scenario(serve_console, body)


def test_the_console_cookies_are_httponly_and_samesite_strict(
        serve_console: ServeConsole) -> None:
    def check(cookie: Morsel[str]) -> None:
        assert cookie["httponly"] is True and cookie["samesite"] == "Strict"
        assert cookie["path"] == "/ui/" and not cookie["secure"]  # plain HTTP here

    async def by_address(browser: Browser) -> None:
        _, _, resp = await browser.get("/ui/")
        check(resp.cookies[FORM_COOKIE])
        assert COOKIE not in resp.cookies  # no session without a login

    async def by_token(browser: Browser) -> None:
        status, page, resp = await browser.get("/ui/login")
        check(resp.cookies[FORM_COOKIE])
        _, _, resp = await browser.post("/ui/login", {"csrf": csrf_of(page), "token": TOKEN},
                                        allow_redirects=False)
        check(resp.cookies[COOKIE])

    scenario(serve_console, by_address)
    scenario(serve_console, by_token, token=TOKEN)


def test_overview_shows_stores_link_frameworks_and_counts(serve_console: ServeConsole,
                                                          graph: IdentityGraph) -> None:
    view = LinkView(gateway=GatewayLink("sess-42", 17, 2, 1, 0), webhook=True,
                    last_webhook=WebhookEvent("GROUP_AT_MESSAGE_CREATE", 1_700_000_000.0),
                    frameworks=(FrameworkLink("reverse_ws", "ws://127.0.0.1:8080/ws", True,
                                              3, 1),))

    async def body(browser: Browser) -> None:
        await _two_vuins(graph)
        status, page, _ = await browser.get("/ui/")
        assert status == 200
        for text in ("sess-42", "GROUP_AT_MESSAGE_CREATE", "ws://127.0.0.1:8080/ws",
                     "Per second, last hour", "No migration"):
            assert text in page, text
        assert re.search(r'id="identities-count">2<', page)
        status, data, _ = await browser.get("/ui/overview.json")
        overview = json.loads(data)
        assert overview["link"]["gateway"]["seq"] == 17
        assert overview["frameworks"][0]["owed"] == 3
        assert overview["stores"]["openid_map"]["identities"] == 2
        assert overview["stores"]["openid_map"]["map"]["used"] > 0
        assert set(overview["totals"]) == {"events in", "events out", "actions"}
        status, svg, resp = await browser.get("/ui/chart.svg")
        assert resp.content_type == "image/svg+xml" and svg.startswith("<svg")

    scenario(serve_console, body, link=lambda: view)


def test_overview_names_a_framework_that_refuses_our_access_token(
        serve_console: ServeConsole, tmp_path: Path) -> None:
    """Issue 33.9: a reverse-WS framework answering 403 to the daemon's token, seen through
    the daemon's own link watch (a real client, a real outbox.db): the overview says the
    framework refused our access token, on the page and in its JSON, with the URL and
    never the token; once the framework takes the connection, the problem is gone."""
    refusing = [True]

    async def framework(request: web.Request) -> web.StreamResponse:
        if refusing[0]:
            return web.json_response({"message": "wrong access token"}, status=403)
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for _ in ws:
            pass
        return ws

    async def main() -> None:
        server = await framework_server(framework)
        with LmdbOutboxStore(tmp_path / "outbox.db") as store:
            watch = LinkWatch(Outbox(store))
            client = ReverseWsClient(f"ws://127.0.0.1:{server.port}/ws", 10001,
                                     access_token="tok-Rz5", reconnect_interval=0.01)
            watch.clients = [client]
            client.start()
            try:
                async with serve_console(link=watch) as browser:
                    await until(lambda: client.refused is not None, 10, "the refusal")
                    status, page, _ = await browser.get("/ui/")
                    assert status == 200
                    row = re.search(r"<tr><td>reverse_ws</td>.*?</tr>", page, re.S)
                    assert row is not None, page
                    assert f"ws://127.0.0.1:{server.port}/ws" in row.group()
                    assert ("the framework refused our access token (HTTP 403)"
                            in row.group()), row.group()
                    overview = json.loads((await browser.get("/ui/overview.json"))[1])
                    [shown] = overview["frameworks"]
                    assert shown["connected"] is False
                    assert shown["problem"] == "the framework refused our access token (HTTP 403)"
                    # in Chinese, on the page and for its script; the JSON's problem stays
                    zh = {"Accept-Language": "zh-CN"}
                    status, zh_page, _ = await browser.get("/ui/", headers=zh)
                    assert "框架拒绝了我们的访问令牌（HTTP 403）" in zh_page
                    [zh_shown] = json.loads((await browser.get("/ui/overview.json",
                                                               headers=zh))[1])["frameworks"]
                    assert zh_shown["problem"] == shown["problem"]
                    assert zh_shown["problem_text"] == "框架拒绝了我们的访问令牌（HTTP 403）"
                    assert "tok-Rz5" not in page + json.dumps(overview)
                    refusing[0] = False
                    await until(lambda: client.connected.is_set(), 10, "the connection")
                    overview = json.loads((await browser.get("/ui/overview.json"))[1])
                    assert overview["frameworks"][0]["problem"] is None
                    assert overview["frameworks"][0]["connected"] is True
            finally:
                await client.close()
                await server.close()

    run(asyncio.wait_for(main(), 30))


def test_overview_shows_readiness_as_readyz_answers(serve_console: ServeConsole) -> None:
    platform = [PlatformReadiness(app_id=True, secret=False, webhook=True)]

    async def body(browser: Browser) -> None:
        status, page, _ = await browser.get("/ui/")
        assert re.search(r'id="ready"[^>]*>no<', page)
        assert "bot.secret not set" in page
        overview = json.loads((await browser.get("/ui/overview.json"))[1])
        assert overview["readiness"]["ready"] is False
        assert overview["readiness"]["missing"] == (await browser.server.missing())
        platform[0] = PlatformReadiness(app_id=True, secret=True, token_obtained=True,
                                        webhook=True)
        status, page, _ = await browser.get("/ui/")
        assert re.search(r'id="ready"[^>]*>yes<', page) and "bot.secret" not in page
        overview = json.loads((await browser.get("/ui/overview.json"))[1])
        assert overview["readiness"] == {"ready": True, "missing": []}

    scenario(serve_console, body, link=lambda: LinkView(webhook=True, platform=platform[0]))


def test_errors_of_the_last_hour_come_from_the_log(serve_console: ServeConsole,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info")

    async def body(browser: Browser) -> None:
        before = json.loads((await browser.get("/ui/overview.json"))[1])["problems"]["errors"]
        structlog.get_logger("t").error("[test] console sees this", url="ws://u:pw@h/")
        overview = json.loads((await browser.get("/ui/overview.json"))[1])
        assert overview["problems"]["errors"] == before + 1
        latest = overview["problems"]["latest"][-1]
        assert "[test] console sees this" in latest and "pw" not in latest

    scenario(serve_console, body)


def test_search_takes_every_input_form(serve_console: ServeConsole,
                                       graph: IdentityGraph) -> None:
    async def body(browser: Browser) -> None:
        alice, _ = await _two_vuins(graph)
        for query in (str(alice), ALICE, f"openid:QQ:{APP_ID}:{ALICE}"):
            status, _, resp = await browser.get("/ui/identities", params={"q": query},
                                                allow_redirects=False)
            assert status == 303 and resp.headers["Location"] == f"/ui/identities/{alice}", query
        status, page, _ = await browser.get(f"/ui/identities/{alice}")
        assert ALICE in page and f"group:{GROUP}" in page
        status, page, _ = await browser.get("/ui/identities", params={"q": "99999999"})
        assert status == 404 and 'id="error"' in page
        status, page, _ = await browser.get("/ui/identities", params={"q": "-5"})
        assert status == 400 and "without a sign" in page

    scenario(serve_console, body)


def test_ruin_text_finds_its_vuin(serve_console: ServeConsole, graph: IdentityGraph) -> None:
    async def body(browser: Browser) -> None:
        alice, _ = await _two_vuins(graph)
        ruin = RUin("QQ", 0, "2870338968")
        await graph.bind(ruin, alice)
        status, _, resp = await browser.get("/ui/identities", params={"q": ruin.text},
                                            allow_redirects=False)
        assert status == 303 and resp.headers["Location"] == f"/ui/identities/{alice}"

    scenario(serve_console, body)


def test_rebind_needs_a_confirmation_then_moves_the_set(tail_logging: None,
                                                        serve_console: ServeConsole,
                                                        graph: IdentityGraph) -> None:
    async def body(browser: Browser) -> None:
        alice, bob = await _two_vuins(graph)
        csrf = await browser.csrf(f"/ui/identities/{alice}")
        status, page, _ = await browser.post("/ui/rebind", {"csrf": csrf, "old": str(alice),
                                                            "new": str(bob)})
        assert status == 200 and "Confirm rebind" in page and ALICE in page
        assert graph.lookup(OpenId(APP_ID, ALICE)) == alice  # nothing written yet
        status, page, _ = await browser.post("/ui/rebind", {
            "csrf": csrf_of(page), "old": str(alice), "new": str(bob), "confirm": "yes"})
        assert status == 200 and 'id="outcome">moved<' in page
        assert graph.lookup(OpenId(APP_ID, ALICE)) == bob
        status, page, _ = await browser.get(f"/ui/identities/{bob}")
        assert ALICE in page and BOB in page
        status, page, _ = await browser.get("/ui/identities")
        assert "[idmap] bind moved" in page  # the recent history, from the log

    scenario(serve_console, body)


def test_bind_moves_one_key_after_confirmation(serve_console: ServeConsole,
                                               graph: IdentityGraph) -> None:
    async def body(browser: Browser) -> None:
        alice, bob = await _two_vuins(graph)
        csrf = await browser.csrf(f"/ui/identities/{bob}")
        form = {"csrf": csrf, "key": ALICE, "vuin": str(bob)}
        status, page, _ = await browser.post("/ui/bind", form)
        assert "Confirm bind" in page and str(alice) in page
        assert graph.lookup(OpenId(APP_ID, ALICE)) == alice
        status, page, _ = await browser.post("/ui/bind", {**form, "confirm": "yes"})
        assert status == 200 and "moved" in page
        assert graph.lookup(OpenId(APP_ID, ALICE)) == bob

    scenario(serve_console, body)


def test_bad_input_is_shown_and_changes_nothing(serve_console: ServeConsole,
                                                graph: IdentityGraph) -> None:
    async def body(browser: Browser) -> None:
        alice, bob = await _two_vuins(graph)
        with graph.store.read() as view:
            before = view.counts()
        csrf = await browser.csrf(f"/ui/identities/{alice}")
        cases = [("/ui/rebind", {"old": str(alice), "new": "abc", "confirm": "yes"}, 400,
                  "new: vUIN must be a positive decimal integer"),
                 ("/ui/rebind", {"old": str(alice), "new": "0"}, 400, "between 1 and"),
                 ("/ui/bind", {"vuin": str(alice), "key": "12345", "confirm": "yes"}, 400,
                  "digits name a vUIN"),
                 ("/ui/bind", {"vuin": str(alice), "key": " ", "confirm": "yes"}, 400,
                  "is empty"),
                 ("/ui/rebind", {"old": "987654", "new": str(alice)}, 404, "not known")]
        for path, form, status_wanted, message in cases:
            status, page, _ = await browser.post(path, {"csrf": csrf, **form})
            assert status == status_wanted, (form, page)
            assert 'id="error"' in page and message in page, (form, page)
        with graph.store.read() as view:
            assert view.counts() == before
        assert graph.lookup(OpenId(APP_ID, ALICE)) == alice

    scenario(serve_console, body)


def test_a_form_without_its_csrf_token_is_refused(serve_console: ServeConsole,
                                                  graph: IdentityGraph) -> None:
    async def body(browser: Browser) -> None:
        alice, bob = await _two_vuins(graph)
        await browser.csrf(f"/ui/identities/{alice}")
        for form in ({}, {"csrf": ""}, {"csrf": "forged"}):
            status, page, _ = await browser.post("/ui/rebind", {
                **form, "old": str(alice), "new": str(bob), "confirm": "yes"})
            assert status == 403 and "CSRF" in page
        assert graph.lookup(OpenId(APP_ID, ALICE)) == alice

    scenario(serve_console, body)


def test_another_sessions_csrf_token_does_not_pass(serve_console: ServeConsole,
                                                   graph: IdentityGraph) -> None:
    async def body(browser: Browser) -> None:
        alice, bob = await _two_vuins(graph)
        theirs = await browser.csrf(f"/ui/identities/{alice}")
        browser.session.cookie_jar.clear()
        await browser.csrf(f"/ui/identities/{alice}")  # a new session, its own token
        status, _, _ = await browser.post("/ui/rebind", {
            "csrf": theirs, "old": str(alice), "new": str(bob), "confirm": "yes"})
        assert status == 403
        assert graph.lookup(OpenId(APP_ID, ALICE)) == alice

    scenario(serve_console, body)


def test_with_a_token_every_page_needs_the_login(serve_console: ServeConsole,
                                                 graph: IdentityGraph) -> None:
    async def body(browser: Browser) -> None:
        alice, bob = await _two_vuins(graph)
        for path in ("/ui/", "/ui/identities", "/ui/messages", "/ui/logs",
                     "/ui/overview.json", "/ui/logs/stream"):
            status, _, resp = await browser.get(path, allow_redirects=False)
            assert status == 303 and resp.headers["Location"] == "/ui/login", path
            assert resp.headers["Content-Security-Policy"] == CSP
        status, page, _ = await browser.post("/ui/rebind", {"old": str(alice),
                                                            "new": str(bob)})
        assert status == 401
        status, page, _ = await browser.get("/ui/login")
        csrf = csrf_of(page)
        status, page, _ = await browser.post("/ui/login", {"csrf": csrf, "token": "wrong"})
        assert status == 401 and "wrong token" in page
        status, _, resp = await browser.get("/ui/", allow_redirects=False)
        assert status == 303  # still not in
        status, page, _ = await browser.post("/ui/login", {"token": TOKEN})
        assert status == 403 and "CSRF" in page  # the login form needs its token too
        # an id planted in the browser before the login is worth nothing after it
        browser.session.cookie_jar.update_cookies({COOKIE: "planted"}, URL(browser.base + "/ui/"))
        status, _, resp = await browser.post("/ui/login", {"csrf": csrf, "token": TOKEN},
                                             allow_redirects=False)
        assert status == 303 and resp.headers["Location"] == "/ui/"
        new_cookie = browser.session.cookie_jar.filter_cookies(URL(browser.base + "/ui/"))[COOKIE]
        assert new_cookie.value != "planted" and len(browser.server.console.sessions) == 1
        status, page, _ = await browser.get("/ui/")
        assert status == 200 and "Overview" in page
        status, _, resp = await browser.post("/ui/logout", {"csrf": csrf_of(page)},
                                             allow_redirects=False)
        assert status == 303
        status, _, _ = await browser.get("/ui/", allow_redirects=False)
        assert status == 303

    scenario(serve_console, body, token=TOKEN)


def test_a_bearer_header_opens_the_console_too(serve_console: ServeConsole) -> None:
    async def body(browser: Browser) -> None:
        for _ in range(3):
            status, _, resp = await browser.get("/ui/overview.json",
                                                headers={"Authorization": f"Bearer {TOKEN}"})
            assert status == 200 and COOKIE not in resp.cookies
        assert len(browser.server.console.sessions) == 0  # none kept for a script
        status, _, _ = await browser.get("/ui/overview.json",
                                         headers={"Authorization": "Bearer nope"},
                                         allow_redirects=False)
        assert status == 303

    scenario(serve_console, body, token=TOKEN)


def test_refused_from_a_non_loopback_address_without_the_token(
        serve_console: ServeConsole, graph: IdentityGraph) -> None:
    address = non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address to connect from")

    async def open_console(browser: Browser) -> None:
        alice, bob = await _two_vuins(graph)
        for path in ("/ui/", "/ui/identities", "/ui/overview.json", "/ui/logs/stream"):
            status, page, _ = await browser.get(path)
            assert status == 403 and "is not allowed" in page, path
        status, _, _ = await browser.post("/ui/rebind", {"old": str(alice), "new": str(bob),
                                                         "confirm": "yes"})
        assert status == 403
        assert graph.lookup(OpenId(APP_ID, ALICE)) == alice

    scenario(serve_console, open_console, host=address)

    async def with_token(browser: Browser) -> None:
        status, page, _ = await browser.get("/ui/")
        assert "Log in" in page
        status, _, _ = await browser.post("/ui/login", {"csrf": csrf_of(page),
                                                        "token": TOKEN})
        assert status == 200
        status, page, _ = await browser.get("/ui/")
        assert status == 200 and "Overview" in page

    scenario(serve_console, with_token, host=address, token=TOKEN)


def test_messages_by_virtual_or_real_id(serve_console: ServeConsole, msgids: MsgIdMap) -> None:
    async def body(browser: Browser) -> None:
        virtual = await msgids.store_real("REAL-MSG-1", MsgContext(APP_ID, "group", GROUP))
        for query in (str(virtual), "REAL-MSG-1"):
            status, page, _ = await browser.get("/ui/messages", params={"q": query})
            assert status == 200 and "REAL-MSG-1" in page and GROUP in page, query
        status, page, _ = await browser.get("/ui/messages", params={"q": "nope"})
        assert status == 404 and "unknown or expired" in page
        status, page, _ = await browser.get("/ui/messages", params={"q": "0"})
        assert status == 400 and "integer from 1" in page

    scenario(serve_console, body)


def test_log_stream_sends_lines_at_the_level_asked(serve_console: ServeConsole,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("debug")
    log = structlog.get_logger("t")

    async def read_events(browser: Browser, level: str, want: str) -> list[dict[str, Any]]:
        seen: list[dict[str, Any]] = []
        async with browser.session.get(browser.base + "/ui/logs/stream",
                                       params={"level": level}) as resp:
            assert resp.status == 200 and resp.content_type == "text/event-stream"
            async for raw in resp.content:
                line = raw.decode().strip()
                if line.startswith("data: "):
                    seen.append(json.loads(line[6:]))
                    if want in seen[-1]["text"]:
                        return seen
        raise AssertionError("stream ended")

    async def body(browser: Browser) -> None:
        log.info("[test] plain line", token="hunter2")
        log.warning("[test] warned line", url="ws://user:pass@host/")
        lines = await asyncio.wait_for(read_events(browser, "warning", "warned line"), 10)
        assert all(line["level"] in ("warning", "error", "critical") for line in lines)
        assert "pass@" not in lines[-1]["text"] and "***" in lines[-1]["text"]
        lines = await asyncio.wait_for(read_events(browser, "info", "plain line"), 10)
        assert "hunter2" not in lines[-1]["text"]
        status, page, _ = await browser.get("/ui/logs/stream", params={"level": "loud"})
        assert status == 400

    assert TAIL is not None
    scenario(serve_console, body)


def test_an_open_log_stream_ends_when_the_listener_stops(
        graph: IdentityGraph, msgids: MsgIdMap, identity_db_path: Any,
        msgid_db_path: Any) -> None:
    """A browser left on the Logs page must not hold the daemon's stop: the stream ends at
    the listener's shutdown, not at aiohttp's shutdown timeout (here a minute)."""
    import aiohttp
    from aiohttp import web

    from gensokyo_idmap.api.server import ApiServer
    from gensokyo_idmap.api.settings import ApiSettings

    async def main() -> None:
        server = ApiServer(graph, msgids, ApiSettings(
            app_id=APP_ID, identity_path=identity_db_path, msgid_path=msgid_db_path))
        runner = web.AppRunner(server.application(), access_log=None, shutdown_timeout=60)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/ui/logs/stream") as resp:
                assert resp.status == 200
                stopping = asyncio.create_task(runner.cleanup())
                async for _ in resp.content:
                    pass  # until the server ends the stream
                await asyncio.wait_for(stopping, 20)

    run(asyncio.wait_for(main(), 30))
