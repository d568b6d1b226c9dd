"""``gensokyo-idmap demo`` driven by a real OneBot client: NoneBot2 with its OneBot v11
adapter (``tests/e2e/nonebot_app``), started the usual way, the demo dialling it by reverse
WebSocket as it dials NoneBot's default URL in ``make demo``.

The demo runs as a process (the console script, SIGINT to stop, as Ctrl-C does) on
examples/config.yml with its listeners moved to free ports. It runs until NoneBot has had enough of
the simulated users' messages and notices and its ``pong`` answers to ``ping`` reached the
emulated platform (the demo prints each as ``[chat] bot: pong``), at most a minute; the
script is seeded, so what NoneBot got is checked against the script itself, per chat, in
order.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import signal
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from gensokyo_idmap.demo.script import CAST, GroupSay, Join, PrivateSay, conversation
from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.testing import (
    APP,
    DaemonProcess,
    free_port,
    until,
    until_listening,
    write_config,
)

from .frameworks import nonebot_missing, start_nonebot
from .jsonl_records import Records

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "config.yml"
TOKEN = "demo-e2e-token-3Kp"
SEED = 7
PACE = "0.2"
RUN_FOR = 60.0  # the whole run is bounded by this; it ends as soon as the counts are met
MESSAGES, PONGS, NOTICES = 30, 5, 2  # what must have flowed


def example_on_free_ports(workdir: Path, reverse_ws: str, **onebot: Any) -> tuple[Path, int]:
    """examples/config.yml (what ``make demo`` runs) as ``workdir/config.yml``, its
    listeners moved to free ports and its reverse WebSocket to ``reverse_ws``; ``onebot``:
    more of that section. Returns the file and the identity API's (the console's) port."""
    webhook, forward, api = (free_port() for _ in range(3))
    example = yaml.safe_load(EXAMPLE.read_text("utf-8"))
    example["webhook"]["listen"] = f"127.0.0.1:{webhook}"
    example["onebot"].update({"reverse_ws": [reverse_ws], "forward_ws": f"127.0.0.1:{forward}",
                              "reconnect_interval_seconds": 0.2, **onebot})
    example["api"]["listen"] = f"127.0.0.1:{api}"
    return write_config(workdir / "config.yml", example), api


@pytest.mark.slow
def test_a_nonebot_bot_answers_the_demo_users(tmp_path: Path) -> None:
    missing = nonebot_missing()
    if missing is not None:
        pytest.skip(f"NoneBot2 / nonebot-adapter-onebot not importable: {missing}")
    records = Records(tmp_path / "nonebot-records.jsonl")
    data_dir = tmp_path / "data-demo"
    nb_port = free_port()
    config, api = example_on_free_ports(tmp_path, f"ws://127.0.0.1:{nb_port}/onebot/v11/ws",
                                        access_token=TOKEN)
    demo = DaemonProcess(config, tmp_path, command=(
        "demo", "--data-dir", str(data_dir), "--seed", str(SEED), "--pace", PACE))
    nb_lines: list[str] = []

    def output() -> list[str]:
        return demo.output.read_text("utf-8").splitlines() if demo.output.exists() else []

    def pongs() -> list[str]:
        return [line for line in output() if line.endswith(" bot: pong")]

    def context() -> str:
        return "\n".join(["--- NoneBot (tail) ---", *nb_lines[-30:],
                          "--- demo output (tail) ---", *output()[-30:],
                          "--- demo log (tail) ---", demo.tail(30)])

    def flowed() -> bool:
        return (len(records.of("event")) >= MESSAGES and len(records.of("notice")) >= NOTICES
                and len(records.of("send_result")) >= PONGS and len(pongs()) >= PONGS)

    async def main() -> int:
        nonebot, pumping = await start_nonebot(nb_port, TOKEN, records, tmp_path, nb_lines)
        try:
            await until_listening(nb_port, 20)
            await demo.start()
            await until(flowed, RUN_FOR, lambda: f"events and replies\n{context()}",
                        alive=demo.alive, interval=0.2)
            demo.send_signal(signal.SIGINT)  # Ctrl-C
            return await asyncio.wait_for(demo.proc.wait(), 20)  # type: ignore[union-attr]
        finally:
            await demo.kill()
            if nonebot.returncode is None:
                nonebot.kill()
                await nonebot.wait()
            await asyncio.wait_for(pumping, 20)

    code = asyncio.run(main())
    assert code == 0, context()
    log = demo.log.read_text("utf-8")
    assert "[demo] ready" in log and "[app] stopped" in log, context()
    assert f"console=http://127.0.0.1:{api}/ui/" in log, context()
    assert not records.of("send_error"), context()

    # what NoneBot got is the script, per chat and in order (the daemon keeps each chat's
    # order), with the vUINs the demo's identity store holds
    store = LmdbIdentityStore(data_dir / "openid-map.db", readonly=True)
    try:
        with store.read() as view:
            vuin = {thing.name: view.vuin_of(OpenId(APP, thing.openid).key)
                    for thing in (*CAST.people, *CAST.groups)}
    finally:
        store.close()
    name = {number: who for who, number in vuin.items() if number is not None}
    got: dict[str, list[str]] = defaultdict(list)  # chat → what NoneBot got, in order
    for frame in records.of("raw"):
        chat = (name[frame["group_id"]] if frame["message_type"] == "group"
                else f"private {name[frame['user_id']]}")
        text = re.sub(r"^\[CQ:at,qq=\d+\]", "", frame["raw_message"]).strip()
        got[chat].append(f"{name[frame['user_id']]}: {text}")
    for frame in records.of("raw_notice"):
        got[f"notices {name[frame['group_id']]}"].append(
            f"{name[frame['user_id']]} {frame['notice_type']}")
    script: dict[str, list[str]] = defaultdict(list)
    for step in itertools.islice(conversation(SEED, float(PACE)), 5000):
        action = step.action
        if isinstance(action, GroupSay):
            script[action.group.name].append(f"{action.person.name}: {action.text}")
        elif isinstance(action, PrivateSay):
            script[f"private {action.person.name}"].append(f"{action.person.name}: {action.text}")
        else:
            kind = "group_increase" if isinstance(action, Join) else "group_decrease"
            script[f"notices {action.group.name}"].append(f"{action.person.name} {kind}")
    assert sum(map(len, got.values())) >= MESSAGES + NOTICES, context()
    for chat, seen in got.items():
        assert seen == script[chat][:len(seen)], (chat, seen, context())

    # every pong NoneBot sent reached the emulated platform, shown in the chat it answered
    printed = pongs()
    assert len(printed) == len(records.of("send_result")), context()
    answered = {re.sub(r"^\S+\s+", "", line).split(" bot:")[0] for line in printed}
    assert answered <= {f"[{g.name}]" for g in CAST.groups} | {
        f"[private → {p.name}]" for p in CAST.people}, answered
