"""A real Koishi bot — ``koishi`` with ``koishi-plugin-adapter-onebot`` — fetching messages
with ``get_msg`` over the daemon's forward WebSocket.

Koishi's adapter turns a ``get_msg`` answer into a message with ``sender.user_id``
(``decodeUser``: it throws on ``sender: {}``), and when a message starts with a ``reply``
segment it fetches the quoted one the same way (an error there is only logged, and the
quote is lost). So the bot (``tests/e2e/koishi_app/bot.cjs``), on ``ping`` in a group and in
C2C, fetches that message (``bot.getMessage``), answers it with a quote of it plus
``pong``, then fetches its own answer: whose ``reply`` makes Koishi fetch the quoted
message in turn. Checked: no error on the way, no warning in Koishi's log, and each fetched
message is the one Koishi saw (content, author's vUIN, group), the answer's author is the
bot, and its quote is the ``ping``. Then the user quotes their ``ping`` (the platform's
``message_type`` 103): the daemon makes that a ``reply`` segment, for which Koishi's adapter
fetches the quoted message with ``get_msg``, and the session's quote is the ``ping``.

The npm packages (versions pinned in ``koishi_app/package.json`` and its
``package-lock.json``) are installed by ``npm ci`` into ``build/koishi-e2e/`` at the top of
the checkout, once per lock file; the test is skipped, saying so, only when node or npm is
absent (``.ci/run`` installs them).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

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
    quoting,
    until,
    until_listening,
    write_config,
)

from .jsonl_records import Records, run_context

KOISHI_APP = Path(__file__).resolve().parent / "koishi_app"
ROOT = Path(__file__).resolve().parents[2]
INSTALL_DIR = ROOT / "build" / "koishi-e2e"
LOCK_FILES = ("package.json", "package-lock.json")
GROUP = "A1B2C3D4E5F60718293A4B5C6D7E8F90"
USER = "0F1E2D3C4B5A69788796A5B4C3D2E1F0"
TOKEN = "koishi-e2e-token-3Jv"
WAIT = 20.0


def node_missing() -> str | None:
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    return None if not missing else f"{' and '.join(missing)} not found on PATH"


def install_koishi() -> Path:
    """``npm ci`` of koishi_app into build/koishi-e2e, unless the same lock is installed
    there already; the directory holding ``node_modules``."""
    stamp = hashlib.sha256(b"".join((KOISHI_APP / name).read_bytes()
                                    for name in LOCK_FILES)).hexdigest()
    marker = INSTALL_DIR / ".installed"
    if marker.exists() and marker.read_text() == stamp and (INSTALL_DIR / "node_modules").is_dir():
        return INSTALL_DIR
    INSTALL_DIR.mkdir(parents=True, exist_ok=True)
    marker.unlink(missing_ok=True)
    for name in LOCK_FILES:
        shutil.copyfile(KOISHI_APP / name, INSTALL_DIR / name)
    done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                          cwd=INSTALL_DIR, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise AssertionError(f"npm ci failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    marker.write_text(stamp)
    return INSTALL_DIR


async def start_koishi(installed: Path, port: int, token: str, records: Records,
                       lines: list[str], *, script: str = "bot.cjs",
                       env: dict[str, str] | None = None
                       ) -> tuple[asyncio.subprocess.Process, asyncio.Task[None]]:
    """The Koishi bot (``koishi_app/<script>``, run from ``installed``) dialling the daemon's
    forward WS on 127.0.0.1:``port`` with ``token``, recording into ``records``, ``env``
    over its environment; the task returned appends its output to ``lines``."""
    env = {**os.environ, "KOISHI_RECORD_FILE": str(records.path),
           "KOISHI_ENDPOINT": f"ws://127.0.0.1:{port}", "KOISHI_SELF_ID": APP,
           "KOISHI_TOKEN": token, "NODE_PATH": str(installed / "node_modules"), **(env or {})}
    koishi = await asyncio.create_subprocess_exec(
        "node", str(KOISHI_APP / script), cwd=installed, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    assert koishi.stdout is not None

    async def pump(stream: asyncio.StreamReader) -> None:
        async for raw in stream:
            lines.append(raw.decode("utf-8", "replace").rstrip())

    return koishi, asyncio.create_task(pump(koishi.stdout))


async def stop_koishi(koishi: asyncio.subprocess.Process | None,
                      pumping: asyncio.Task[None] | None, lines: list[str],
                      log_dir: Path) -> None:
    """Kill Koishi if it still runs, wait for the rest of its output, and keep that in
    ``log_dir/koishi.log``."""
    if koishi is not None and koishi.returncode is None:
        koishi.kill()
        await asyncio.wait_for(koishi.wait(), WAIT)
    if pumping is not None:
        await asyncio.wait_for(pumping, WAIT)
    (log_dir / "koishi.log").write_text("\n".join(lines) + "\n", "utf-8")


def vuins(data_dir: Path) -> tuple[int, int]:
    """The user's and the group's vUINs in the daemon's store (read after it stopped)."""
    store = LmdbIdentityStore(data_dir / "openid-map.db", readonly=True)
    try:
        with store.read() as view:
            user, group = view.vuin_of(OpenId(APP, USER).key), view.vuin_of(OpenId(APP, GROUP).key)
    finally:
        store.close()
    assert isinstance(user, int) and isinstance(group, int)
    return user, group


