"""kill -9 the running daemon while signed webhooks stream in: every vUIN a framework saw survives.

The daemon runs as a real process (``gensokyo-idmap serve``) with the webhook on loopback and
a reverse-WS framework in this test process. Events carry new users; the framework records
(OpenID, vUIN) from each event (``onebot.extensions`` adds ``real_user_id``). After each
SIGKILL the store is opened here and every pair the framework saw must be in it, with the
identity tables exact inverses; and every webhook the daemon acknowledged (200) while the
framework was connected reached the framework (the daemon waits for the socket write of
connected frameworks before it acknowledges). Several rounds on the same data.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import sys
from pathlib import Path

import yaml
from aiohttp import ClientError, ClientSession, WSMsgType, web
from aiohttp.test_utils import TestServer

from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.qq.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, WebhookKey
from gensokyo_idmap.store.lmdb_identity import LmdbIdentityStore

APP = "102000001"
SECRET = "crash-secret-Vb3"
GROUP = "A1B2C3D4E5F60718293A4B5C6D7E8F90"
ROUNDS = 4


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def event(n: int) -> bytes:
    user = f"{n:032X}"
    return json.dumps({
        "op": 0, "s": n, "t": "GROUP_AT_MESSAGE_CREATE", "id": f"GROUP_AT_MESSAGE_CREATE:{n}",
        "d": {"id": f"ROBOT1.0_crash{n}", "content": f"m{n}", "timestamp": "2025-01-01T12:00:00+08:00",
              "group_openid": GROUP, "author": {"id": user, "member_openid": user}},
    }).encode()


def check_store(data_dir: Path, seen: dict[str, int]) -> None:
    store = LmdbIdentityStore(data_dir / "openid-map.db")
    try:
        with store.read() as view:
            for openid, vuin in seen.items():
                assert view.vuin_of(OpenId(APP, openid).key) == vuin, (openid, vuin)
            forward = set(view.iter_identities())
            assert forward == {(k, v) for v, k in view.iter_vuin_sets()}
            assert len({v for _, v in forward}) == len(forward)  # one vUIN per identity here
    finally:
        store.close()


def test_vuins_seen_downstream_survive_kill_9(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("CRASH_SEED", "7")))
    seen: dict[str, int] = {}
    acked = 0
    acked_users: list[str] = []
    connections = 0

    async def framework(request: web.Request) -> web.WebSocketResponse:
        nonlocal connections
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        connections += 1
        async for message in ws:
            if message.type == WSMsgType.TEXT:
                frame = json.loads(message.data)
                if frame.get("post_type") == "message":
                    openid = frame["real_user_id"]
                    assert seen.setdefault(openid, frame["user_id"]) == frame["user_id"]
        return ws

    async def main() -> None:
        nonlocal acked
        app = web.Application()
        app.router.add_get("/ws", framework)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        port = free_port()
        config = tmp_path / "config.yml"
        config.write_text(yaml.safe_dump({
            "bot": {"app_id": APP, "secret": SECRET},
            "idmap": {"data_dir": str(tmp_path / "data")},
            "webhook": {"listen": f"127.0.0.1:{port}"},
            "onebot": {"reverse_ws": [str(server.make_url("/ws")).replace("http", "ws")],
                       "extensions": True, "heartbeat_interval_seconds": 60,
                       "reconnect_interval_seconds": 0.1},
            "log": {"level": "warning"},
        }))
        key = WebhookKey.from_secret(SECRET)
        n = 0
        try:
            async with ClientSession() as session:
                for round_ in range(1, ROUNDS + 1):
                    child = await asyncio.create_subprocess_exec(
                        sys.executable, "-c", "from gensokyo_idmap.cli import main; main()",
                        "serve", "--config", str(config),
                        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
                    try:
                        for _ in range(1000):  # until the webhook answers
                            try:
                                async with session.post(f"http://127.0.0.1:{port}/qqbot"):
                                    break
                            except ClientError:
                                await asyncio.sleep(0.02)
                        for _ in range(1000):  # and the framework is connected again
                            if connections >= round_:
                                break
                            await asyncio.sleep(0.01)

                        async def stream() -> None:
                            nonlocal n, acked
                            while True:
                                n += 1
                                n_sent = n
                                body = event(n_sent)
                                ts = "1735700000"
                                headers = {TIMESTAMP_HEADER: ts,
                                           SIGNATURE_HEADER: key.sign_callback(ts, body)}
                                try:
                                    async with session.post(f"http://127.0.0.1:{port}/qqbot",
                                                            data=body, headers=headers) as resp:
                                        if resp.status == 200:
                                            acked += 1
                                            acked_users.append(f"{n_sent:032X}")
                                except ClientError:
                                    return

                        streams = [asyncio.create_task(stream()) for _ in range(8)]
                        await asyncio.sleep(rng.uniform(0.3, 0.8))
                        child.send_signal(signal.SIGKILL)
                        await asyncio.wait_for(child.wait(), 10)
                        await asyncio.wait_for(asyncio.gather(*streams), 10)
                    finally:
                        if child.returncode is None:
                            child.kill()
                            await child.wait()
                    await asyncio.sleep(0.1)  # let the framework read what was already sent
                    check_store(tmp_path / "data", dict(seen))
        finally:
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 120))
    assert acked > 0 and len(seen) > 0, (acked, len(seen))
    lost = [user for user in acked_users if user not in seen]
    assert lost == [], f"acknowledged but never delivered: {lost}"
    print(f"rounds={ROUNDS} acked={acked} seen-by-framework={len(seen)}")
