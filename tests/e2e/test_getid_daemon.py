"""The daemon as a process, driven the way a lotus Gensokyo drives its idmap server: plain
GETs on /getid, no auth. Waits are bounded polls; the daemon's log is shown on failure."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientError, ClientSession, ClientTimeout

from ..conftest import run
from ..api.conftest import ALICE, BOB
from gensokyo_idmap.testing import (
    DaemonProcess,
    daemon_command,
    daemon_config,
    free_port,
    write_config,
)

def api_daemon(tmp_path: Path, listen: str) -> DaemonProcess:
    """The daemon with only the identity HTTP API on (no transport)."""
    return DaemonProcess(write_config(tmp_path / "config.yml", daemon_config(
        tmp_path / "data", api=listen, log={"format": "json"})), tmp_path)


async def wait_healthy(session: ClientSession, base: str, daemon: DaemonProcess) -> None:
    async def healthy() -> bool:
        try:
            async with session.get(base + "/healthz") as resp:
                return resp.status == 204
        except ClientError:
            return False

    for _ in range(300):
        daemon.alive()
        if await healthy():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"/healthz never answered 204:\n{daemon.tail()}")


async def getid(session: ClientSession, base: str, **params: str) -> tuple[int, Any]:
    async with session.get(base + "/getid", params=params) as resp:  # what lotus sends
        return resp.status, await resp.json()


@pytest.mark.slow
def test_lotus_client_store_lookup_rebind_lookup(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    daemon = api_daemon(tmp_path, f"127.0.0.1:{port}")

    async def main() -> None:
        async with ClientSession(timeout=ClientTimeout(total=10)) as session:
            await daemon.start()
            try:
                await wait_healthy(session, base, daemon)
                status, first = await getid(session, base, type="1", id=ALICE)
                assert status == 200, first
                row = first["row"]
                assert await getid(session, base, type="1", id=BOB) == (200, {"row": row + 1})
                assert await getid(session, base, type="2", id=str(row)) == (200, {"id": ALICE})
                new = row + 1000
                assert await getid(session, base, type="5", oldRowValue=str(row),
                                   newRowValue=str(new)) == (200, {"status": "success"})
                assert await getid(session, base, type="1", id=ALICE) == (200, {"row": new})
                assert await getid(session, base, type="2", id=str(new)) == (200, {"id": ALICE})
                assert await getid(session, base, type="2", id=str(row)) == (200, {"id": ALICE})
                assert await getid(session, base, type="2", id="abc") == (
                    400, {"error": "invalid id"})
                async with session.get(base + "/metrics") as resp:
                    text = await resp.text()
                assert 'gensokyo_bind_results_total{op="rebind",outcome="moved"} 1.0' in text
            finally:
                assert await daemon.stop() == 0, daemon.tail()
            await daemon.start()  # what it answered was durable
            try:
                await wait_healthy(session, base, daemon)
                assert await getid(session, base, type="1", id=ALICE) == (200, {"row": new})
                assert await getid(session, base, type="1", id=BOB) == (200, {"row": row + 1})
            finally:
                assert await daemon.stop() == 0, daemon.tail()

    run(asyncio.wait_for(main(), 120))


def test_daemon_refuses_an_open_non_loopback_listener(tmp_path: Path) -> None:
    config = api_daemon(tmp_path, f"0.0.0.0:{free_port()}").config
    done = subprocess.run(daemon_command(config),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "api.listen" in done.stderr and "api.getid_allow" in done.stderr
