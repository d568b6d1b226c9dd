"""With message ids on Redis, an action's Redis reads never hold up the event loop: while
Redis hangs (a private redis-server, stopped with SIGSTOP), a ``get_msg`` waits for it on
a worker thread and a ``get_status`` sent after it is answered first. Were the read made on
the loop (the blocking client, up to its 0.5 s timeout), nothing else could be answered
until it gave up, and ``get_msg`` would answer first."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

from aiohttp import ClientSession

from gensokyo_idmap.app import run_daemon
from gensokyo_idmap.config import Config
from gensokyo_idmap.testing import daemon_config, free_port, until_listening

from ..redis_server import PrivateRedis


def test_a_hanging_redis_holds_up_only_the_action_that_reads_it(tmp_path: Path) -> None:
    redis_server = PrivateRedis(tmp_path)
    redis_server.start()
    onebot_api = free_port()
    config = Config.model_validate(daemon_config(
        tmp_path / "data", secret="", onebot={"http_api": f"127.0.0.1:{onebot_api}"},
        idmap={"runtime_backend": "redis", "redis_url": redis_server.url,
               "redis_prefix": "gsk-offloop:"}))
    assert redis_server.process is not None
    redis_process = redis_server.process

    async def main() -> list[tuple[str, dict[str, Any]]]:
        stop = asyncio.Event()
        daemon = asyncio.create_task(run_daemon(config, stop))
        answered: list[tuple[str, dict[str, Any]]] = []

        async def call(session: ClientSession, action: str, **params: Any) -> None:
            async with session.post(f"http://127.0.0.1:{onebot_api}/{action}",
                                    json=params) as resp:
                answered.append((action, await resp.json()))

        try:
            await until_listening(onebot_api)
            async with ClientSession() as session:
                await call(session, "get_msg", message_id=5)  # Redis answers: unknown id
                redis_process.send_signal(signal.SIGSTOP)
                try:
                    reading = asyncio.create_task(call(session, "get_msg", message_id=5))
                    while not answered[1:] and not reading.done():
                        await asyncio.sleep(0.01)  # the request reaches the daemon first
                        await call(session, "get_status")
                        break
                    await reading
                finally:
                    redis_process.send_signal(signal.SIGCONT)
        finally:
            stop.set()
            await asyncio.wait_for(daemon, 20)
        return answered

    try:
        answered = asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        redis_server.stop()
    assert [action for action, _ in answered] == ["get_msg", "get_status", "get_msg"]
    assert answered[0][1]["retcode"] == 100 and answered[2][1]["retcode"] == 100  # not found
    assert answered[1][1]["retcode"] == 0
