"""SIGTERM / SIGINT during load: the daemon stops taking events, finishes what it took, closes
the frameworks' connections with close frames and the stores, and exits 0 in bounded time;
nothing it acknowledged is lost.

The daemon runs as a real process (``gensokyo-idmap serve``) with the webhook on loopback; a
reverse-WS framework and a forward-WS framework live in this test process; the emulated
platform side (``gensokyo_idmap.testing.WebhookSender``) posts signed group messages of new users from
several streams at once, and the signal comes mid-stream. Then: exit code 0 within the
bound; requests in flight at the signal were answered; every webhook answered 200 reached
both frameworks, which got close frames; the store holds every (OpenID, vUIN) the framework
saw and passes ``verify``.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

import pytest
from aiohttp import ClientError, ClientSession, WSMsgType

from gensokyo_idmap.testing.webhook_sender import WebhookSender
from gensokyo_idmap.testing.loopback import StableVuinFramework, framework_server, free_port, ws_url
from gensokyo_idmap.testing import DaemonProcess, daemon_config, until, write_config

from .test_daemon_crash import check_store

APP = "102000001"  # the APP check_store reads OpenIDs under
SECRET = "graceful-secret-Nw8"
GROUP = "B1C2D3E4F5A60718293A4B5C6D7E8F90"
STOP_BOUND = 10.0  # seconds from the signal to the exit


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_during_load_loses_nothing_acknowledged(tmp_path: Path, signum: int) -> None:
    framework = StableVuinFramework()
    seen, close_codes = framework.seen, framework.close_codes
    acked: list[str] = []
    refused_after_stop = 0
    acked_at_signal: list[int] = []
    forward_seen: set[str] = set()  # what a forward-WS framework got

    async def main() -> float:
        nonlocal refused_after_stop
        server = await framework_server(framework.handle)
        port, forward_port = free_port(), free_port()
        url = f"http://127.0.0.1:{port}/qqbot"
        daemon = DaemonProcess(write_config(tmp_path / "config.yml", daemon_config(
            tmp_path / "data", app_id=APP, secret=SECRET, webhook=f"127.0.0.1:{port}",
            onebot={"reverse_ws": [ws_url(server)], "extensions": True,
                    "forward_ws": f"127.0.0.1:{forward_port}"})), tmp_path)
        stopping = asyncio.Event()
        try:
            await daemon.start()
            try:
                async with ClientSession() as session:
                    sender = WebhookSender(url, APP, SECRET, session=session)
                    await daemon.until_listening(port, 20)
                    await until(lambda: framework.connections >= 1, 10, daemon.tail)
                    forward = await session.ws_connect(
                        f"ws://127.0.0.1:{forward_port}/")

                    async def forward_reader() -> None:
                        async for message in forward:
                            if message.type == WSMsgType.TEXT:
                                frame = json.loads(message.data)
                                if frame.get("post_type") == "message":
                                    forward_seen.add(frame["real_user_id"])
                        close_codes.append(forward.close_code)

                    reading = asyncio.create_task(forward_reader())

                    async def stream(lane: int) -> None:
                        nonlocal refused_after_stop
                        n = 0
                        while True:
                            n += 1
                            user = f"{lane:02X}{n:030X}"
                            prepared = sender.build("GROUP_AT_MESSAGE_CREATE", {
                                "id": f"ROBOT1.0_g{lane}-{n}", "content": f"m{lane}-{n}",
                                "timestamp": "2025-01-01T12:00:00+08:00",
                                "group_openid": GROUP,
                                "author": {"id": user, "member_openid": user}})
                            try:
                                delivery = await sender.post(prepared)
                            except (ClientError, asyncio.TimeoutError):
                                assert stopping.is_set(), "the daemon went away unasked"
                                refused_after_stop += 1
                                return
                            if delivery.status == 200:
                                acked.append(user)
                            else:  # the platform would deliver it again later
                                assert stopping.is_set(), delivery

                    streams = [asyncio.create_task(stream(lane)) for lane in range(8)]
                    await until(lambda: len(acked) >= 100, 20, lambda: (
                        f"100 acknowledged webhooks (have {len(acked)})\n{daemon.tail()}"))
                    stopping.set()
                    acked_at_signal.append(len(acked))
                    signalled = time.monotonic()
                    code = await daemon.stop(signum, STOP_BOUND)
                    took = time.monotonic() - signalled
                    assert code == 0, daemon.tail()
                    await asyncio.wait_for(asyncio.gather(*streams, reading), 10)
            finally:
                await daemon.kill()
            # what the daemon wrote before it closed the socket is read by now, or soon
            await until(lambda: len(close_codes) == 2, 5, lambda: "the frameworks' close")
            await until(lambda: all(user in seen for user in acked), 5, lambda: (
                f"acknowledged, never delivered: {[u for u in acked if u not in seen][:10]}"))
        finally:
            await server.close()
        stopped = [line for line in daemon.log.read_text(errors="replace").splitlines()
                   if "[app] stopped" in line]
        assert stopped, daemon.tail()  # the finally block ran to its end: stores closed
        return took

    took = asyncio.run(asyncio.wait_for(main(), 90))
    assert took < STOP_BOUND
    # both frameworks (forward WS client, reverse WS server) got a close frame, not a drop
    assert close_codes == [1000, 1000], close_codes
    assert len(acked) >= 100 and refused_after_stop == 8
    assert len(acked) > acked_at_signal[0], "no request in flight at the signal was finished"
    assert set(acked) <= forward_seen  # acknowledged after the forward-WS write, too
    check_store(tmp_path / "data", dict(seen))  # every identity shown is stored; verify ok
    print(f"acked={len(acked)} (after the signal: {len(acked) - acked_at_signal[0]}) "
          f"seen={len(seen)} stop={took:.2f}s")
