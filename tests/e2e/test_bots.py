"""One daemon, two bots, one identity graph (issue 34): each bot on an emulated platform of
its own (the test kit's :class:`EmulatedPlatform` once per AppID, each issuing tokens only it
accepts), a real NoneBot2 taking both bots over one reverse-WS URL, and a real Koishi taking
both over the daemon's one forward WebSocket, each bot by its path prefix ``/<self_id>/``.

Checked, for NoneBot: two connections on one URL, one per bot, each with its ``X-Self-ID``;
each bot's events arrive with its ``self_id``; a person with one ``union_openid`` in both
bots is one vUIN (their groups, per AppID, two); ``bot.send`` through each bot reaches its
own platform (and only it) with its own token (the other platform would answer 401). For
Koishi: a bot per prefix, each getting its own bot's messages, its answers reaching its own
platform. The store holds the person's OpenIDs of both AppIDs on that one vUIN.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.testing import (
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

from .frameworks import (
    install_koishi,
    node_missing,
    nonebot_missing,
    start_koishi,
    start_nonebot,
    stop_koishi,
)
from .jsonl_records import Records, run_context

APP_A, APP_B = "102000001", "102000002"
GROUP_A, GROUP_B = "A1B2C3D4E5F60718293A4B5C6D7E8F90", "B1B2C3D4E5F60718293A4B5C6D7E8F90"
USER_A, USER_B = "0F1E2D3C4B5A69788796A5B4C3D2E1F0", "1F1E2D3C4B5A69788796A5B4C3D2E1F0"
UNION = "UNION0000000000000000000000000001"
TOKEN = "bots-e2e-token-5Rk"
WAIT = 20.0


@pytest.mark.slow
def test_two_bots_one_daemon_one_graph_with_nonebot_and_koishi(tmp_path: Path) -> None:
    missing = nonebot_missing() or node_missing()
    if missing is not None:
        pytest.skip(f"needs NoneBot2 and Node.js: {missing}")
    installed = install_koishi()
    data_dir = tmp_path / "data"
    nb_records = Records(tmp_path / "nonebot-records.jsonl")
    koishi_records = Records(tmp_path / "koishi-records.jsonl")
    nb_port, forward_port = free_port(), free_port()
    nb_lines: list[str] = []
    koishi_lines: list[str] = []

    def context() -> str:
        return "\n".join([run_context("NoneBot", nb_lines, tmp_path, nb_records),
                          run_context("Koishi", koishi_lines, tmp_path, koishi_records)])

    def nb_connected(app_id: str) -> bool:
        return any(re.search(rf"Bot {app_id}\b.* connected", line) for line in nb_lines)

    async def main() -> None:
        platform_a = EmulatedPlatform(app_id=APP_A, secret="first-secret-Hk2",
                                      token_prefix="A")
        platform_b = EmulatedPlatform(app_id=APP_B, secret="second-secret-Q7x",
                                      token_prefix="B")
        await platform_a.start()
        await platform_b.start()
        daemon = DaemonProcess(write_config(tmp_path / "config.yml", daemon_config(
            data_dir, bots=[platform_a.bot_entry(), platform_b.bot_entry()], onebot={
                "reverse_ws": [f"ws://127.0.0.1:{nb_port}/onebot/v11/ws"],
                "forward_ws": f"127.0.0.1:{forward_port}",
                "access_token": TOKEN, "reconnect_interval_seconds": 0.2})), tmp_path)
        nonebot, nb_pumping = await start_nonebot(nb_port, TOKEN, nb_records, tmp_path,
                                                  nb_lines)
        koishi: asyncio.subprocess.Process | None = None
        koishi_pumping: asyncio.Task[None] | None = None
        try:
            await until_listening(nb_port, WAIT)
            await daemon.start()
            for platform in (platform_a, platform_b):  # a gateway session per bot
                await until(lambda p=platform: len(p.identifies) == 1, WAIT,  # type: ignore[misc]
                            lambda: f"gateway Identify\n{context()}", alive=daemon.alive)
            await until(lambda: nb_connected(APP_A) and nb_connected(APP_B), WAIT,
                        lambda: f"NoneBot connections of both bots\n{context()}")

            # NoneBot: the same person (one union_openid) pings each bot in its group
            await platform_a.push("GROUP_AT_MESSAGE_CREATE", group_message(
                1, GROUP_A, USER_A, union=UNION) | {"content": " ping"})
            await platform_b.push("GROUP_AT_MESSAGE_CREATE", group_message(
                2, GROUP_B, USER_B, union=UNION) | {"content": " ping"})
            await until(lambda: len(nb_records.of("send_result")
                                    + nb_records.of("send_error")) == 2, WAIT,
                        lambda: f"NoneBot's two pongs\n{context()}")

            # Koishi: a bot per path prefix on the one forward WebSocket
            await until_listening(forward_port, WAIT)
            koishi, koishi_pumping = await start_koishi(
                installed, forward_port, TOKEN, koishi_records, koishi_lines,
                script="bots.cjs", env={"KOISHI_BOTS": json.dumps([
                    {"selfId": app_id, "endpoint": f"ws://127.0.0.1:{forward_port}/{app_id}/"}
                    for app_id in (APP_A, APP_B)])})

            def koishi_alive() -> None:
                if koishi is not None and koishi.returncode is not None:
                    raise AssertionError(f"Koishi exited ({koishi.returncode})\n{context()}")

            await until(lambda: len(koishi_records.of("ready")) == 2
                        or bool(koishi_records.of("error")), WAIT,
                        lambda: f"Koishi's two bots connected\n{context()}", alive=koishi_alive)
            # "koishi ping": Koishi answers it, NoneBot (exactly "ping") does not
            await platform_a.push("C2C_MESSAGE_CREATE", c2c_message(3, USER_A, "koishi ping"))
            await platform_b.push("C2C_MESSAGE_CREATE", c2c_message(4, USER_B, "koishi ping"))
            await until(lambda: len(koishi_records.of("sent")) == 2
                        or bool(koishi_records.of("error")), WAIT,
                        lambda: f"Koishi's two pongs\n{context()}", alive=koishi_alive)
            koishi.terminate()
            await asyncio.wait_for(koishi.wait(), WAIT)
            assert await daemon.stop() == 0, context()
        finally:
            await stop_koishi(koishi, koishi_pumping, koishi_lines, tmp_path)
            await daemon.kill()
            if nonebot.returncode is None:
                nonebot.kill()
                await asyncio.wait_for(nonebot.wait(), WAIT)
            await asyncio.wait_for(nb_pumping, WAIT)
            (tmp_path / "nonebot.log").write_text("\n".join(nb_lines) + "\n", "utf-8")
            await platform_a.close()
            await platform_b.close()
        check_platforms(platform_a, platform_b, context)

    sent: dict[str, list[tuple[str, Any]]] = {}

    def check_platforms(platform_a: EmulatedPlatform, platform_b: EmulatedPlatform,
                        context: Any) -> None:
        for platform in (platform_a, platform_b):
            sent[platform.app_id] = platform.api_requests("POST", "/messages")
            assert platform.tokens_issued >= 1, context()  # each bot asked its own platform

    asyncio.run(asyncio.wait_for(main(), 180))

    store = LmdbIdentityStore(data_dir / "openid-map.db", readonly=True)
    try:
        with store.read() as view:
            person = {app: view.vuin_of(OpenId(app, user).key)
                      for app, user in ((APP_A, USER_A), (APP_B, USER_B))}
            groups = {app: view.vuin_of(OpenId(app, group).key)
                      for app, group in ((APP_A, GROUP_A), (APP_B, GROUP_B))}
    finally:
        store.close()
    vuin = person[APP_A]
    assert isinstance(vuin, int) and person[APP_B] == vuin  # one union_openid: one vUIN
    assert groups[APP_A] != groups[APP_B]

    # NoneBot: each bot's event with its self_id, on its own connection (bot_self_id)
    assert nb_records.of("send_error") == [], context()
    by_bot = {event["self_id"]: event for event in nb_records.of("event")
              if event["message_type"] == "group"}
    assert sorted(by_bot) == [int(APP_A), int(APP_B)], context()
    for app in (APP_A, APP_B):
        event = by_bot[int(app)]
        assert event["bot_self_id"] == app, event
        assert (event["user_id"], event["group_id"]) == (vuin, groups[app]), event
        assert event["to_me"] is True, event  # its leading @ is this bot's own self_id
    assert all(type(frame["self_id"]) is int for frame in nb_records.of("raw"))

    # each bot's sends reached its own platform, with its own token (each platform accepts
    # only the tokens it issued: a send with the other's would have failed with 401)
    (path_a, body_a), (path_a2, body_a2) = sent[APP_A]
    (path_b, body_b), (path_b2, body_b2) = sent[APP_B]
    assert (path_a, body_a["content"], body_a["msg_id"]) == (
        f"/v2/groups/{GROUP_A}/messages", "pong", "ROBOT1.0_gw1")
    assert (path_b, body_b["content"], body_b["msg_id"]) == (
        f"/v2/groups/{GROUP_B}/messages", "pong", "ROBOT1.0_gw2")
    assert (path_a2, body_a2["content"], body_a2["msg_id"]) == (
        f"/v2/users/{USER_A}/messages", "pong", "ROBOT1.0_c2c3")
    assert (path_b2, body_b2["content"], body_b2["msg_id"]) == (
        f"/v2/users/{USER_B}/messages", "pong", "ROBOT1.0_c2c4")
    assert all(isinstance(result["message_id"], int)
               for result in nb_records.of("send_result"))

    # Koishi: each bot got its own bot's message, the same person on both
    assert koishi_records.of("error") == [], context()
    assert sorted(entry["selfId"] for entry in koishi_records.of("ready")) == [APP_A, APP_B]
    events = {event["selfId"]: event for event in koishi_records.of("event")}
    assert sorted(events) == [APP_A, APP_B], context()
    for app in (APP_A, APP_B):
        assert events[app]["content"] == "koishi ping" and events[app]["userId"] == str(vuin)
    assert sorted(entry["selfId"] for entry in koishi_records.of("sent")) == [APP_A, APP_B]