@pytest.mark.slow
def test_koishi_fetches_messages_and_quotes_with_get_msg_without_an_error(
        tmp_path: Path) -> None:
    missing = node_missing()
    if missing is not None:
        pytest.skip(f"the Koishi e2e test needs Node.js and npm ({missing}; "
                    "apt-get install nodejs npm)")
    installed = install_koishi()
    data_dir = tmp_path / "data"
    records = Records(tmp_path / "koishi-records.jsonl")
    port = free_port()
    lines: list[str] = []
    sends: list[tuple[str, Any]] = []

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
            await platform.push("GROUP_AT_MESSAGE_CREATE",
                                group_message(1, GROUP, USER) | {"content": " ping"})
            await until(lambda: bool(len(records.of("mine")) == 1 or records.of("error")),
                        WAIT, lambda: f"Koishi's group round\n{context()}", alive=koishi_alive)
            await platform.push("C2C_MESSAGE_CREATE", c2c_message(2, USER, "ping"))
            await until(lambda: bool(len(records.of("mine")) == 2 or records.of("error")),
                        WAIT, lambda: f"Koishi's C2C round\n{context()}", alive=koishi_alive)
            # the user quotes their ping, in the group and in C2C
            await platform.push("GROUP_AT_MESSAGE_CREATE", quoting(
                group_message(3, GROUP, USER) | {"content": " what was that"},
                group_message(1, GROUP, USER) | {"content": " ping"}))
            await platform.push("C2C_MESSAGE_CREATE", quoting(
                c2c_message(4, USER, "and this"), c2c_message(2, USER, "ping")))
            await until(lambda: bool(len(records.of("event")) == 4 or records.of("error")),
                        WAIT, lambda: f"Koishi's quotes\n{context()}", alive=koishi_alive)
            koishi.terminate()  # first: the daemon going away is a warning in Koishi's log
            await asyncio.wait_for(koishi.wait(), WAIT)
            assert await daemon.stop() == 0, context()
            sends.extend(platform.api_requests("POST", "/messages"))
        finally:
            await stop_koishi(koishi, pumping, lines, tmp_path)
            await daemon.kill()
            await platform.close()

    asyncio.run(asyncio.wait_for(main(), 120))

    assert records.of("error") == [], context()
    warnings = [line for line in lines if "[W]" in line or "[E]" in line]
    assert warnings == [], context()
    user, group = vuins(data_dir)
    group_event, private_event, group_quote, private_quote = records.of("event")
    (group_quoted, private_quoted), (group_mine, private_mine) = (
        records.of("quoted"), records.of("mine"))

    # the fetched message is the one Koishi was given: content, author, chat
    assert group_event["channelId"] == group_event["guildId"] == str(group), context()
    assert group_quoted["id"] == group_event["id"]
    assert group_quoted["content"] == group_event["content"]
    assert "ping" in group_quoted["content"]
    assert group_quoted["user"] == group_event["userId"] == str(user)
    assert (group_quoted["guild"], group_quoted["channel"]) == (str(group), str(group))
    assert isinstance(group_quoted["timestamp"], int) and group_quoted["timestamp"] > 0
    assert private_quoted["content"] == private_event["content"] == "ping"
    assert private_quoted["user"] == private_event["userId"] == str(user)
    assert private_quoted["channel"] == f"private:{user}"

    # the bot's own answer: its author is the bot, its quote fetched by Koishi itself
    for mine, quoted in ((group_mine, group_quoted), (private_mine, private_quoted)):
        assert mine["user"] == APP, mine
        assert mine["content"] == "pong", mine
        assert mine["quote"] is not None and mine["quote"]["id"] == quoted["id"], mine
        assert mine["quote"]["content"] == quoted["content"], mine
    assert [(path, body["content"], body["msg_id"]) for path, body in sends] == [
        (f"/v2/groups/{GROUP}/messages", "pong", "ROBOT1.0_gw1"),
        (f"/v2/users/{USER}/messages", "pong", "ROBOT1.0_c2c2")]

    # the user's quotes: Koishi fetched each quoted message (get_msg) for the reply segment
    assert group_event["quote"] is None and private_event["quote"] is None
    for quote, event, quoted, said in ((group_quote, group_event, group_quoted, "what was that"),
                                       (private_quote, private_event, private_quoted,
                                        "and this")):
        assert quote["content"].endswith(said), quote
        assert "ping" not in quote["content"], quote  # the quoted text is the quote's own
        assert quote["quote"] is not None, context()
        assert quote["quote"]["id"] == event["id"], quote
        assert quote["quote"]["content"] == quoted["content"], quote
        assert quote["quote"]["user"] == str(user), quote
