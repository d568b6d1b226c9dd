"""A real NoneBot2 (OneBot v11 adapter) started with another access token than the
daemon's (issue 33.9): NoneBot refuses each reverse-WS handshake (403), and the daemon says
so once, at warning level, naming the URL and never the token, however often it dials
again; its console's overview shows the refusal in that framework's row and in its JSON.
NoneBot restarted with the daemon's token takes the next connection, and the problem is
gone from the overview. Harness: :class:`tests.e2e.frameworks.NoneBotRun`."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import aiohttp
import pytest

from gensokyo_idmap.testing import EmulatedPlatform, free_port, until

from .frameworks import WAIT, NoneBotRun

DAEMON_TOKEN = "nb-daemon-token-2Pw"
NONEBOT_TOKEN = "nb-other-token-9Ty"
REFUSED = "reverse ws refused: the framework refused our access token"
PROBLEM = "the framework refused our access token (HTTP 403)"


@pytest.mark.slow
def test_a_nonebot_with_another_token_is_named_once_and_shown_on_the_console(
        tmp_path: Path) -> None:
    nb = NoneBotRun(tmp_path, DAEMON_TOKEN, nonebot_token=NONEBOT_TOKEN)
    context, url = nb.context, nb.url
    api_port = free_port()
    seen: dict[str, object] = {}

    def refused_handshakes() -> int:
        """NoneBot's (uvicorn's) log of each WebSocket handshake it refused."""
        return sum(1 for line in nb.lines if "/onebot/v11/ws" in line and "403" in line)

    async def steps(platform: EmulatedPlatform) -> None:
        await nb.daemon.until_listening(api_port, WAIT)
        await until(lambda: refused_handshakes() >= 5, WAIT,
                    lambda: f"five refused handshakes\n{context()}")
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{api_port}/ui/") as resp:
                seen["page"] = (resp.status, await resp.text())
            async with session.get(f"http://127.0.0.1:{api_port}/ui/overview.json") as resp:
                seen["overview"] = await resp.json()
        seen["log"] = nb.daemon.log.read_text("utf-8")

        # NoneBot with the daemon's token: the next dial connects, the problem is gone
        await nb.restart(DAEMON_TOKEN)
        await until(lambda: nb.connections() >= 1, WAIT,
                    lambda: f"NoneBot connection\n{context()}")
        async with aiohttp.ClientSession() as session:
            for _ in range(int(WAIT / 0.05)):  # the daemon's side of it: just after
                async with session.get(
                        f"http://127.0.0.1:{api_port}/ui/overview.json") as resp:
                    seen["after"] = await resp.json()
                if seen["after"]["frameworks"][0]["connected"]:  # type: ignore[index]
                    break
                await asyncio.sleep(0.05)

    # NoneBot refuses the daemon's token: the run waits for no connection
    nb.run(steps, connect=False, api=f"127.0.0.1:{api_port}")

    log = str(seen["log"])
    named = [line for line in log.splitlines() if REFUSED in line]
    assert len(named) == 1, log  # five refusals and more, one warning
    assert "warning" in named[0] and url in named[0] and "status=403" in named[0], named
    assert "reverse ws unavailable" not in log, log
    assert DAEMON_TOKEN not in log and NONEBOT_TOKEN not in log
    status, page = seen["page"]  # type: ignore[misc]
    assert status == 200
    row = re.search(r"<tr><td>reverse_ws</td>.*?</tr>", page, re.S)
    assert row is not None and url in row.group() and PROBLEM in row.group(), page
    [framework] = seen["overview"]["frameworks"]  # type: ignore[index]
    assert (framework["name"], framework["connected"], framework["problem"]) == (
        url, False, PROBLEM)
    [after] = seen["after"]["frameworks"]  # type: ignore[index]
    assert (after["connected"], after["problem"]) == (True, None)
    assert DAEMON_TOKEN not in page + json.dumps(seen["overview"])
