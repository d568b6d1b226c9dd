"""A real Koishi bot (``koishi-plugin-adapter-onebot``, forward WS) doing what issue 33
found failing or surprising (items 7, 8, 10), through its own calls:

- ``bot.internal.setGroupCard`` is known but impossible: Koishi's error carries retcode 103
  (an unknown action would be 1404);
- a reply quoting message 99999, an id the daemon never held, is sent without the quote as
  a passive reply to the message that asked for it, and the daemon warns naming the id;
- ``bot.deleteMessage`` twice: the emulated platform answers the second with 404, Koishi's
  error carries retcode 103.

Harness: the Koishi app and helpers of :mod:`tests.e2e.test_koishi`."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

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
from .test_koishi import GROUP, KOISHI_APP, USER, WAIT, install_koishi, node_missing
from .test_nonebot_replies import lines_of

TOKEN = "koishi-replies-token-5Pq"


@pytest.mark.slow
def test_koishi_gets_103_for_the_impossible_and_a_quote_of_a_gone_message_is_sent(
        tmp_path: Path) -> None:
    missing = node_missing()
    if missing is not None:
        pytest.skip(f"the Koishi e2e test needs Node.js and npm ({missing})")
    installed = install_koishi()
    records = Records(tmp_path / "koishi-records.jsonl")
    port = free_port()
    lines: list[str] = []
    sends: list[tuple[str, Any]] = []
    pushed: dict[str, str] = {}

    def context() -> str:
        return run_context("Koishi", lines, tmp_path, records)

    async def main() -> DaemonProcess:
        platform = EmulatedPlatform()
        await platform.start()
        daemon = DaemonProcess(write_config(tmp_path / "config.yml", daemon_config(
            tmp_path / "data", platform=platform, log={"format": "json"}, onebot={
                "forward_ws": f"127.0.0.1:{port}", "access_token": TOKEN})), tmp_path)
        koishi: asyncio.subprocess.Process | None = None
        pumping: asyncio.Task[None] | None = None

        def koishi_alive() -> None:
            if koishi is not None and koishi.returncode is not None:
                raise AssertionError(f"Koishi exited ({koishi.returncode})\n{context()}")

        async def command(n: int, text: str, done: str) -> None:
            d = group_message(n, GROUP, USER) | {"content": f" {text}"}
            pushed[text] = d["id"]
            await platform.push("GROUP_AT_MESSAGE_CREATE", d)
            await until(lambda: bool(records.of(done) or records.of("error")), WAIT,
                        lambda: f"{text!r} done\n{context()}", alive=koishi_alive)

        try:
            await daemon.start()
            await until(lambda: bool(platform.identifies), WAIT,
                        lambda: f"gateway Identify\n{context()}", alive=daemon.alive)
            await until_listening(port, WAIT, alive=daemon.alive)
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
            await until(lambda: bool(records.of("ready") or records.of("error")), WAIT,
                        lambda: f"Koishi connected\n{context()}", alive=koishi_alive)
            await command(1, "card", "card")
            await command(2, "quote gone", "gone")
            await command(3, "recall twice", "recall_again")
            koishi.terminate()
            await asyncio.wait_for(koishi.wait(), WAIT)
            assert await daemon.stop() == 0, context()
            sends.extend(platform.api_requests("POST", "/messages"))
        finally:
            if koishi is not None and koishi.returncode is None:
                koishi.kill()
                await asyncio.wait_for(koishi.wait(), WAIT)
            if pumping is not None:
                await asyncio.wait_for(pumping, WAIT)
            (tmp_path / "koishi.log").write_text("\n".join(lines) + "\n", "utf-8")
            await daemon.kill()
            await platform.close()
        return daemon

    daemon = asyncio.run(asyncio.wait_for(main(), 120))

    assert records.of("error") == [], context()
    [card] = records.of("card")
    assert card is not None and card["code"] == 103, card  # not 1404: known, impossible
    assert "set_group_card" in card["message"], card
    [gone] = records.of("gone")
    assert len(gone) == 1, gone  # sent: one message id back
    body = next(body for _, body in sends if body["content"] == "still here")
    assert body["msg_id"] == pushed["quote gone"], sends  # the usual rule's choice
    warned = [(entry["reply_to"], entry["reason"]) for entry in
              lines_of(daemon.log, "message", "reply sent without its quote")]
    assert warned == [(99999, "unknown or expired")], context()
    [again] = records.of("recall_again")
    assert again is not None and again["code"] == 103, again
    assert [path for path, _ in sends].count(f"/v2/groups/{GROUP}/messages") == 2
