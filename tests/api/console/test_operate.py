"""The console's system page through a real socket: the configuration as the daemon hands it
(no secret), the process figures, what /readyz misses, and a framework's backlog dropped
only after its confirmation page, with the form's CSRF token."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from gensokyo_idmap.api.console.status import FrameworkLink, LinkView

from ...conftest import run
from .conftest import Browser, ServeConsole, csrf_of
from .test_browse import Controls

WHERE = "ws://127.0.0.1:8080/onebot/v11/ws"


class Dropping(Controls):
    def __init__(self) -> None:
        super().__init__()
        self.dropped: list[tuple[int, str]] = []

    async def drop_backlog(self, number: int, name: str) -> int:
        self.dropped.append((number, name))
        return 42


def scenario(serve_console: ServeConsole, body: Any, **server: Any) -> None:
    async def main() -> None:
        async with serve_console(**server) as browser:
            await asyncio.wait_for(body(browser), 30)

    run(main())


def test_the_system_page_shows_config_figures_and_readiness(
        serve_console: ServeConsole) -> None:
    async def body(browser: Browser) -> None:
        status, page, _ = await browser.get("/ui/system")
        assert status == 200, page
        config = re.search(r'<table id="config".*?</table>', page, re.S)
        assert config and "bot.secret" in config.group(0) and "***" in config.group(0)
        assert re.search(r"<code>bot.app_id</code></td><td[^>]*><code>102000001</code></td>"
                         r'<td data-label="from" data-source="file">file<', page)
        assert re.search(r'id="rss">\d+\.\d (KiB|MiB|GiB)<', page)
        assert re.search(r'id="fds">\d+ of \d+<', page)
        assert re.search(r'id="free">[\d.]+ \w+ of [\d.]+ \w+<', page)
        assert "openid-map.db" in page
        assert 'id="ready" class="ok"' in page  # the test's stores are ready

    scenario(serve_console, body, controls=Controls())


def test_a_backlog_is_dropped_after_its_confirmation(serve_console: ServeConsole) -> None:
    controls = Dropping()
    frameworks = (FrameworkLink("reverse_ws", WHERE, False, 7, 5),
                  FrameworkLink("forward_ws", "no connection", False, 0, 0))

    async def body(browser: Browser) -> None:
        status, page, _ = await browser.get("/ui/system")
        backlogs = re.search(r'<table id="backlogs">.*?</table>', page, re.S)
        assert backlogs and backlogs.group(0).count("Drop backlog") == 1  # not forward WS
        token = csrf_of(page)
        status, confirm, _ = await browser.post("/ui/backlog", {
            "csrf": token, "number": "0", "name": WHERE})
        assert status == 200 and 'id="confirm"' in confirm and controls.dropped == []
        assert "7" in confirm and "5" in confirm
        status, refused, _ = await browser.post("/ui/backlog", {
            "number": "0", "name": WHERE, "confirm": "yes"})
        assert status == 403 and "CSRF" in refused and controls.dropped == []
        status, gone, _ = await browser.post("/ui/backlog", {
            "csrf": token, "number": "0", "name": "ws://elsewhere/", "confirm": "yes"})
        assert status == 404 and controls.dropped == []  # the list changed: nothing dropped
        status, done, _ = await browser.post("/ui/backlog", {
            "csrf": token, "number": "0", "name": WHERE, "confirm": "yes"})
        assert status == 200 and 'id="outcome">dropped<' in done and ">42<" in done
        assert controls.dropped == [(0, WHERE)]

    scenario(serve_console, body, controls=controls,
             link=lambda: LinkView(frameworks=frameworks))
