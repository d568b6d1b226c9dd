"""The console's pages in the visitor's language, through a real socket: picked by
``Accept-Language``, changed by the header's switch (a form with its CSRF token) and kept in
a cookie; the messages made in Python (errors, the login's refusals, the confirmation's
text) in the same language; moments as ``<time datetime>`` in UTC."""

from __future__ import annotations

import html
import re
from typing import Any

from yarl import URL

from gensokyo_idmap.api.console import language
from gensokyo_idmap.api.console.pages import CSP
from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.runtime.msgid import MsgContext, MsgIdMap

from ..conftest import ALICE, APP_ID, GROUP
from .conftest import Browser, ServeConsole, csrf_of
from .test_pages import TOKEN, scenario

ZH = {"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"}
EN = {"Accept-Language": "en-US,en;q=0.9"}
CJK = re.compile(r"[\u4e00-\u9fff]")


def html_lang(page: str) -> str:
    found = re.search(r'<html lang="([^"]+)"', page)
    assert found, page[:300]
    return found.group(1)


def error_of(page: str) -> str:
    found = re.search(r'id="error">([^<]*)<', page)
    assert found, page
    return html.unescape(found.group(1))


async def switch(browser: Browser, to: str, page: str, next_page: str,
                 **kwargs: Any) -> tuple[int, str, Any]:
    return await browser.post("/ui/language", {"csrf": csrf_of(page), "lang": to,
                                               "next": next_page}, allow_redirects=False,
                              **kwargs)


def test_accept_language_picks_the_pages_language(serve_console: ServeConsole,
                                                   graph: IdentityGraph) -> None:
    async def body(browser: Browser) -> None:
        alice = (await graph.resolve([OpenId(APP_ID, ALICE)], scene=f"group:{GROUP}")).vuin
        for path in ("/ui/", "/ui/identities", f"/ui/identities/{alice}", "/ui/messages",
                     "/ui/logs"):
            status, page, _ = await browser.get(path, headers=ZH)
            assert status == 200 and html_lang(page) == "zh-CN", path
            assert "概览" in page and "身份" in page, path
            status, page, _ = await browser.get(path, headers=EN)
            assert html_lang(page) == "en" and "Overview" in page and not CJK.search(
                page.replace("简体中文", "")), path
        _, page, _ = await browser.get("/ui/")  # no header at all: English
        assert html_lang(page) == "en"
        _, page, _ = await browser.get("/ui/", headers={"Accept-Language": "fr-FR, de;q=0.5"})
        assert html_lang(page) == "en"
        _, page, _ = await browser.get("/ui/", headers={"Accept-Language": "fr, zh-TW;q=0.4"})
        assert html_lang(page) == "zh-CN"

    scenario(serve_console, body)


def test_the_switch_sticks_across_pages_and_over_the_header(serve_console: ServeConsole
                                                            ) -> None:
    async def body(browser: Browser) -> None:
        status, page, _ = await browser.get("/ui/messages?q=", headers=EN)
        status, _, resp = await switch(browser, "zh-CN", page, "/ui/messages?q=", headers=EN)
        assert status == 303 and resp.headers["Location"] == "/ui/messages?q="
        assert resp.headers["Content-Security-Policy"] == CSP
        cookie = resp.cookies[language.COOKIE]
        assert cookie.value == "zh-CN" and cookie["httponly"] and cookie["samesite"] == "Strict"
        assert cookie["path"] == "/ui/" and int(cookie["max-age"]) >= 30 * 24 * 3600
        for path in ("/ui/", "/ui/identities", "/ui/logs"):
            _, page, _ = await browser.get(path, headers=EN)  # the choice beats the header
            assert html_lang(page) == "zh-CN", path
        status, page, _ = await browser.get("/ui/", headers=ZH)
        status, _, resp = await switch(browser, "en", page, "/ui/logs", headers=ZH)
        assert status == 303 and resp.headers["Location"] == "/ui/logs"
        _, page, _ = await browser.get("/ui/", headers=ZH)
        assert html_lang(page) == "en"

    scenario(serve_console, body)


