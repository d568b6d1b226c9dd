"""A real NoneBot2 bot (OneBot v11 adapter, reverse WS) in a QQ channel: the daemon shows
the channel as a group, NoneBot sees the @bot as addressed to it and answers ``ping`` with
``pong`` through its ordinary ``send_msg``, which the daemon sends to the channel
(``POST /channels/{channel_id}/messages``) as a passive reply to that message. A recall in
the channel reaches NoneBot as its ``group_recall`` notice. Harness: the NoneBot app and
helpers of :mod:`tests.e2e.test_nonebot`; the daemon is ``gensokyo-idmap serve``."""

from __future__ import annotations

import asyncio
import re
import signal
from pathlib import Path

import pytest

from gensokyo_idmap.identity import RawId
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.testing import (
    APP,
    EmulatedPlatform,
    channel_message,
    free_port,
    message_delete,
    until,
    until_listening,
)
from gensokyo_idmap.testing.platform_emulator import CHANNEL, GUILD, GUILD_USER

from .jsonl_records import Records, run_context
from .test_nonebot import WAIT, nonebot_daemon, nonebot_missing, start_nonebot

TOKEN = "nb-guild-token-4Kd"


@pytest.mark.slow
def test_nonebot_answers_in_a_channel(tmp_path: Path) -> None:
    missing = nonebot_missing()
    if missing is not None:
        pytest.skip(f"NoneBot2 / nonebot-adapter-onebot not importable: {missing}")
    data_dir = tmp_path / "data"
    records = Records(tmp_path / "nonebot-records.jsonl")
    nb_port = free_port()
    nb_lines: list[str] = []

    def context() -> str:
        return run_context("NoneBot", nb_lines, tmp_path, records)

    message = channel_message(1, "ping")

    async def main() -> None:
        platform = EmulatedPlatform()
        await platform.start()
        daemon = nonebot_daemon(tmp_path, data_dir, platform, nb_port, TOKEN)
        nonebot, pumping = await start_nonebot(nb_port, TOKEN, records, tmp_path, nb_lines)
        try:
            await until_listening(nb_port, WAIT)
            await daemon.start()
            await until(lambda: any(re.search(rf"Bot {APP}\b.* connected", line)
                                    for line in nb_lines), WAIT,
                        lambda: f"NoneBot connection\n{context()}")
            await until(lambda: bool(platform.identifies), WAIT, "gateway Identify")
            await platform.push("AT_MESSAGE_CREATE", message)
            await until(lambda: bool(records.of("send_result") or records.of("send_error")),
                        WAIT, lambda: f"the pong\n{context()}")
            assert not records.of("send_error"), context()
            await platform.push("PUBLIC_MESSAGE_DELETE", message_delete(message))
            await until(lambda: bool(records.of("notice")), WAIT,
                        lambda: f"the recall notice\n{context()}")
            assert await daemon.stop(signal.SIGTERM, WAIT) == 0, context()
        finally:
            await daemon.kill()
            if nonebot.returncode is None:
                nonebot.kill()
                await asyncio.wait_for(nonebot.wait(), WAIT)
            await asyncio.wait_for(pumping, WAIT)
            await platform.close()
        [(path, body)] = platform.api_requests("POST", "/messages")
        assert path == f"/channels/{CHANNEL}/messages", context()
        assert (body["content"], body["msg_id"]) == ("pong", message["id"]), body

    asyncio.run(asyncio.wait_for(main(), 120))

    store = LmdbIdentityStore(data_dir / "openid-map.db")
    try:
        with store.read() as view:
            channel = view.vuin_of(RawId(CHANNEL).key)
            author = view.vuin_of(RawId(GUILD_USER).key)
    finally:
        store.close()
    [raw] = records.of("raw")
    [event] = records.of("event")
    assert (raw["guild_id"], raw["channel_id"]) == (GUILD, CHANNEL)  # the guild alongside
    assert (event["message_type"], event["group_id"], event["user_id"]) == (
        "group", channel, author)
    assert event["to_me"] is True and event["plain_text"].strip() == "ping", event
    [call] = [entry for entry in records.all() if "call_api" in entry]
    assert call["call_api"] == "send_msg" and call["params"]["group_id"] == channel
    assert isinstance(records.of("send_result")[0]["message_id"], int)
    [notice] = records.of("notice")
    assert (notice["notice_type"], notice["group_id"], notice["user_id"],
            notice["message_id"]) == ("group_recall", channel, author, event["message_id"])
