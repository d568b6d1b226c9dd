"""A real Koishi bot (``koishi-plugin-adapter-onebot``, forward WebSocket) gets a group
message that mentions another member (issue 33.5), sent by the emulated platform as the
platform does (``<@member_openid>`` in the content, a ``mentions[]`` entry each, an
@everyone too): the session's elements hold an ``at`` whose ``id`` is that member's vUIN —
the one the identity store gave the member's OpenID, created with the message — and an
``at`` of ``type`` ``all``. Harness: the Koishi app and installer of
:mod:`tests.e2e.test_koishi`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.testing import (
    APP,
    DaemonProcess,
    EmulatedPlatform,
    daemon_config,
    free_port,
    group_message,
    mentioning,
    until,
    until_listening,
    write_config,
)

from .jsonl_records import Records, run_context
from .test_koishi import (
    GROUP,
    USER,
    WAIT,
    install_koishi,
    node_missing,
    start_koishi,
    stop_koishi,
)

TOKEN = "koishi-mentions-token-5Rb"
OTHER = "73A48B12B0D76B961B4349B5599FA43C"


@pytest.mark.slow
def test_koishi_sees_an_at_of_the_member_a_group_message_mentions(tmp_path: Path) -> None:
    missing = node_missing()
    if missing is not None:
        pytest.skip(f"the Koishi e2e test needs Node.js and npm ({missing}; "
                    "apt-get install nodejs npm)")
    installed = install_koishi()
    data_dir = tmp_path / "data"
    records = Records(tmp_path / "koishi-records.jsonl")
    port = free_port()
    lines: list[str] = []

    def context() -> str:
        return run_context("Koishi", lines, tmp_path, records)

    async def main() -> None:
        platform = EmulatedPlatform()
        await platform.start()
        daemon = DaemonProcess(write_config(tmp_path / "config.yml", daemon_config(
            data_dir, platform=platform, onebot={
                "forward_ws": f"127.0.0.1:{port}", "access_token": TOKEN})), tmp_path)
        koishi: asyncio.subprocess.Process | None = None
        pumping: asyncio.Task[None] | None = None
        try:
            await daemon.start()
            await until(lambda: len(platform.identifies) == 1, WAIT,
                        lambda: f"gateway Identify\n{context()}")
            await until_listening(port, WAIT)
            koishi, pumping = await start_koishi(installed, port, TOKEN, records, lines)

            def koishi_alive() -> None:
                if koishi is not None and koishi.returncode is not None:
                    raise AssertionError(f"Koishi exited ({koishi.returncode})\n{context()}")

            await until(lambda: bool(records.of("ready") or records.of("error")), WAIT,
                        lambda: f"Koishi connected\n{context()}", alive=koishi_alive)
            await platform.push("GROUP_MESSAGE_CREATE", mentioning(
                group_message(1, GROUP, USER) | {"content": "look"}, OTHER, everyone=True))
            await until(lambda: bool(records.of("event") or records.of("error")), WAIT,
                        lambda: f"the message at Koishi\n{context()}", alive=koishi_alive)
            koishi.terminate()
            await asyncio.wait_for(koishi.wait(), WAIT)
            assert await daemon.stop() == 0, context()
        finally:
            await stop_koishi(koishi, pumping, lines, tmp_path)
            await daemon.kill()
            await platform.close()

    asyncio.run(asyncio.wait_for(main(), 180))

    assert records.of("error") == [], context()
    store = LmdbIdentityStore(data_dir / "openid-map.db", readonly=True)
    try:
        with store.read() as view:
            other, user = (view.vuin_of(OpenId(APP, who).key) for who in (OTHER, USER))
    finally:
        store.close()
    assert isinstance(other, int) and isinstance(user, int) and other != user
    [event] = records.of("event")
    assert event["userId"] == str(user), event
    ats = [element["attrs"] for element in event["elements"] if element["type"] == "at"]
    assert ats == [{"id": str(other)}, {"type": "all"}], event
    assert [element["type"] for element in event["elements"]] == ["text", "at", "text", "at"]