def test_the_switch_is_a_form_with_its_csrf_token(serve_console: ServeConsole) -> None:
    async def body(browser: Browser) -> None:
        status, page, _ = await browser.get("/ui/", headers=ZH)
        form = re.search(r'<form method="post" action="/ui/language"[^>]*>(.*?)</form>', page,
                         re.DOTALL)
        assert form and 'name="csrf"' in form.group(1) and 'name="next" value="/ui/"' in (
            form.group(1))
        assert 'value="en"' in form.group(1) and 'value="zh-CN"' in form.group(1)
        for forged in ({}, {"csrf": "forged"}):
            status, refused, resp = await browser.post(
                "/ui/language", {**forged, "lang": "zh-CN", "next": "/ui/"}, headers=ZH,
                allow_redirects=False)
            assert status == 403 and "CSRF" in refused and language.COOKIE not in resp.cookies
        _, page, _ = await browser.get("/ui/")
        assert html_lang(page) == "en"  # nothing was kept

    scenario(serve_console, body)


def test_the_switch_refuses_an_unknown_language_and_leaves_no_other_site(
        serve_console: ServeConsole) -> None:
    async def body(browser: Browser) -> None:
        _, page, _ = await browser.get("/ui/")
        status, refused, resp = await switch(browser, "fr", page, "/ui/")
        assert status == 400 and "lang: must be one of en, zh-CN" in error_of(refused)
        assert language.COOKIE not in resp.cookies
        for elsewhere in ("https://example.com/", "//example.com/ui/", "/ui//example.com",
                          "/v1/stats", "/ui/\\example.com", "", "/ui/a b"):
            status, _, resp = await switch(browser, "zh-CN", page, elsewhere)
            assert status == 303 and resp.headers["Location"] == "/ui/", elsewhere

    scenario(serve_console, body)


def test_the_login_page_switches_before_the_login(serve_console: ServeConsole) -> None:
    async def body(browser: Browser) -> None:
        status, page, _ = await browser.get("/ui/login")
        assert html_lang(page) == "en" and "Log in" in page
        status, _, resp = await switch(browser, "zh-CN", page, "/ui/login")
        assert status == 303 and resp.headers["Location"] == "/ui/login"
        status, page, _ = await browser.get("/ui/login")
        assert html_lang(page) == "zh-CN" and "登录" in page
        status, page, _ = await browser.post("/ui/login", {"csrf": csrf_of(page),
                                                           "token": "wrong"})
        assert status == 401 and error_of(page) == "令牌错误"
        status, page, _ = await browser.post("/ui/login", {"csrf": csrf_of(page),
                                                           "token": TOKEN})
        assert status == 200 and html_lang(page) == "zh-CN" and "概览" in page

    scenario(serve_console, body, token=TOKEN)


def test_errors_made_in_python_are_in_the_pages_language(serve_console: ServeConsole,
                                                         graph: IdentityGraph) -> None:
    async def body(browser: Browser) -> None:
        alice = (await graph.resolve([OpenId(APP_ID, ALICE)])).vuin
        _, page, _ = await browser.get(f"/ui/identities/{alice}", headers=ZH)
        csrf = csrf_of(page)
        cases = [("/ui/rebind", {"old": str(alice), "new": "abc"}, 400,
                  "改绑被拒绝：新 vUIN：vUIN 必须是正的十进制整数（收到的是 'abc'）"),
                 ("/ui/rebind", {"old": "987654", "new": str(alice)}, 404,
                  "改绑被拒绝：未知的 vUIN 987654"),
                 ("/ui/bind", {"vuin": str(alice), "key": "12345"}, 400,
                  "绑定被拒绝：身份：纯数字表示 vUIN；这里请填写身份（类型键、rUIN-… 或 OpenID）"
                  "（收到的是 '12345'）"),
                 ("/ui/bind", {"vuin": str(alice), "key": " "}, 400,
                  "绑定被拒绝：身份：为空（收到的是 ' '）")]
        for path, form, wanted_status, wanted in cases:
            status, page, _ = await browser.post(path, {"csrf": csrf, **form}, headers=ZH)
            assert status == wanted_status and error_of(page) == wanted, (form, page)
        status, page, _ = await browser.get("/ui/identities", params={"q": "-5"}, headers=ZH)
        assert status == 400 and error_of(page) == (
            "身份：vUIN 必须是不带正负号的正整数（收到的是 '-5'）")
        status, page, _ = await browser.get("/ui/identities", params={"q": "99999999"},
                                            headers=ZH)
        assert status == 404 and error_of(page) == "99999999：没有对应的 vUIN"
        status, page, _ = await browser.get("/ui/messages", params={"q": "nope"}, headers=ZH)
        assert status == 404 and error_of(page) == "平台消息 ID 'nope' 未知或已过期"
        status, page, _ = await browser.get("/ui/messages", params={"q": "0"}, headers=ZH)
        assert status == 400 and error_of(page) == (
            "虚拟 ID：必须是 1 到 2147483647 之间的整数（收到的是 '0'）")
        status, page, _ = await browser.post("/ui/rebind", {"old": "1", "new": "2"},
                                             headers=ZH)
        assert status == 403 and error_of(page).startswith("表单的 CSRF 令牌缺失")
        # the same, in English, as the domain says them
        status, page, _ = await browser.post("/ui/rebind", {"csrf": csrf, "old": str(alice),
                                                            "new": "abc"}, headers=EN)
        assert error_of(page) == ("rebind refused: new: vUIN must be a positive decimal "
                                  "integer (got 'abc')")

    scenario(serve_console, body)


