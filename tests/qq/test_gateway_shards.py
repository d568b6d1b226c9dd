"""Gateway shards: each client identifies with its ``[index, count]``, the emulated platform
keeps one session per shard and sends each event to its shard's session only, and a
shard's saved session (file) is never resumed by another shard."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from aiohttp import ClientSession

from gensokyo_idmap.qq.events import GroupMessage, QQEvent
from gensokyo_idmap.qq.gateway import GatewayClient, GatewayState
from gensokyo_idmap.testing import APP, EmulatedPlatform, group_message, until
from gensokyo_idmap.testing.platform_emulator import c2c_message, group_on_shard, shard_of

TIMEOUT = 15


def test_the_shard_rule_is_the_guild_rule_and_a_fixed_hash_for_groups_and_users() -> None:
    guild = str((5 << 22) + 12345)
    assert shard_of({"guild_id": guild, "group_openid": "X"}, 4) == 5 % 4
    assert shard_of({"group_openid": "G"}, 1) == 0
    group = group_message(1, group="A1B2")
    assert shard_of(group, 7) == shard_of({"group_openid": "A1B2"}, 7)  # the group decides
    user = c2c_message(1, user="F00D")
    assert shard_of(user, 7) == shard_of({"openid": "F00D"}, 7)
    assert {shard_of({"openid": f"{n:032X}"}, 3) for n in range(30)} == {0, 1, 2}
    assert shard_of({}, 3) == 0 and shard_of("", 3) == 0
    assert [shard_of({"group_openid": group_on_shard(i, 3)}, 3) for i in range(3)] == [0, 1, 2]


def test_two_shards_hold_their_own_sessions_and_resume_them(tmp_path: Path) -> None:
    groups = [group_on_shard(index, 2) for index in (0, 1)]

    async def main() -> None:
        platform = EmulatedPlatform(shards=2, overlapping_tokens=True)  # a token each
        await platform.start()
        received: dict[int, list[str]] = {0: [], 1: []}

        def client(index: int, session: ClientSession) -> GatewayClient:
            async def pipeline(batch: Sequence[QQEvent]) -> None:
                received[index].extend(e.content for e in batch if isinstance(e, GroupMessage))

            return GatewayClient(platform.ws_url(), APP, platform.token_manager(session),
                                 pipeline, GatewayState(tmp_path / f"gw{index}.json", (index, 2)),
                                 shard=(index, 2), reconnect_delay=0.01)

        async def push(n: int, index: int) -> None:
            await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(n, group=groups[index]))

        try:
            async with ClientSession() as session:
                clients = [client(index, session) for index in (0, 1)]
                tasks = [asyncio.create_task(c.run(session)) for c in clients]
                await until(lambda: all(c.session_id for c in clients), TIMEOUT)
                assert sorted(identify["shard"] for identify in platform.identifies) == [
                    [0, 2], [1, 2]]
                sessions = [shard.session_id for shard in platform.shards]
                assert [c.session_id for c in clients] == sessions and len(set(sessions)) == 2
                for n in range(4):
                    await push(n, n % 2)
                await until(lambda: received == {0: ["m0", "m2"], 1: ["m1", "m3"]}, TIMEOUT)

                await clients[1].close()  # shard 1 goes away; its events wait for it
                await tasks[1]
                await push(4, 1)
                await push(5, 0)
                await until(lambda: received[0] == ["m0", "m2", "m5"], TIMEOUT)
                again = client(1, session)  # as a restarted daemon: from the saved file
                assert again.session_id == sessions[1]
                tasks[1] = asyncio.create_task(again.run(session))
                await until(lambda: received[1] == ["m1", "m3", "m4"], TIMEOUT)
                assert platform.resumes[-1]["session_id"] == sessions[1]
                assert again.identifies == 0 and again.resumes == 1
                for c in (clients[0], again):
                    await c.close()
                await asyncio.gather(*tasks)
        finally:
            await platform.close()

    asyncio.run(main())


def test_a_shard_the_platform_does_not_have_is_refused_and_fatal(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmulatedPlatform(shards=2) as platform, ClientSession() as session:
            async def pipeline(batch: Sequence[QQEvent]) -> None:
                pass

            client = GatewayClient(platform.ws_url(), APP, platform.token_manager(session),
                                   pipeline, GatewayState(tmp_path / "gw.json"), shard=(0, 1),
                                   reconnect_delay=0.01)
            await asyncio.wait_for(client.run(session), TIMEOUT)
            assert client.fatal == "the platform closed the gateway with code 4010"

    asyncio.run(main())


def test_a_session_saved_by_another_shard_is_not_resumed(tmp_path: Path) -> None:
    path = tmp_path / "gateway-session.json"
    GatewayState(path, (0, 2)).save("shard-zero", 7)
    assert GatewayState(path, (0, 2)).load() == ("shard-zero", 7)
    assert GatewayState(path, (1, 2)).load() == (None, None)
    assert GatewayState(path).load() == (None, None)
    path.write_text('{"session_id": "old", "seq": 3}')  # written before shards existed
    assert GatewayState(path).load() == ("old", 3)
    assert GatewayState(path, (0, 2)).load() == (None, None)


def test_a_recall_goes_to_the_shard_of_its_guild() -> None:
    guild = str((3 << 22) + 7)
    assert shard_of({"message": {"id": "m", "guild_id": guild}, "op_user": {"id": "1"}},
                    4) == 3
