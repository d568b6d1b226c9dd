"""The console's overview in a real browser (headless Chromium, :mod:`.browser`) while
``gensokyo-idmap demo`` runs as a process on examples/config.yml, its listeners moved to
free ports, with a reverse-WS framework connected that answers ``ping`` with ``pong`` as the
smallest bots do: the simulated users' events and the bot's sends make the figures move on
the page without a reload.

The overview's screenshot is written to ``build/screenshots/demo/overview.png`` at the top
of the checkout, and as a Chinese browser sees it to ``overview-zh-CN.png``; the READMEs'
pictures (``docs/console-overview.png``, ``docs/console-overview.zh-CN.png``) are copies. The
demo runs in the test's directory with its default data dir, so the page names the stores
``data-demo/…`` as it does after ``make demo``.
"""

from __future__ import annotations

import asyncio
import re
import signal
from pathlib import Path
from typing import Any

from gensokyo_idmap.testing import (
    DaemonProcess,
    RecordingFramework,
    framework_server,
    until,
    ws_url,
)

from ..conftest import run
from .browser import BROWSER, SCREENSHOT_ROOT, chromium, script_errors, shoot
from .test_demo import example_on_free_ports

pytestmark = [BROWSER]

SCREENSHOTS = SCREENSHOT_ROOT / "demo"
EVENTS = 20  # events in the page must count, after it was opened, without a reload


class PongBot(RecordingFramework):
    """Answers every ``ping`` (after an @ of the bot or not) with ``pong`` in its chat."""

    def __init__(self) -> None:
        super().__init__()
        self.sends: set[asyncio.Task[None]] = set()

    def on_frame(self, frame: dict[str, Any]) -> None:
        text = re.sub(r"^\[CQ:at,qq=\d+\]", "", str(frame.get("raw_message", ""))).strip()
        if frame.get("post_type") != "message" or text != "ping" or self.socket is None:
            return
        params = {key: frame[key] for key in ("message_type", "group_id", "user_id")
                  if key in frame}
        task = asyncio.create_task(self.socket.send_json(
            {"action": "send_msg", "params": {**params, "message": "pong"}, "echo": "pong"}))
        self.sends.add(task)
        task.add_done_callback(self.sends.discard)


def test_the_overview_moves_while_the_demo_users_chat(tmp_path: Path) -> None:
    framework = PongBot()

    async def main() -> Path:
        server = await framework_server(framework.handle)
        config, api = example_on_free_ports(tmp_path, ws_url(server))
        demo = DaemonProcess(config, tmp_path, command=("demo", "--seed", "7", "--pace", "0.2"),
                             cwd=tmp_path)
        try:
            await demo.start()
            await demo.until_listening(api, 20)
            await until(lambda: framework.connections > 0, 20, "the demo's reverse WS",
                        alive=demo.alive)
            console = f"http://127.0.0.1:{api}/ui/"
            async with chromium() as page:
                await page.goto(console)
                before = int(await page.locator("#total-events-in").inner_text() or 0)
                # the page's own script refreshes the figures: nothing reloads the page
                await page.wait_for_function(
                    "n => Number(document.getElementById('total-events-in').textContent) >= n",
                    arg=before + EVENTS)
                await page.wait_for_function(  # the bot's pongs were sent
                    "() => Number(document.getElementById('total-actions').textContent) >= 1")
                await page.wait_for_function(
                    "() => document.querySelector('[data-live=\"bots.0.last_webhook.event_type\"]')"
                    ".textContent.trim() !== ''")
                await page.wait_for_function(
                    "() => Number(document.getElementById('identities-count').textContent) >= 2")
                assert page.url == console  # the same page, updated in place
                assert "yes" in await page.locator("#frameworks").inner_text()  # connected
                content = await page.content()
                assert "data-demo/openid-map.db" in content
                assert str(tmp_path) not in content  # nothing of this machine's test paths
                # the chart drawn anew once a whole 10 s step is in it, as the page's script
                # does every 10 s (for the picture: more than the point of the first seconds)
                await page.wait_for_function(
                    "() => Number(document.querySelector('[data-live=uptime_seconds]')"
                    ".textContent) >= 12", timeout=30_000)
                await page.evaluate("() => new Promise(done => { const chart = document"
                                    ".getElementById('chart'); chart.onload = done; "
                                    "chart.src = '/ui/chart.svg?at=' + Date.now(); })")
                shot = await shoot(page, SCREENSHOTS, "overview")
                assert script_errors(page) == []  # no script error, no CSP refusal
                # the same overview for a browser whose language is Chinese
                zh = await page.context.browser.new_page(
                    locale="zh-CN", viewport={"width": 1280, "height": 1000})
                await zh.goto(console)
                await zh.wait_for_function("() => document.body.hasAttribute('data-refreshed')")
                assert await zh.evaluate("document.documentElement.lang") == "zh-CN"
                assert await zh.locator("h1").inner_text() == "概览"
                await shoot(zh, SCREENSHOTS, "overview-zh-CN")
            assert await demo.stop(signal.SIGINT) == 0, demo.tail()  # Ctrl-C
            said = demo.output.read_text("utf-8").splitlines()
            assert any(line.endswith(" bot: pong") for line in said), said[-20:]  # delivered
            return shot
        finally:
            await demo.kill()
            await server.close()

    shot = run(asyncio.wait_for(main(), 120))
    assert shot.stat().st_size > 0
    print(f"overview screenshot: {shot}")