def test_the_confirmation_and_the_result_in_chinese(serve_console: ServeConsole,
                                                    graph: IdentityGraph) -> None:
    async def body(browser: Browser) -> None:
        alice = (await graph.resolve([OpenId(APP_ID, ALICE)])).vuin
        bob = (await graph.resolve([OpenId(APP_ID, "B0B")])).vuin
        _, page, _ = await browser.get(f"/ui/identities/{alice}", headers=ZH)
        status, page, _ = await browser.post("/ui/rebind", {
            "csrf": csrf_of(page), "old": str(alice), "new": str(bob)}, headers=ZH)
        assert status == 200 and "确认改绑" in page
        assert (f"即将把 vUIN {alice} 的身份集合移到 vUIN {bob}（{alice} 保留为别名）。"
                in page)
        assert "将移动的身份" in page and ALICE in page
        status, page, _ = await browser.post("/ui/rebind", {
            "csrf": csrf_of(page), "old": str(alice), "new": str(bob), "confirm": "yes"},
            headers=ZH)
        assert status == 200 and re.search(r'id="outcome">已移动<', page)
        assert "已移动的身份" in page

    scenario(serve_console, body)


def test_moments_are_utc_time_elements(serve_console: ServeConsole, msgids: MsgIdMap,
                                       graph: IdentityGraph) -> None:
    async def body(browser: Browser) -> None:
        await msgids.store_real("REAL-MSG-1", MsgContext(APP_ID, "group", GROUP))
        status, page, _ = await browser.get("/ui/messages", params={"q": "REAL-MSG-1"},
                                            headers=ZH)
        moments = re.findall(r'<time datetime="([^"]+)">([^<]+)</time>', page)
        assert len(moments) == 2, page
        for iso, shown in moments:
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", iso)
            assert shown == iso.replace("T", " ").replace("Z", " UTC")
        assert ">群</a>" in page  # the chat's kind in the page's language

    scenario(serve_console, body)


def test_a_cookie_naming_no_language_of_ours_is_passed_over(serve_console: ServeConsole
                                                            ) -> None:
    async def body(browser: Browser) -> None:
        browser.session.cookie_jar.update_cookies({language.COOKIE: "xx"},
                                                  URL(browser.base + "/ui/"))
        _, page, _ = await browser.get("/ui/", headers=ZH)
        assert html_lang(page) == "zh-CN"

    scenario(serve_console, body)


def test_the_chart_speaks_the_pages_language(serve_console: ServeConsole) -> None:
    async def body(browser: Browser) -> None:
        status, svg, resp = await browser.get("/ui/chart.svg", headers=ZH)
        assert status == 200 and resp.content_type == "image/svg+xml"
        for words in ("收到的平台事件", "发出的 OneBot 事件", "已应答的 OneBot 动作", "现在",
                      "-60 分钟", "/秒"):
            assert words in svg, words
        _, svg, _ = await browser.get("/ui/chart.svg", headers=EN)
        assert "platform events in" in svg and ">now<" in svg and "-60 min" in svg
        assert not CJK.search(svg)

    scenario(serve_console, body)
