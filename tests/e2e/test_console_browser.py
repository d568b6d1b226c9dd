"""The console in a real browser: Debian's headless Chromium driven by Playwright, against
``gensokyo-idmap serve`` as a child process between the emulated platform (gateway and
signed webhook deliveries) and a reverse-WS framework.

Screenshots go to ``build/screenshots/console/`` at the top of the checkout (the README's
overview picture is made with the demo running, by ``test_demo_console.py``). Skipped only
where the browser is absent, saying so; ``.ci/run`` installs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from gensokyo_idmap.testing import (
    APP,
    SECRET,
    DaemonProcess,
    EmulatedPlatform,
    RecordingFramework,
    WebhookSender,
    c2c_message,
    daemon_config,
    framework_server,
    free_port,
    group_message,
    running_daemon,
    until,
    ws_url,
)

from ..conftest import run
from .browser import BROWSER, SCREENSHOT_ROOT, chromium, script_errors, shoot

SCREENSHOTS = SCREENSHOT_ROOT / "console"

pytestmark = [BROWSER]

ALICE = "0F1E2D3C4B5A69788796A5B4C3D2E1F0"
BOB = "9F3A0C55E1B24D7A8C6E0F1D2B3A4C5D"
GROUP = "A1B2C3D4E5F60718293A4B5C6D7E8F90"
TOKEN = "browser-console-token"


@dataclass
class Bridge:
    """A running daemon, its platform and webhook sender, and where its console is."""

    platform: EmulatedPlatform
    webhook: WebhookSender
    daemon: DaemonProcess
    console: str
    config: Path
    sent: int = 0

    async def chat(self, count: int) -> None:
        """``count`` messages: group ones through the gateway, private ones by webhook."""
        for _ in range(count):
            self.sent += 1
            n = self.sent
            user = ALICE if n % 2 else BOB
            if n % 3:
                await self.platform.push("GROUP_AT_MESSAGE_CREATE",
                                         group_message(n, group=GROUP, user=user))
            else:
                delivery = await self.webhook.dispatch("C2C_MESSAGE_CREATE",
                                                       c2c_message(n, user=user))
                assert delivery.status == 200, delivery


@asynccontextmanager
async def bridge(workdir: Path, **api: Any) -> AsyncIterator[Bridge]:
    framework = RecordingFramework()
    server = await framework_server(framework.handle)
    api_port, webhook_port = free_port(), free_port()
    try:
        async with EmulatedPlatform() as platform:
            config = daemon_config(workdir / "data", platform=platform,
                                   webhook=f"127.0.0.1:{webhook_port}",
                                   api=f"127.0.0.1:{api_port}",
                                   onebot={"reverse_ws": [ws_url(server)]})
            config["api"].update(api)
            async with running_daemon(config, workdir,
                                      listening=(api_port, webhook_port)) as daemon, \
                    WebhookSender(f"http://127.0.0.1:{webhook_port}/qqbot", APP,
                                  SECRET) as webhook:
                await until(lambda: framework.connections > 0, 20)
                await until(lambda: platform.shards[0].live() is not None, 20,
                            "the daemon's gateway session", alive=daemon.alive)
                yield Bridge(platform, webhook, daemon, f"http://127.0.0.1:{api_port}/ui",
                             workdir / "config.yml")
    finally:
        await server.close()


async def settled(page: Any, live: Bridge, identities: int) -> None:
    """Until the overview counts ``identities`` identities (the events were processed)."""
    await page.goto(live.console + "/")
    await page.wait_for_function(
        "n => Number(document.getElementById('identities-count').textContent) >= n",
        arg=identities)


def number(text: str) -> int:
    return int(text.strip() or 0)


def test_overview_figures_move_while_the_platform_sends(tmp_path: Path) -> None:
    async def main() -> None:
        async with bridge(tmp_path) as live, chromium() as page:
            await live.chat(3)
            await page.goto(live.console + "/")
            total = page.locator("#total-events-in")
            before = number(await total.inner_text())
            session = await page.locator('[data-live="bots.0.gateway.session_id"]').inner_text()
            assert session == live.platform.session_id

            async def keep_chatting() -> None:
                while True:
                    await live.chat(1)
                    await asyncio.sleep(0.2)

            chatter = asyncio.create_task(keep_chatting())
            try:
                # the page's own script refreshes the figures: nothing reloads the page
                await page.wait_for_function(
                    "before => Number(document.getElementById('total-events-in')"
                    ".textContent) >= before + 5", arg=before)
                await page.wait_for_function(
                    "() => document.querySelector('[data-live=\"bots.0.last_webhook.event_type\"]')"
                    ".textContent === 'C2C_MESSAGE_CREATE'")
                await page.wait_for_function(
                    "() => Number(document.getElementById('identities-count').textContent) >= 2")
            finally:
                chatter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await chatter
            assert page.url == live.console + "/"  # the same page, updated in place
            assert await page.locator("#frameworks").inner_text() != ""
            assert "yes" in await page.locator("#frameworks").inner_text()  # connected
            svg = await page.evaluate("fetch('/ui/chart.svg').then(r => r.text())")
            assert svg.startswith("<svg")
            await shoot(page, SCREENSHOTS, "overview")
            assert script_errors(page) == []  # no script error, no CSP refusal

    run(asyncio.wait_for(main(), 120))


def test_search_then_rebind_through_the_form(tmp_path: Path) -> None:
    async def main() -> None:
        async with bridge(tmp_path) as live, chromium() as page:
            await live.chat(6)

            async def vuin_of(query: str) -> int:
                await page.goto(live.console + "/identities")
                await page.fill("#search input[name=q]", query)
                await page.click("#search button")
                await page.wait_for_url("**/ui/identities/*")
                return number(await page.locator("#vuin").inner_text())

            await settled(page, live, identities=2)
            alice = await vuin_of(ALICE)
            assert ALICE in await page.locator("#identities").inner_text()
            assert f"group:{GROUP}" in await page.locator("#last-seen").inner_text() or \
                "c2c" in await page.locator("#last-seen").inner_text()
            await shoot(page, SCREENSHOTS, "identity")
            bob = await vuin_of(f"openid:QQ:{APP}:{BOB}")  # a typed key finds it too
            assert bob != alice

            await page.goto(f"{live.console}/identities/{alice}")
            await page.fill("#rebind input[name=new]", "not-a-number")
            await page.click("#rebind button")
            assert "positive decimal integer" in await page.locator("#error").inner_text()
            await page.fill("#rebind input[name=new]", str(bob))
            await page.click("#rebind button")
            assert ALICE in await page.locator("#what").inner_text() or \
                ALICE in await page.content()
            await shoot(page, SCREENSHOTS, "rebind-confirm")
            await page.click("#confirm button")
            assert await page.locator("#outcome").inner_text() == "moved"
            await shoot(page, SCREENSHOTS, "rebind-done")
            await page.click("#to-vuin")
            shown = await page.locator("#identities").inner_text()
            assert ALICE in shown and BOB in shown
            await page.goto(live.console + "/identities")
            assert "[idmap] bind moved" in await page.locator("#binds").inner_text()
            assert script_errors(page) == []

            proc = await asyncio.create_subprocess_exec(
                str(Path(sys.executable).with_name("gensokyo-idmap")), "--config",
                str(live.config), "--json", "identity", "show", str(bob),
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await proc.communicate()
            assert proc.returncode == 0, err.decode()
            identities = json.loads(out)["identities"]
            assert f"openid:QQ:{APP}:{ALICE}" in identities
            assert f"openid:QQ:{APP}:{BOB}" in identities

    run(asyncio.wait_for(main(), 120))


def test_token_login_csrf_and_the_live_log(tmp_path: Path) -> None:
    async def main() -> None:
        async with bridge(tmp_path, token=TOKEN) as live, chromium() as page:
            await page.goto(live.console + "/")
            assert page.url.endswith("/ui/login")
            await page.fill("input[name=token]", "wrong-token")
            await page.click("#login button")
            assert await page.locator("#error").inner_text() == "wrong token"
            await shoot(page, SCREENSHOTS, "login-refused")
            await page.fill("input[name=token]", TOKEN)
            await page.click("#login button")
            await page.wait_for_url("**/ui/")
            cookies = await page.context.cookies()
            session = next(c for c in cookies if c["name"] == "gsk_console")
            assert session["httpOnly"] and session["sameSite"] == "Strict"

            await live.chat(2)
            await settled(page, live, identities=2)
            await page.goto(live.console + "/identities")
            await page.fill("#search input[name=q]", ALICE)
            await page.click("#search button")
            await page.wait_for_url("**/ui/identities/*")
            # a form without its CSRF token (as another site's page would post it)
            await page.evaluate("document.querySelector('#rebind input[name=csrf]').remove()")
            await page.fill("#rebind input[name=new]", "1")
            await page.click("#rebind button")
            assert "CSRF" in await page.locator("#error").inner_text()

            await page.goto(live.console + "/logs?level=info")
            await live.chat(2)
            await page.wait_for_function(
                "() => document.getElementById('tail').textContent.includes('[qq]')")
            await shoot(page, SCREENSHOTS, "logs")
            await page.select_option("#level", "warning")
            await page.wait_for_url("**/ui/logs?level=warning")
            await asyncio.sleep(1)
            levels = await page.evaluate(
                "[...document.querySelectorAll('#tail .line')].map(e => e.className)")
            assert all("level-info" not in name for name in levels)
            assert TOKEN not in await page.content()

    run(asyncio.wait_for(main(), 120))


async def anonymous_flood(console: str, count: int) -> None:
    """``count`` GETs of the login page without cookies (each one a session, before)."""
    async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar(),
                                     timeout=aiohttp.ClientTimeout(total=30)) as session:
        async def one(_: int) -> None:
            async with session.get(console + "/login") as resp:
                assert resp.status == 200
                await resp.read()

        for start in range(0, count, 20):
            await asyncio.gather(*map(one, range(start, min(start + 20, count))))


async def log_in(page: Any, console: str, token: str) -> None:
    await page.goto(console + "/login")
    await page.fill("input[name=token]", token)
    await page.click("#login button")


def test_login_and_forms_outlast_a_flood_and_wrong_tokens_are_limited(tmp_path: Path) -> None:
    async def main() -> None:
        async with bridge(tmp_path, token=TOKEN) as live, chromium() as page:
            await log_in(page, live.console, TOKEN)
            await page.wait_for_url("**/ui/")
            await live.chat(6)
            await settled(page, live, identities=2)

            await anonymous_flood(live.console, 1_100)

            async def find(query: str) -> int:
                await page.goto(live.console + "/identities")
                assert page.url == live.console + "/identities"  # still logged in
                await page.fill("#search input[name=q]", query)
                await page.click("#search button")
                await page.wait_for_url("**/ui/identities/*")
                return number(await page.locator("#vuin").inner_text())

            bob = await find(BOB)
            await find(ALICE)
            await page.fill("#rebind input[name=new]", str(bob))
            await page.click("#rebind button")
            await page.click("#confirm button")
            assert await page.locator("#outcome").inner_text() == "moved"
            assert script_errors(page) == []

            # another browser: its login form works after the flood too
            context = await page.context.browser.new_context()
            try:
                other = await context.new_page()
                await log_in(other, live.console, TOKEN)
                await other.wait_for_url("**/ui/")
                await other.locator("#identities-count").wait_for()
                await other.click("header form.logout button")
                await other.wait_for_url("**/ui/login")
                for n in range(10):
                    await log_in(other, live.console, f"wrong-{n}")
                    assert await other.locator("#error").inner_text() == "wrong token"
                await log_in(other, live.console, TOKEN)  # refused for now, even the right one
                assert "too many wrong tokens" in await other.locator("#error").inner_text()
                assert other.url.endswith("/ui/login")
                await shoot(other, SCREENSHOTS, "login-limited")
            finally:
                await context.close()

    run(asyncio.wait_for(main(), 120))
