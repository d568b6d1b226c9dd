"""Pages of other sites against ``gensokyo-idmap serve``, in a real browser (Debian's
headless Chromium driven by Playwright): what a page the operator opens can do to the
identity API, the console, the OneBot HTTP API and the forward WebSocket on loopback,
none of them with a token.

Chromium resolves ``*.test`` names to 127.0.0.1 (``--host-resolver-rules``), so a page can
be on another site while everything stays on loopback, and a DNS rebinding is a page served
at ``http://rebind.test:<daemon's port>/`` (Playwright answers that one document, as the
attacker's server would before the name moved) whose own requests then reach the daemon.
Chromium's Local Network Access checks stop such a page by themselves (it came from no
address, and asks one on loopback); the rebinding test switches them off, as Firefox, Safari,
older Chromiums and an operator who clicks "allow" do not have them, so what it sees is what
the daemon does.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from gensokyo_idmap.testing import (
    DaemonProcess,
    EmulatedPlatform,
    daemon_config,
    free_port,
    running_daemon,
)

from ..conftest import run
from .browser import BROWSER, chromium

pytestmark = [BROWSER]

ALICE = "0F1E2D3C4B5A69788796A5B4C3D2E1F0"
BOB = "9F3A0C55E1B24D7A8C6E0F1D2B3A4C5D"
STRANGER = "5A5A5A5A5A5A5A5A5A5A5A5A5A5A5A5A"
TOKEN = "guard-console-token"
#: Every name the browser looks up goes to loopback.
RESOLVE_TO_LOOPBACK = "--host-resolver-rules=MAP *.test 127.0.0.1"
NO_LOCAL_NETWORK_CHECKS = "--disable-features=LocalNetworkAccessChecks"
TIMEOUT = aiohttp.ClientTimeout(total=10)


@dataclass
class Live:
    daemon: DaemonProcess
    platform: EmulatedPlatform
    api: int
    http_api: int
    forward_ws: int

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """The identity API as a script on this machine calls it (Host 127.0.0.1)."""
        async with aiohttp.ClientSession(timeout=TIMEOUT) as http, http.request(
                method, f"http://127.0.0.1:{self.api}{path}", json=body) as resp:
            return resp.status, await resp.json(content_type=None)

    def log(self) -> str:
        return self.daemon.log.read_text(errors="replace")


@asynccontextmanager
async def guarded(workdir: Path, **api: Any) -> AsyncIterator[Live]:
    """The daemon with its API, OneBot HTTP API and forward WS on loopback, no tokens."""
    ports = free_port(), free_port(), free_port()
    async with EmulatedPlatform() as platform:
        config = daemon_config(workdir / "data", platform=platform,
                               api=f"127.0.0.1:{ports[0]}",
                               onebot={"http_api": f"127.0.0.1:{ports[1]}",
                                       "forward_ws": f"127.0.0.1:{ports[2]}"})
        config["api"].update(api)
        async with running_daemon(config, workdir, listening=ports) as daemon:
            yield Live(daemon, platform, *ports)


@asynccontextmanager
async def site(html: str) -> AsyncIterator[int]:
    """Another site's web server on loopback, serving ``html`` at ``/``: its port."""
    async def page(_request: web.Request) -> web.Response:
        return web.Response(text=html, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield port
    finally:
        await runner.cleanup()


def attack_page(script: str) -> str:
    """A page whose script's result (a JSON-able value) ends up in ``window.done``."""
    return ("<!doctype html><title>cat pictures</title><script>\n"
            "const image = src => new Promise(done => {\n"
            "  const i = new Image(); i.onload = i.onerror = () => done(); i.src = src; });\n"
            "const socket = url => new Promise(done => {\n"
            "  const ws = new WebSocket(url); const t = setTimeout(() => done('timeout'), 5000);\n"
            "  ws.onmessage = () => { clearTimeout(t); ws.close(); done('message'); };\n"
            "  ws.onerror = () => { clearTimeout(t); done('refused'); }; });\n"
            f"window.done = (async () => {{ {script} }})();\n</script>")


def serving(html: str) -> Any:
    """A Playwright route handler answering ``html`` (the attacker's server, before its
    name moved to the daemon's address)."""
    async def answer(route: Any) -> None:
        await route.fulfill(status=200, content_type="text/html", body=html)

    return answer


async def outcome(page: Any) -> Any:
    await page.wait_for_function("() => window.done !== undefined")
    return await page.evaluate("window.done")


def stored(answer: tuple[int, Any]) -> tuple[int, Any]:
    """/v1/stats' figures of the stores and the bots: not the process's memory, which moves
    by itself."""
    status, stats = answer
    return status, {name: value for name, value in stats.items() if name != "memory"}


def test_another_sites_page_writes_nothing(tmp_path: Path) -> None:
    """The issue's rebind (no-cors, text/plain), a /getid write and OneBot sends by image
    and by form, and a WebSocket to the forward WS, from a page on another site: refused
    by the daemon (its log says so), and nothing changed."""
    async def main() -> None:
        async with guarded(tmp_path) as live:
            status, alice = await live.call("POST", "/v1/resolve", {"keys": [ALICE]})
            assert status == 200, alice
            bob = (await live.call("POST", "/v1/resolve", {"keys": [BOB]}))[1]["vuin"]
            before = stored(await live.call("GET", "/v1/stats"))
            sends = len(live.platform.api_requests("POST"))
            api = f"http://127.0.0.1:{live.api}"
            onebot = f"http://127.0.0.1:{live.http_api}"
            script = f"""
              await fetch('{api}/v1/rebind', {{method: 'POST', mode: 'no-cors',
                headers: {{'Content-Type': 'text/plain'}},
                body: '{{"old":{alice["vuin"]},"new":{bob}}}'}});
              await image('{api}/getid?type=1&id={STRANGER}');
              await image('{onebot}/send_private_msg?user_id={alice["vuin"]}&message=img');
              await fetch('{onebot}/send_private_msg', {{method: 'POST', mode: 'no-cors',
                body: new URLSearchParams({{user_id: '{alice["vuin"]}', message: 'form'}})}});
              return {{ws: await socket('ws://127.0.0.1:{live.forward_ws}/')}};"""
            async with site(attack_page(script)) as port, \
                    chromium(RESOLVE_TO_LOOPBACK) as page:
                await page.goto(f"http://cats.test:{port}/")
                answers = await outcome(page)

            shown = (await live.call("GET", f"/v1/vuins/{alice['vuin']}"))[1]
            assert shown["vuin"] == alice["vuin"] and shown["aliases"] == [], shown
            assert stored(await live.call("GET", "/v1/stats")) == before  # no /getid identity
            assert len(live.platform.api_requests("POST")) == sends  # nothing sent
            log = live.log()
            assert "bind moved" not in log
            refused = [line for line in log.splitlines() if "request refused" in line]
            assert sum("[api]" in line for line in refused) == 2, refused
            assert sum("[onebot]" in line for line in refused) == 3, refused
            assert answers == {"ws": "refused"}  # no socket opened, no event read

    run(asyncio.wait_for(main(), 120))


def test_a_rebound_name_reads_and_writes_nothing(tmp_path: Path) -> None:
    """A page served at ``rebind.test:<port>`` of each listener (then resolving to the
    daemon) reads its own origin: every answer is 421, and the graph is unchanged."""
    async def main() -> None:
        async with guarded(tmp_path) as live, \
                chromium(RESOLVE_TO_LOOPBACK, NO_LOCAL_NETWORK_CHECKS) as page:
            alice = (await live.call("POST", "/v1/resolve", {"keys": [ALICE]}))[1]["vuin"]
            bob = (await live.call("POST", "/v1/resolve", {"keys": [BOB]}))[1]["vuin"]
            pages = {
                live.api: f"""
                  const got = async (path, init) => (await fetch(path, init)).status;
                  return [await got('/v1/stats'), await got('/ui/'),
                          await got('/getid?type=2&id=1'),
                          await got('/v1/rebind', {{method: 'POST',
                            headers: {{'Content-Type': 'application/json'}},
                            body: JSON.stringify({{old: {alice}, new: {bob}}})}})];""",
                live.http_api: """
                  return [(await fetch('/get_login_info')).status,
                          (await fetch('/get_status', {method: 'POST',
                            headers: {'Content-Type': 'application/json'},
                            body: '{}'})).status];""",
                live.forward_ws: f"""
                  return [await socket('ws://rebind.test:{live.forward_ws}/')];""",
            }
            for port, script in pages.items():
                root = f"http://rebind.test:{port}/"

                await page.route(lambda url, root=root: url == root, serving(attack_page(script)))
                await page.goto(root)
                answers = await outcome(page)
                assert answers in ([421, 421, 421, 421], [421, 421], ["refused"]), (
                    port, answers)
            answer = await page.goto(f"http://rebind.test:{live.api}/ui/")
            assert answer is not None and answer.status == 421
            assert "api.allowed_hosts" in await page.content()

            shown = (await live.call("GET", f"/v1/vuins/{alice}"))[1]
            assert shown["vuin"] == alice and shown["aliases"] == [], shown
            assert "bind moved" not in live.log()

    run(asyncio.wait_for(main(), 120))


def test_the_console_by_a_listed_name_logs_in_and_binds(tmp_path: Path) -> None:
    """With ``api.allowed_hosts: [console.test]`` and a token, the console's own forms work
    through that name (login, then a bind confirmed, each with its CSRF token), while the
    same console by a name not listed is refused."""
    async def main() -> None:
        async with guarded(tmp_path, token=TOKEN, allowed_hosts=["console.test"]) as live, \
                chromium(RESOLVE_TO_LOOPBACK) as page:
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with aiohttp.ClientSession(timeout=TIMEOUT, headers=headers) as http:
                async with http.post(f"http://127.0.0.1:{live.api}/v1/resolve",
                                     json={"keys": [ALICE]}) as resp:
                    alice = (await resp.json())["vuin"]
            console = f"http://console.test:{live.api}/ui"
            await page.goto(console + "/")
            assert page.url.endswith("/ui/login")
            await page.fill("input[name=token]", TOKEN)
            await page.click("#login button")
            await page.wait_for_load_state()
            assert page.url == console + "/", (page.url, await page.content(), live.log())
            await page.goto(f"{console}/identities/{alice}")
            await page.fill("#bind input[name=key]", BOB)
            await page.click("#bind button")
            await page.click("#confirm button")
            assert await page.locator("#outcome").inner_text() == "bound"  # BOB was new to the graph
            async with aiohttp.ClientSession(timeout=TIMEOUT, headers=headers) as http:
                async with http.get(f"http://127.0.0.1:{live.api}/v1/identity",
                                    params={"key": BOB}) as resp:
                    assert json.loads(await resp.text())["vuin"] == alice

            answer = await page.goto(f"http://other.test:{live.api}/ui/login")
            assert answer is not None and answer.status == 421

    run(asyncio.wait_for(main(), 120))
