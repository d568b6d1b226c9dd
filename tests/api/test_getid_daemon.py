"""The daemon as a process, driven the way a lotus Gensokyo drives its idmap server: plain
GETs on /getid, no auth. Waits are bounded polls; the daemon's log is shown on failure."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import ClientError, ClientSession, ClientTimeout

from ..conftest import run
from .conftest import ALICE, BOB
from gensokyo_idmap.testing.loopback import free_port

SCRIPT = Path(sys.executable).parent / "gensokyo-idmap"


def write_config(tmp_path: Path, listen: str) -> Path:
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({
        "bot": {"app_id": "102000001"},
        "idmap": {"data_dir": str(tmp_path / "data")},
        "webhook": {"listen": ""},
        "onebot": {"reverse_ws": [], "forward_ws": ""},
        "api": {"listen": listen},
        "log": {"level": "info", "format": "json"},
    }))
    return config


async def start(config: Path, log: Path) -> asyncio.subprocess.Process:
    with log.open("ab") as out:
        return await asyncio.create_subprocess_exec(
            str(SCRIPT), "serve", "--config", str(config),
            stdout=asyncio.subprocess.DEVNULL, stderr=out)


async def wait_healthy(session: ClientSession, base: str, child: Any, log: Path) -> None:
    for _ in range(300):
        if child.returncode is not None:
            raise AssertionError(f"daemon exited {child.returncode}:\n{log.read_text()}")
        try:
            async with session.get(base + "/healthz") as resp:
                if resp.status == 204:
                    return
        except ClientError:
            pass
        await asyncio.sleep(0.05)
    raise AssertionError(f"/healthz never answered 204:\n{log.read_text()}")


async def getid(session: ClientSession, base: str, **params: str) -> tuple[int, Any]:
    async with session.get(base + "/getid", params=params) as resp:  # what lotus sends
        return resp.status, await resp.json()


@pytest.mark.slow
def test_lotus_client_store_lookup_rebind_lookup(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    config = write_config(tmp_path, f"127.0.0.1:{port}")
    log = tmp_path / "daemon.log"

    async def main() -> None:
        async with ClientSession(timeout=ClientTimeout(total=10)) as session:
            child = await start(config, log)
            try:
                await wait_healthy(session, base, child, log)
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
                child.send_signal(signal.SIGTERM)
                assert await asyncio.wait_for(child.wait(), 20) == 0, log.read_text()
            child = await start(config, log)  # what it answered was durable
            try:
                await wait_healthy(session, base, child, log)
                assert await getid(session, base, type="1", id=ALICE) == (200, {"row": new})
                assert await getid(session, base, type="1", id=BOB) == (200, {"row": row + 1})
            finally:
                child.send_signal(signal.SIGTERM)
                assert await asyncio.wait_for(child.wait(), 20) == 0, log.read_text()

    run(asyncio.wait_for(main(), 120))


def test_daemon_refuses_an_open_non_loopback_listener(tmp_path: Path) -> None:
    config = write_config(tmp_path, f"0.0.0.0:{free_port()}")
    done = subprocess.run([str(SCRIPT), "serve", "--config", str(config)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "api.listen" in done.stderr and "api.getid_allow" in done.stderr
