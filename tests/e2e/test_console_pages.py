"""Every console page and form in a real browser (headless Chromium, :mod:`.browser`) while
``gensokyo-idmap demo`` runs as a process: the simulated users chat through the emulated
platform, a bot connected over reverse WS answers their ``ping``, and a second reverse-WS
framework that never comes up is owed every event (its backlog is what the system page
drops). Also every page at a phone's width (390 px): nothing wider than the screen.

Both in English and in Chinese (the browser's locale: its ``Accept-Language``). Screenshots
of each page go to ``build/screenshots/pages/`` at the top of the checkout (``<page>.png``,
``<page>-phone.png`` at 390 px), the Chinese ones to ``build/screenshots/pages-zh-CN/``.
"""

from __future__ import annotations

import asyncio
import re
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from gensokyo_idmap.testing import DaemonProcess, framework_server, free_port, until, ws_url

from ..conftest import run
from .browser import BROWSER, SCREENSHOT_ROOT, chromium, script_errors, shoot
from .test_demo import example_on_free_ports
from .test_demo_console import PongBot

PHONE = {"width": 390, "height": 844}
LANGUAGES = ["en", "zh-CN"]
#: the headings the test looks for, per language
NOT_FOUND = {"en": "Not found", "zh-CN": "未找到"}


def screenshots(language: str) -> Path:
    return SCREENSHOT_ROOT / ("pages" if language == "en" else f"pages-{language}")

pytestmark = [BROWSER]


@dataclass
class Demo:
    process: DaemonProcess
    console: str
    away: str  # the reverse WS that never answers

    def said(self) -> list[str]:
        return self.process.output.read_text("utf-8").splitlines()


@asynccontextmanager
async def demo(workdir: Path) -> AsyncIterator[Demo]:
    framework = PongBot()
    server = await framework_server(framework.handle)
    away = f"ws://127.0.0.1:{free_port()}/onebot/v11/ws"
    config, api = example_on_free_ports(workdir, ws_url(server))
    settings = yaml.safe_load(config.read_text("utf-8"))
    settings["onebot"]["reverse_ws"].append(away)
    config.write_text(yaml.safe_dump(settings), "utf-8")
    process = DaemonProcess(config, workdir, command=("demo", "--seed", "11", "--pace", "0.2"),
                            cwd=workdir)
    try:
        await process.start()
        await process.until_listening(api, 20)
        await until(lambda: framework.connections > 0, 20, "the demo's reverse WS",
                    alive=process.alive)
        yield Demo(process, f"http://127.0.0.1:{api}/ui", away)
        assert await process.stop(signal.SIGINT) == 0, process.tail()
    finally:
        await process.kill()
        await server.close()


async def enough_traffic(page: Any, live: Demo) -> None:
    """Until the demo's users have spoken in groups and in private (chats and messages to
    list)."""
    await page.goto(live.console + "/")
    await page.wait_for_function(
        "() => Number(document.getElementById('identities-count').textContent) >= 6")
    await until(lambda: sum(" bot: pong" in line for line in live.said()) >= 1, 30,
                "the bot's first pong", alive=live.process.alive)


