"""A real OneBot client — NoneBot2 with its OneBot v11 adapter — fed by the daemon.

Three processes: the emulated QQ platform (token endpoint, /gateway/bot, gateway) runs in
this test's event loop; NoneBot (``tests/e2e/nonebot_app/bot.py``) and the daemon
(``gensokyo-idmap serve``) run as subprocesses, the daemon dialling NoneBot by reverse
WebSocket with an access token. The NoneBot plugin appends every frame and message event it
gets to a JSON-lines file, which this test reads.

Checked: a group message and a private message reach NoneBot's plugin as OneBot v11 message
events with integer ids — ``user_id`` / ``group_id`` the vUINs the identity store holds for
those OpenIDs, ``message_id`` an int32, ``self_id`` an int — and after a SIGTERM and a
restart on the same data dir, a message from the same user and group carries the same
vUINs. The plugin answers ``ping`` with ``pong`` (NoneBot's ``send_msg``): the emulator
records ``POST /v2/users/<openid>/messages`` and ``POST /v2/groups/<group_openid>/messages``
carrying the original ``msg_id``, and NoneBot gets an int ``message_id`` back.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore

from gensokyo_idmap.testing import (
    APP,
    DaemonProcess,
    EmulatedPlatform,
    c2c_message,
    daemon_config,
    free_port,
    group_message,
    until,
    until_listening,
    write_config,
)

from .jsonl_records import Records, run_context

NONEBOT_APP = Path(__file__).resolve().parent / "nonebot_app" / "bot.py"
GROUP = "A1B2C3D4E5F60718293A4B5C6D7E8F90"
USER = "0F1E2D3C4B5A69788796A5B4C3D2E1F0"
TOKEN = "nb-e2e-token-7Qx"
WAIT = 20.0  # every single wait is bounded by this
INT32 = range(-(2**31), 2**31)


def nonebot_missing() -> str | None:
    """Why NoneBot cannot run here (tried in a child: NoneBot stays out of this process)."""
    probe = subprocess.run(
        [sys.executable, "-c", "import nonebot, nonebot.adapters.onebot.v11, fastapi, uvicorn"],
        capture_output=True, text=True, timeout=60)
    if probe.returncode == 0:
        return None
    return (probe.stderr.strip().splitlines() or ["import failed"])[-1]


def nonebot_daemon(tmp_path: Path, data_dir: Path, platform: EmulatedPlatform, nb_port: int,
                   token: str) -> DaemonProcess:
    """``gensokyo-idmap serve`` fed by ``platform``, dialling NoneBot on ``nb_port`` by
    reverse WS with ``token`` (not started yet)."""
    return DaemonProcess(write_config(tmp_path / "config.yml", daemon_config(
        data_dir, platform=platform, onebot={
            "reverse_ws": [f"ws://127.0.0.1:{nb_port}/onebot/v11/ws"],
            "access_token": token, "reconnect_interval_seconds": 0.2})), tmp_path)


async def start_nonebot(port: int, token: str, records: Records, cwd: Path,
                        lines: list[str]) -> tuple[asyncio.subprocess.Process, asyncio.Task[None]]:
    """NoneBot's app as a process on 127.0.0.1:``port`` (reverse WS at /onebot/v11/ws,
    ``token`` required), recording into ``records``, started in ``cwd`` (an empty dir: it
    reads .env files there); the task returned appends its output to ``lines``."""
    env = {**os.environ, "HOST": "127.0.0.1", "PORT": str(port),
           "ONEBOT_ACCESS_TOKEN": token, "NB_RECORD_FILE": str(records.path),
           "API_TIMEOUT": "5", "LOG_LEVEL": "INFO", "PYTHONUNBUFFERED": "1"}
    nonebot = await asyncio.create_subprocess_exec(
        sys.executable, str(NONEBOT_APP), cwd=cwd, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    assert nonebot.stdout is not None

    async def pump(stream: asyncio.StreamReader) -> None:
        async for raw in stream:
            lines.append(raw.decode("utf-8", "replace").rstrip())

    return nonebot, asyncio.create_task(pump(nonebot.stdout))


async def stop_nonebot(nonebot: asyncio.subprocess.Process, pumping: asyncio.Task[None],
                       lines: list[str], log_dir: Path) -> None:
    """Kill NoneBot if it still runs, wait for the rest of its output, and keep that in
    ``log_dir/nonebot.log``."""
    if nonebot.returncode is None:
        nonebot.kill()
        await asyncio.wait_for(nonebot.wait(), WAIT)
    await asyncio.wait_for(pumping, WAIT)
    (log_dir / "nonebot.log").write_text("\n".join(lines) + "\n", "utf-8")


@pytest.mark.slow
def test_nonebot_gets_group_and_private_messages_with_durable_vuins(tmp_path: Path) -> None:
    missing = nonebot_missing()
    if missing is not None:
        pytest.skip(f"NoneBot2 / nonebot-adapter-onebot not importable (pip install -e "
                    f"'.[test]'): {missing}")

    data_dir = tmp_path / "data"
    records = Records(tmp_path / "nonebot-records.jsonl")
    nb_port = free_port()
    nb_lines: list[str] = []

    def context() -> str:
        return run_context("NoneBot", nb_lines, tmp_path, records)

    def nb_connections() -> int:
        return sum(1 for line in nb_lines if re.search(rf"Bot {APP}\b.* connected", line))

    async def main() -> None:
        platform = EmulatedPlatform()
        await platform.start()
        daemon = nonebot_daemon(tmp_path, data_dir, platform, nb_port, TOKEN)
        nonebot, pumping = await start_nonebot(nb_port, TOKEN, records, tmp_path, nb_lines)
        async def stop_daemon() -> None:
            try:
                code = await daemon.stop(signal.SIGTERM, WAIT)
            except TimeoutError:
                raise AssertionError(f"daemon ignored SIGTERM for {WAIT} s\n{context()}") from None
            assert code == 0, f"daemon exit code {code}\n{context()}"

        def nonebot_alive() -> None:
            if nonebot.returncode is not None:
                raise AssertionError(f"NoneBot exited ({nonebot.returncode})\n{context()}")

        try:
            await until_listening(nb_port, WAIT, alive=nonebot_alive)

            # first daemon: gateway Identify, reverse WS accepted by NoneBot
            await daemon.start()
            await until(lambda: len(platform.identifies) == 1, WAIT,
                        lambda: f"gateway Identify\n{context()}")
            await until(lambda: nb_connections() == 1, WAIT,
                        lambda: f"NoneBot connection\n{context()}")
            await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(1, GROUP, USER))
            await until(lambda: len(records.of("event")) == 1, WAIT,
                        lambda: f"group message at NoneBot\n{context()}")
            await platform.push("C2C_MESSAGE_CREATE", c2c_message(2))
            await until(lambda: len(records.of("event")) == 2, WAIT,
                        lambda: f"private message at NoneBot\n{context()}")
            # the plugin answers "ping" with "pong" (send_msg): a passive C2C reply
            await until(lambda: bool(
                records.of("send_error") or records.of("send_result")), WAIT,
                        lambda: f"the pong reply\n{context()}")
            assert not records.of("send_error"), context()
            # (msg_seq counts from this process's offset; the platform wants it unique per
            # msg_id, and an offset per start keeps it so across restarts)
            [(path, body)] = platform.api_requests("POST", "/messages")
            seq = body.pop("msg_seq")
            assert type(seq) is int and 0 < seq < 2**31, body
            assert (path, body) == (f"/v2/users/{USER}/messages", {
                "msg_type": 0, "content": "pong", "msg_id": "ROBOT1.0_c2c2"}), context()
            # and in a group: the reply names the group message it answers
            await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(4, GROUP, USER)
                                | {"content": " ping"})
            await until(lambda: len(records.of("send_result")) == 2, WAIT,
                        lambda: f"the group pong\n{context()}")
            assert platform.api_requests("POST", "/messages")[1] == (
                f"/v2/groups/{GROUP}/messages", {"msg_type": 0, "content": "pong",
                                                 "msg_seq": seq, "msg_id": "ROBOT1.0_gw4"})
            await stop_daemon()

            # the restart, on the same data dir: NoneBot must take the new connection
            await daemon.start()
            await until(lambda: len(platform.resumes) == 1, WAIT,
                        lambda: f"gateway Resume\n{context()}")
            await until(lambda: nb_connections() == 2, WAIT,
                        lambda: f"NoneBot reconnection\n{context()}")
            await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(3, GROUP, USER))
            await until(lambda: len(records.of("event")) == 4, WAIT,
                        lambda: f"group message after the restart\n{context()}")
            await stop_daemon()
        finally:
            await daemon.kill()
            if nonebot.returncode is None:
                nonebot.kill()
                await asyncio.wait_for(nonebot.wait(), WAIT)
            await asyncio.wait_for(pumping, WAIT)
            (tmp_path / "nonebot.log").write_text("\n".join(nb_lines) + "\n", "utf-8")
            await platform.close()

    started = time.monotonic()
    asyncio.run(asyncio.wait_for(main(), 120))
    elapsed = time.monotonic() - started

    store = LmdbIdentityStore(data_dir / "openid-map.db")
    try:
        with store.read() as view:
            user_vuin = view.vuin_of(OpenId(APP, USER).key)
            group_vuin = view.vuin_of(OpenId(APP, GROUP).key)
    finally:
        store.close()
    assert isinstance(user_vuin, int) and isinstance(group_vuin, int)
    assert user_vuin != group_vuin

    raw = records.of("raw")  # as sent on the wire, before NoneBot's models coerce anything
    events = records.of("event")  # as NoneBot's plugin got them
    assert len(raw) == len(events) == 4, context()
    for frame in raw:
        assert type(frame["self_id"]) is int, frame
        assert type(frame["user_id"]) is int, frame
        assert type(frame["message_id"]) is int and frame["message_id"] in INT32, frame
        assert frame.get("group_id") is None or type(frame["group_id"]) is int, frame

    group_1, private_2, group_4, group_3 = events
    assert group_4["plain_text"].strip() == "ping" and group_4["user_id"] == user_vuin
    for event, text in ((group_1, "m1"), (group_3, "m3")):
        assert event["post_type"] == "message" and event["message_type"] == "group", event
        assert event["sub_type"] == "normal", event
        assert (event["user_id"], event["group_id"]) == (user_vuin, group_vuin), event
        # GROUP_AT_MESSAGE_CREATE: the leading @bot made NoneBot mark the event to_me
        assert event["to_me"] is True, event
        assert event["plain_text"] == text, event
    assert private_2["message_type"] == "private" and private_2["sub_type"] == "friend"
    assert private_2["user_id"] == user_vuin, private_2
    assert private_2["plain_text"] == "ping" and private_2["to_me"] is True, private_2
    for event in events:
        assert type(event["self_id"]) is int and event["bot_self_id"] == str(event["self_id"])
        assert type(event["message_id"]) is int and event["message_id"] in INT32, event
    assert len({event["message_id"] for event in events}) == 4, events

    calls = [entry for entry in records.all() if "call_api" in entry]
    assert [call["call_api"] for call in calls] == ["send_msg", "send_msg"], calls
    assert all(isinstance(result["message_id"], int) for result in records.of("send_result"))
    outcome = records.of("send_result") or records.of("send_error")
    print(f"\nNoneBot e2e took {elapsed:.1f} s; vUINs user={user_vuin} group={group_vuin}; "
          f"NoneBot called {calls}; outcome {outcome}")
