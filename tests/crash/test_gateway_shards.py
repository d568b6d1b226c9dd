"""Gateway shards across daemons (issue 17, "Gateway shards"): two daemons with ``qq.shard``
``[0, 2]`` and ``[1, 2]`` on one PostgreSQL graph each hold their own session, kept in
PostgreSQL (no file in their data dirs); one killed with kill -9 and started again sends a
Resume with its own session id and gets the events of its shard sent while it was down,
each once, while the other shard's daemon goes on undisturbed.

Real daemon processes, the emulated platform with two shards, a reverse-WS framework per
daemon recording the message texts it gets.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

from gensokyo_idmap.store.postgres.connect import connect
from gensokyo_idmap.testing import DaemonProcess, daemon_config, until, write_config
from gensokyo_idmap.testing.loopback import framework_server, ws_url
from gensokyo_idmap.testing.platform_emulator import (
    APP,
    EmulatedPlatform,
    group_message,
    group_on_shard,
)

from .. import test_app_postgres
from ..store_backends import PG_DSN
from .test_daemon_replay import Framework  # counts each message text it gets

schema = test_app_postgres.schema  # the fixture: a schema of the test's own, created

SHARDS = 2
WAIT = 30


def saved_sessions(schema: str) -> dict[int, tuple[str | None, int | None]]:
    with connect(PG_DSN, schema) as conn:
        return {int(str(index)): (None if sid is None else str(sid),
                                  None if seq is None else int(str(seq)))
                for index, sid, seq in conn.execute(
                    "SELECT shard_index, session_id, seq FROM gateway_session "
                    "WHERE app_id = %s AND shard_count = %s", (APP, SHARDS)).fetchall()}


def test_two_shard_daemons_each_resume_their_own_session_after_kill_9(
        tmp_path: Path, schema: str) -> None:
    platform = EmulatedPlatform(shards=SHARDS, overlapping_tokens=True)  # a token each
    frameworks = [Framework() for _ in range(SHARDS)]
    groups = [group_on_shard(index, SHARDS) for index in range(SHARDS)]
    dsn = f"{PG_DSN}?options=-csearch_path%3D{schema}"

    async def main() -> None:
        servers = [await framework_server(framework.handle) for framework in frameworks]
        await platform.start()
        daemons = []
        for index in range(SHARDS):
            config = daemon_config(
                tmp_path / f"data{index}", platform=platform,
                onebot={"reverse_ws": [ws_url(servers[index])]},
                idmap={"backend": "postgres", "postgres_dsn": dsn},
                qq={"shard": [index, SHARDS]})
            daemons.append(DaemonProcess(write_config(tmp_path / f"shard{index}.yml", config),
                                         (tmp_path / f"logs{index}")))
            daemons[-1].logs.mkdir()

        def tails() -> str:
            return "\n".join(daemon.tail() for daemon in daemons)

        async def up(index: int) -> None:
            await daemons[index].start()
            await until(lambda: platform.shards[index].live() is not None, WAIT,
                        lambda: f"shard {index} established\n{tails()}")
            await until(lambda: frameworks[index].connections >= daemons[index].runs, WAIT,
                        lambda: f"framework {index} connected\n{tails()}")

        async def push(index: int, text: str) -> None:
            await platform.push("GROUP_AT_MESSAGE_CREATE", {
                **group_message(0, groups[index]), "id": f"ROBOT1.0_{text}", "content": text})

        async def arrived(index: int, *texts: str) -> None:
            await until(lambda: all(frameworks[index].received[t] for t in texts), WAIT,
                        lambda: f"{texts} at framework {index}\n{tails()}")

        try:
            for index in range(SHARDS):
                await up(index)
            sessions = [shard.session_id for shard in platform.shards]
            assert len(set(sessions)) == SHARDS
            assert sorted(identify["shard"] for identify in platform.identifies) == [
                [index, SHARDS] for index in range(SHARDS)]
            for n in range(4):
                await push(n % SHARDS, f"before{n}")
            await arrived(0, "before0", "before2")
            await arrived(1, "before1", "before3")
            last = platform.shards[1].sent[-1]["s"]
            await until(lambda: (saved_sessions(schema).get(1, (None, 0))[1] or 0) >= last,
                        WAIT, lambda: f"shard 1's seq {last} in PostgreSQL\n{tails()}")

            await daemons[1].kill()  # kill -9
            for n in range(3):
                await push(1, f"down{n}")  # recorded for shard 1's session only
            await push(0, "alive")
            await arrived(0, "alive")

            await up(1)
            await arrived(1, "down0", "down1", "down2")
            assert platform.resumes[-1]["session_id"] == sessions[1]
            assert len(platform.identifies) == SHARDS  # nobody identified afresh
            assert [shard.session_id for shard in platform.shards] == sessions
            assert frameworks[0].received == Counter(
                {"before0": 1, "before2": 1, "alive": 1}), tails()
            assert frameworks[1].received == Counter(
                {"before1": 1, "before3": 1, "down0": 1, "down1": 1, "down2": 1}), tails()
            assert {index: sid for index, (sid, _) in saved_sessions(schema).items()} == dict(
                enumerate(sessions))
            for index in range(SHARDS):
                assert not list((tmp_path / f"data{index}").glob("gateway-session*"))
        finally:
            for daemon in daemons:
                await daemon.close()
            await platform.close()
            for server in servers:
                await server.close()

    asyncio.run(asyncio.wait_for(main(), 180))
