"""A real NoneBot2 bot (OneBot v11 adapter, reverse WS) gets a group message that mentions
another member (issue 33.5): the emulated platform sends it as the platform does
(``<@member_openid>`` in the content, a ``mentions[]`` entry each), once as every group
message (``GROUP_MESSAGE_CREATE``) and once addressed to the bot (``GROUP_AT_MESSAGE_CREATE``,
with an @everyone too), and NoneBot's ``event.message`` holds an ``at`` of that member's
vUIN: the one the identity store gave the member's OpenID, created with the message (the
member never spoke). Harness: the NoneBot app and helpers of :mod:`tests.e2e.test_nonebot`.
"""

from __future__ import annotations

import asyncio
import re
import signal
from pathlib import Path

import pytest

from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.testing import (
    APP,
    EmulatedPlatform,
    free_port,
    group_message,
    mentioning,
    until,
    until_listening,
)

from .jsonl_records import Records, run_context
from .test_nonebot import (
    GROUP,
    USER,
    WAIT,
    nonebot_daemon,
    nonebot_missing,
    start_nonebot,
    stop_nonebot,
)

TOKEN = "nb-mentions-token-8Hs"
OTHER = "73A48B12B0D76B961B4349B5599FA43C"


def _at(qq: int | str) -> dict[str, object]:
    return {"type": "at", "data": {"qq": str(qq)}}


@pytest.mark.slow
def test_nonebot_sees_an_at_of_the_member_a_group_message_mentions(tmp_path: Path) -> None:
    missing = nonebot_missing()
    if missing is not None:
        pytest.skip(f"NoneBot2 / nonebot-adapter-onebot not importable: {missing}")
    data_dir = tmp_path / "data"
    records = Records(tmp_path / "nonebot-records.jsonl")
    nb_port = free_port()
    nb_lines: list[str] = []

    def context() -> str:
        return run_context("NoneBot", nb_lines, tmp_path, records)

    async def main() -> None:
        platform = EmulatedPlatform()
        await platform.start()
        daemon = nonebot_daemon(tmp_path, data_dir, platform, nb_port, TOKEN)
        nonebot, pumping = await start_nonebot(nb_port, TOKEN, records, tmp_path, nb_lines)
        try:
            await until_listening(nb_port, WAIT)
            await daemon.start()
            await until(lambda: platform.shards[0].live() is not None, WAIT,
                        lambda: f"the daemon's gateway session\n{context()}")
            await until(lambda: any(re.search(rf"Bot {APP}\b.* connected", line)
                                    for line in nb_lines), WAIT,
                        lambda: f"NoneBot connection\n{context()}")
            await platform.push("GROUP_MESSAGE_CREATE", mentioning(
                group_message(1, GROUP, USER) | {"content": "look"}, OTHER))
            await platform.push("GROUP_AT_MESSAGE_CREATE", mentioning(
                group_message(2, GROUP, USER) | {"content": " ask"}, OTHER, everyone=True))
            await until(lambda: len(records.of("event")) == 2, WAIT,
                        lambda: f"the two messages at NoneBot\n{context()}")
            assert await daemon.stop(signal.SIGTERM, WAIT) == 0, context()
        finally:
            await daemon.kill()
            await stop_nonebot(nonebot, pumping, nb_lines, tmp_path)
            await platform.close()

    asyncio.run(asyncio.wait_for(main(), 120))

    store = LmdbIdentityStore(data_dir / "openid-map.db", readonly=True)
    try:
        with store.read() as view:
            other, user = (view.vuin_of(OpenId(APP, who).key) for who in (OTHER, USER))
    finally:
        store.close()
    assert isinstance(other, int) and isinstance(user, int) and other != user, context()
    plain, addressed = records.of("event")
    # every group message: not addressed to the bot; the at of the member where they were
    assert plain["user_id"] == user and plain["to_me"] is False, plain
    assert plain["message"] == [{"type": "text", "data": {"text": "look "}}, _at(other)]
    # the @bot one: NoneBot takes the leading at of the bot off (to_me) and keeps the rest
    assert addressed["to_me"] is True, addressed
    assert addressed["original_message"][0] == _at(addressed["self_id"]), addressed
    assert addressed["message"] == [{"type": "text", "data": {"text": "ask "}}, _at(other),
                                    {"type": "text", "data": {"text": " "}}, _at("all")]
    for frame in records.of("raw"):  # on the wire, before NoneBot's models
        assert f"[CQ:at,qq={other}]" in frame["raw_message"], frame
