"""The console in Chinese and in English in a real browser (headless Chromium, :mod:`.browser`)
against ``gensokyo-idmap serve`` between the emulated platform and a framework (the bridge
of ``test_console_browser``): every page and form in both languages as the browser's own
language picks it (Playwright's ``locale`` sets ``Accept-Language``), the header's switch
sticking across pages, a browser restart and a new login, and moments in the viewer's local time.

The pages in Chinese are written to ``build/screenshots/console-zh-CN/`` at the top of the
checkout on every run.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from ..conftest import run
from .browser import BROWSER, SCREENSHOT_ROOT, chromium, script_errors, shoot
from .test_console_browser import ALICE, BOB, TOKEN, Bridge, bridge, number, settled

SCREENSHOTS = SCREENSHOT_ROOT / "console-zh-CN"
ZONE = "Asia/Shanghai"  # the viewer's zone: UTC+08:00 all year

pytestmark = [BROWSER, pytest.mark.slow]

#: What each page and form says, per language (the catalog's text, as a reader sees it).
SAYS: dict[str, dict[str, str]] = {
    "zh-CN": {"login": "登录", "wrong": "令牌错误", "overview": "概览", "yes": "是",
              "no": "否", "identities": "身份", "set": "身份集合", "bad vuin": "vUIN 必须是正的十进制整数",
              "confirm": "确认改绑", "moved": "已移动", "bind confirm": "确认绑定",
              "messages": "消息", "group": "群", "unknown": "未知或已过期", "logs": "日志",
              "warning": "警告", "csrf": "表单的 CSRF 令牌缺失", "refused": "已拒绝",
              "traffic": "收到的平台事件"},
    "en": {"login": "Log in", "wrong": "wrong token", "overview": "Overview", "yes": "yes",
           "no": "no", "identities": "Identities", "set": "Identity set",
           "bad vuin": "vUIN must be a positive decimal integer", "confirm": "Confirm rebind",
           "moved": "moved", "bind confirm": "Confirm bind", "messages": "Messages",
           "group": "group", "unknown": "unknown or expired", "logs": "Logs",
           "warning": "warning", "csrf": "CSRF token is missing", "refused": "Refused",
           "traffic": "platform events in"},
}
LOCAL = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\+08:00")


async def text(page: Any, selector: str) -> str:
    return str(await page.locator(selector).first.inner_text())


async def lang(page: Any) -> str:
    return str(await page.evaluate("document.documentElement.lang"))


async def every_page(page: Any, live: Bridge, language: str, shots: bool) -> None:
    """Each page and form of the console, read in ``language``."""
    says = SAYS[language]

    async def shot(name: str) -> None:
        if shots:
            await shoot(page, SCREENSHOTS, name)

    # the login page and its form
    await page.goto(live.console + "/")
    assert page.url.endswith("/ui/login") and await lang(page) == language
    assert await text(page, "h1") == says["login"]
    await page.fill("input[name=token]", "wrong-token")
    await page.click("#login button")
    assert await text(page, "#error") == says["wrong"]
    await shot("login-refused")
    await page.fill("input[name=token]", TOKEN)
    await page.click("#login button")
    await page.wait_for_url("**/ui/")

    # the overview, its figures refreshed by the script in the page's language
    await settled(page, live, identities=2)
    assert await text(page, "h1") == says["overview"]
    assert says["traffic"] in await text(page, "#overview")
    await page.wait_for_function("() => document.body.hasAttribute('data-refreshed')")
    assert await text(page, "#ready") in (says["yes"], says["no"])
    assert says["yes"] in await text(page, "#frameworks")  # connected, written by the script
    webhook_time = page.locator('[data-live-time="bots.0.last_webhook.at"]')
    await page.wait_for_function(
        "() => /UTC[+]08:00$/.test(document.querySelector("
        "'[data-live-time=\"bots.0.last_webhook.at\"]').textContent)")
    assert LOCAL.fullmatch((await webhook_time.inner_text()).strip())
    await shot("overview")

    # identities: the search form, a vUIN's page, its moments in local time
    await page.click('header nav a[href="/ui/identities"]')
    assert await text(page, "h1") == says["identities"]
    await shot("identities")
    await page.fill("#search input[name=q]", ALICE)
    await page.click("#search button")
    await page.wait_for_url("**/ui/identities/*")
    alice = number(await text(page, "#vuin"))
    assert await text(page, "section h2") == says["set"]
    seen = await page.locator("#last-seen time").all_inner_texts()
    assert seen and all(LOCAL.fullmatch(t.strip()) for t in seen), seen
    await shot("identity")
    await page.goto(live.console + "/identities")
    await page.fill("#search input[name=q]", BOB)
    await page.click("#search button")
    await page.wait_for_url("**/ui/identities/*")
    bob = number(await text(page, "#vuin"))

    # the bind form's first step: what will change, then cancel
    await page.fill("#bind input[name=key]", "rUIN-QQ-0-2870338968")
    await page.click("#bind button")
    assert await text(page, "h1") == says["bind confirm"]
    await shot("bind-confirm")
    await page.click("#confirm a")
    await page.wait_for_url("**/ui/identities")

    # the rebind form: a bad value, then the confirmation and the result
    await page.goto(f"{live.console}/identities/{alice}")
    await page.fill("#rebind input[name=new]", "not-a-number")
    await page.click("#rebind button")
    assert says["bad vuin"] in await text(page, "#error")
    await shot("rebind-refused")
    await page.fill("#rebind input[name=new]", str(bob))
    await page.click("#rebind button")
    assert await text(page, "h1") == says["confirm"]
    assert ALICE in await page.content()
    await shot("rebind-confirm")
    await page.click("#confirm button")
    assert await text(page, "#outcome") == says["moved"]
    await shot("rebind-done")

    # messages: a real id found, with its moments in local time; an unknown one
    await page.click('header nav a[href="/ui/messages"]')
    assert await text(page, "h1") == says["messages"]
    await page.fill("#message-search input[name=q]", "ROBOT1.0_gw1")
    await page.click("#message-search button")
    record = await text(page, "#record")
    assert says["group"] in record and "ROBOT1.0_gw1" in record
    moments = await page.locator("#record time").all_inner_texts()
    assert len(moments) == 2 and all(LOCAL.fullmatch(t.strip()) for t in moments), moments
    await shot("message")
    await page.click('header nav a[href="/ui/messages"]')  # the message's own page: back
    await page.fill("#message-search input[name=q]", "nope")
    await page.click("#message-search button")
    assert says["unknown"] in await text(page, "#error")

    # logs: the level names in the page's language, the live tail
    await page.click('header nav a[href="/ui/logs"]')
    assert await text(page, "h1") == says["logs"]
    assert says["warning"] in await page.locator("#level").inner_text()
    await live.chat(1)
    await page.wait_for_function(
        "() => document.getElementById('tail').textContent.includes('[qq]')")
    await shot("logs")

    # a form without its CSRF token: refused, in the page's language
    await page.goto(f"{live.console}/identities/{alice}")
    await page.evaluate("document.querySelector('#rebind input[name=csrf]').remove()")
    await page.fill("#rebind input[name=new]", "1")
    await page.click("#rebind button")
    assert await text(page, "h1") == says["refused"]
    assert says["csrf"] in await text(page, "#error")
    await shot("refused")
    assert script_errors(page) == []


@pytest.mark.parametrize("language", ["zh-CN", "en"])
def test_every_page_and_form_in_the_browsers_language(tmp_path: Path, language: str) -> None:
    async def main() -> None:
        async with bridge(tmp_path, token=TOKEN) as live, \
                chromium(locale=language, timezone_id=ZONE) as page:
            await live.chat(6)
            await every_page(page, live, language, shots=language == "zh-CN")

    run(asyncio.wait_for(main(), 180))
    if language == "zh-CN":
        assert (SCREENSHOTS / "overview.png").stat().st_size > 0


def test_the_switch_sticks_across_pages_tabs_and_logins(tmp_path: Path) -> None:
    async def main() -> None:
        async with bridge(tmp_path, token=TOKEN) as live, \
                chromium(locale="en-US", timezone_id=ZONE) as page:
            await page.goto(live.console + "/login")
            assert await lang(page) == "en"
            # switched on the login page, before any login
            await page.click('#language button[value="zh-CN"]')
            await page.wait_for_function("() => document.documentElement.lang === 'zh-CN'")
            assert page.url.endswith("/ui/login") and await text(page, "h1") == "登录"
            await page.fill("input[name=token]", TOKEN)
            await page.click("#login button")
            await page.wait_for_url("**/ui/")
            assert await lang(page) == "zh-CN" and await text(page, "h1") == "概览"
            for path, heading in (("/ui/identities", "身份"), ("/ui/messages", "消息"),
                                  ("/ui/logs", "日志"), ("/ui/", "概览")):
                await page.click(f'header nav a[href="{path}"]')
                await page.wait_for_url("**" + path)
                assert await lang(page) == "zh-CN" and await text(page, "h1") == heading
            cookie = next(c for c in await page.context.cookies()
                          if c["name"] == "gsk_console_lang")
            assert cookie["value"] == "zh-CN" and cookie["httpOnly"]
            # kept a year, not for the browser's session only
            assert cookie["sameSite"] == "Strict" and cookie["expires"] > 0
            # the browser started again with what it keeps (its cookies), its language
            # still English
            later = await page.context.browser.new_context(
                storage_state=await page.context.storage_state(), locale="en-US")
            try:
                other = await later.new_page()
                await other.goto(live.console + "/messages")
                assert await lang(other) == "zh-CN" and await text(other, "h1") == "消息"
            finally:
                await later.close()
            # out and in again: the choice is the browser's, not the session's
            await page.click("header form.logout button")
            await page.wait_for_url("**/ui/login")
            assert await lang(page) == "zh-CN"
            await page.fill("input[name=token]", TOKEN)
            await page.click("#login button")
            await page.wait_for_url("**/ui/")
            assert await lang(page) == "zh-CN"
            # and back, on a page with a query
            await page.goto(live.console + "/logs?level=warning")
            await page.click('#language button[value="en"]')
            await page.wait_for_function("() => document.documentElement.lang === 'en'")
            assert page.url.endswith("/ui/logs?level=warning")
            assert await text(page, "h1") == "Logs"
            await page.click('header nav a[href="/ui/identities"]')
            assert await lang(page) == "en" and await text(page, "h1") == "Identities"
            assert script_errors(page) == []

    run(asyncio.wait_for(main(), 120))