async def rows(page: Any, table: str) -> int:
    return int(await page.locator(f"#{table} tbody tr").count())


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_page_and_form_while_the_demo_runs(tmp_path: Path, language: str) -> None:
    SCREENSHOTS = screenshots(language)

    async def main() -> None:
        async with demo(tmp_path) as live, chromium(locale=language) as page:
            await enough_traffic(page, live)
            await shoot(page, SCREENSHOTS, "overview")

            # identities: the list, its filter, a vUIN's page, the search, a bind
            await page.goto(live.console + "/identities")
            assert await rows(page, "identity-list") >= 6
            first_key = (await page.locator("#identity-list tbody tr code").first
                         .inner_text()).strip()
            await shoot(page, SCREENSHOTS, "identities")
            await page.fill("#filter input[name=f]", first_key[-12:].lower())
            await page.click("#filter button")
            await page.wait_for_url("**/ui/identities?f=*")
            listed = await page.locator("#identity-list tbody tr").all_inner_texts()
            # the person, and those seen in its chat if it is a group
            assert listed and all(first_key[-12:] in row for row in listed)
            await page.click("#identity-list tbody tr a")
            await page.wait_for_url("**/ui/identities/*")
            vuin = int(await page.locator("#vuin").inner_text())
            assert first_key in await page.locator("#identities").inner_text()
            await shoot(page, SCREENSHOTS, "identity")
            await page.goto(live.console + "/identities")
            await page.fill("#search input[name=q]", first_key)
            await page.click("#search button")
            await page.wait_for_url(f"**/ui/identities/{vuin}")
            await page.fill("#bind input[name=key]", "rUIN-QQ-0-2870338968")
            await page.click("#bind button")
            await shoot(page, SCREENSHOTS, "bind-confirm")
            await page.click("#confirm button")
            assert await page.locator("#outcome").get_attribute("data-outcome") == "bound"
            await shoot(page, SCREENSHOTS, "bind-done")

            # chats: the list, a group's page, a test message through the platform
            await page.goto(live.console + "/chats")
            assert await rows(page, "chat-list") == 3  # the demo's three groups
            assert await page.locator("#chat-list tbody tr a[href*=':group:']").count() == 3
            await shoot(page, SCREENSHOTS, "chats")
            await page.click("#chat-list tbody tr a")
            await page.wait_for_url("**/ui/chats/*")
            assert int(await page.locator("#member-count").inner_text()) >= 1
            await page.fill("#send input[name=text]", "hello from the console")
            await page.click("#send button")
            assert await page.locator("#sent").get_attribute("class") == "ok", \
                await page.locator("#sent").inner_text()
            assert await page.locator("#sent a").count() == 1  # the message sent
            await shoot(page, SCREENSHOTS, "chat")
            await until(lambda: any(line.endswith(" bot: hello from the console")
                                    for line in live.said()), 10,
                        "the test message at the emulated platform", alive=live.process.alive)

            # messages: the list, its filter, a message's page, the search
            await page.goto(live.console + "/messages")
            assert await rows(page, "message-list") >= 5
            await shoot(page, SCREENSHOTS, "messages")
            await page.fill("#filter input[name=f]", "ping")
            await page.click("#filter button")
            await page.wait_for_url("**/ui/messages?f=ping")
            texts = await page.locator("#message-list td.text").all_inner_texts()
            assert texts and all("ping" in text for text in texts)
            await page.click("#message-list tbody tr a")
            await page.wait_for_url("**/ui/messages/*")
            assert await page.locator("#chat-vuin").count() == 1
            assert "ping" in await page.locator("#text").inner_text()
            shown = await page.locator("main").inner_text()
            assert not re.search(r"\b[0-9A-F]{32}\b", shown)  # no OpenID: the chat's vUIN
            vid = await page.locator("#vid").inner_text()
            await shoot(page, SCREENSHOTS, "message")
            await page.goto(live.console + "/messages")
            await page.fill("#message-search input[name=q]", vid)
            await page.click("#message-search button")
            await page.wait_for_url(f"**/ui/messages/{vid}")

            # system: configuration, figures, and the away framework's backlog dropped
            await page.goto(live.console + "/system")
            config = await page.locator("#config").inner_text()
            assert "bot.secret" in config and "***" in config
            assert re.search(r"\d", await page.locator("#rss").inner_text())
            backlog = page.locator("#backlogs tr", has_text=live.away.split("//")[1])
            assert int(await backlog.locator("td").nth(3).inner_text()) > 0
            await shoot(page, SCREENSHOTS, "system")
            await backlog.locator("button").click()
            await shoot(page, SCREENSHOTS, "drop-confirm")
            await page.click("#confirm button")
            assert await page.locator("#outcome").get_attribute("data-outcome") == "dropped"
            assert int(await page.locator("#result dd[data-name=dropped]").inner_text()) > 0
            await shoot(page, SCREENSHOTS, "drop-done")

            await page.goto(live.console + "/logs")
            await page.wait_for_function(
                "() => document.getElementById('tail').textContent.includes('[message]')")
            await shoot(page, SCREENSHOTS, "logs")
            response = await page.goto(live.console + "/no-such-page")
            assert response.status == 404
            assert await page.locator("h1").inner_text() == NOT_FOUND[language]
            assert await page.locator("header nav a").count() >= 6
            await shoot(page, SCREENSHOTS, "not-found")
            assert script_errors(page) == []  # no script error, no CSP refusal

    run(asyncio.wait_for(main(), 180))


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_page_fits_a_phone(tmp_path: Path, language: str) -> None:
    SCREENSHOTS = screenshots(language)

    async def main() -> None:
        async with demo(tmp_path) as live, chromium(locale=language) as page:
            await page.set_viewport_size(PHONE)
            await enough_traffic(page, live)
            await page.goto(live.console + "/chats")
            chat = await page.locator("#chat-list tbody tr a").first.get_attribute("href")
            await page.goto(live.console + "/messages")
            message = await page.locator("#message-list tbody tr a").first.get_attribute("href")
            await page.goto(live.console + "/identities")
            vuin = await page.locator("#identity-list tbody tr a").first.get_attribute("href")
            pages = {"overview": "/ui/", "identities": "/ui/identities", "identity": vuin,
                     "chats": "/ui/chats", "chat": chat, "messages": "/ui/messages",
                     "message": message, "system": "/ui/system", "logs": "/ui/logs",
                     "not-found": "/ui/no-such-page"}
            base = live.console.removesuffix("/ui")
            for name, path in pages.items():
                await page.goto(base + path)
                wide = await page.evaluate(
                    "() => [document.documentElement.scrollWidth, window.innerWidth]")
                assert wide[0] <= wide[1] == PHONE["width"], (name, wide)
                await shoot(page, SCREENSHOTS, f"{name}-phone")
            assert script_errors(page) == []

    run(asyncio.wait_for(main(), 180))
