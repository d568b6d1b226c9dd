"""A real Koishi bot (``koishi-plugin-adapter-onebot``, forward WebSocket) learns the bot's
name, a group member's role and the member themselves from the daemon (issue 33 items 2
and 3).

Koishi's adapter takes the bot's user from ``get_login_info`` (its ``nickname`` is the
bot's name), a message's member from ``sender`` (``card`` as the nick, ``role`` as its
one role) and answers ``checkPermission('onebot.group.admin' | 'onebot.group.owner')``
from that role. The bot (``tests/e2e/koishi_app/bot.cjs``) records the name once logged in
and, on ``whoami``, the author as the event names them, both checks and
``getGuildMember`` (``get_group_member_info``). Checked: the name is the platform's
``GET /users/@me`` one; an admin's message (``member_role`` ``admin``) passes the admin
check and a member's does not; ``getGuildMember`` answers the author with the same name
and role. Harness: :mod:`tests.e2e.test_koishi`.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from gensokyo_idmap.testing import (
    APP,
    DaemonProcess,
    EmulatedPlatform,
    daemon_config,
    free_port,
    group_message,
    until,
    until_listening,
    write_config,
)

from .jsonl_records import Records, run_context
from .test_koishi import GROUP, KOISHI_APP, TOKEN, USER, WAIT, install_koishi, node_missing

MEMBER = "1F1E2D3C4B5A69788796A5B4C3D2E1F1"


@pytest.mark.slow
def test_koishi_sees_the_bots_name_and_who_is_admin(tmp_path: Path) -> None:
    missing = node_missing()
    if missing is not None:
        pytest.skip(f"the Koishi e2e test needs Node.js and npm ({missing}; "
                    "apt-get install nodejs npm)")
    installed = install_koishi()
    records = Records(tmp_path / "koishi-records.jsonl")
    port = free_port()
    lines: list[str] = []

    def context() -> str:
        return run_context("Koishi", lines, tmp_path, records)

    async def main() -> None:
        platform = EmulatedPlatform()
        platform.bot_user["username"] = "Moriya Bot"
        await platform.start()
        daemon = DaemonProcess(write_config(tmp_path / "config.yml", daemon_config(
            tmp_path / "data", platform=platform, onebot={
                "forward_ws": f"127.0.0.1:{port}", "access_token": TOKEN})), tmp_path)
        koishi: asyncio.subprocess.Process | None = None
        pumping: asyncio.Task[None] | None = None
        try:
            await daemon.start()
            await until(lambda: len(platform.identifies) == 1, WAIT,
                        lambda: f"gateway Identify\n{context()}")
            await until_listening(port, WAIT)
            env = {**os.environ, "KOISHI_RECORD_FILE": str(records.path),
                   "KOISHI_ENDPOINT": f"ws://127.0.0.1:{port}", "KOISHI_SELF_ID": APP,
                   "KOISHI_TOKEN": TOKEN, "NODE_PATH": str(installed / "node_modules")}
            koishi = await asyncio.create_subprocess_exec(
                "node", str(KOISHI_APP / "bot.cjs"), cwd=installed, env=env,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
            assert koishi.stdout is not None

            async def pump(stream: asyncio.StreamReader) -> None:
                async for raw in stream:
                    lines.append(raw.decode("utf-8", "replace").rstrip())

            pumping = asyncio.create_task(pump(koishi.stdout))

            def koishi_alive() -> None:
                if koishi is not None and koishi.returncode is not None:
                    raise AssertionError(f"Koishi exited ({koishi.returncode})\n{context()}")

            await until(lambda: bool(records.of("login") or records.of("error")), WAIT,
                        lambda: f"Koishi logged in\n{context()}", alive=koishi_alive)
            await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(
                1, GROUP, USER, username="Sanae", role="admin") | {"content": " whoami"})
            await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(
                2, GROUP, MEMBER, username="Suwako", role="member") | {"content": " whoami"})
            await until(lambda: bool(len(records.of("whoami")) == 2 or records.of("error")),
                        WAIT, lambda: f"Koishi's whoami\n{context()}", alive=koishi_alive)
            koishi.terminate()  # first: the daemon going away is a warning in Koishi's log
            await asyncio.wait_for(koishi.wait(), WAIT)
            assert await daemon.stop() == 0, context()
        finally:
            if koishi is not None and koishi.returncode is None:
                koishi.kill()
                await asyncio.wait_for(koishi.wait(), WAIT)
            if pumping is not None:
                await asyncio.wait_for(pumping, WAIT)
            (tmp_path / "koishi.log").write_text("\n".join(lines) + "\n", "utf-8")
            await daemon.kill()
            await platform.close()

    asyncio.run(asyncio.wait_for(main(), 120))

    assert records.of("error") == [], context()
    assert [line for line in lines if "[W]" in line or "[E]" in line] == [], context()
    assert records.of("login")[-1] == {"name": "Moriya Bot"}, context()
    admin, member = records.of("whoami")
    assert (admin["name"], admin["roles"], admin["admin"], admin["owner"]) == (
        "Sanae", ["admin"], True, False), admin
    assert (member["name"], member["roles"], member["admin"]) == (
        "Suwako", ["member"], False), member
    for seen in (admin, member):  # getGuildMember: get_group_member_info of the author
        assert seen["fetched"]["user"] == seen["userId"], seen
        assert (seen["fetched"]["name"], seen["fetched"]["roles"]) == (
            seen["name"], seen["roles"]), seen
