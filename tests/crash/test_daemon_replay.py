"""Replays across a restart: an event the daemon delivered is not delivered again, however the
same delivery comes back after a clean stop or a kill -9 (issue 14, item 5).

The daemon runs as a real process (``gensokyo-idmap serve``); a reverse-WS framework in this
test process records every message it gets. Each scenario delivers events, checks they
arrived, stops the daemon (SIGTERM, then SIGKILL), starts it on the same data dir and sends
the same deliveries again: the identical signed webhook request (as a captured callback
replayed, or the platform's retry), or the gateway's replay after a Resume from an earlier
seq (as after a crash inside the seq-save interval). A fresh marker event of the same chat
comes last: events of one chat reach the framework in order, so once the marker is there a
repeat would have arrived before it. Every event must have arrived exactly once.
"""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from pathlib import Path
from typing import Any

from aiohttp import ClientSession, ClientTimeout

from gensokyo_idmap.qq.gateway import GatewayState

from gensokyo_idmap.testing.loopback import RecordingFramework, framework_server, free_port, ws_url
from gensokyo_idmap.testing.platform_emulator import APP, SECRET, EmulatedPlatform, group_message
from gensokyo_idmap.testing.webhook_sender import Prepared, WebhookSender
from gensokyo_idmap.testing import DaemonProcess, daemon_config, until, write_config
GROUP = "C1D2E3F4A5B60718293A4B5C6D7E8F90"
USER = "0A1B2C3D4E5F60718293A4B5C6D7E8F9"


class Framework(RecordingFramework):
    """The reverse-WS endpoint: counts each message it gets, by its text."""

    def __init__(self) -> None:
        super().__init__()
        self.received: Counter[str] = Counter()

    def on_frame(self, frame: dict[str, Any]) -> None:
        if frame.get("post_type") == "message":
            self.received[frame["message"][-1]["data"]["text"]] += 1


async def stop(daemon: DaemonProcess, signum: int) -> None:
    """Stop the daemon with ``signum``: a clean exit after SIGTERM, death by SIGKILL."""
    code = await daemon.stop(signum, 10)
    assert code == (0 if signum == signal.SIGTERM else -signal.SIGKILL), daemon.tail()


def config_file(tmp_path: Path, framework_url: str, **options: Any) -> Path:
    return write_config(tmp_path / "config.yml", daemon_config(
        tmp_path / "data", onebot={"reverse_ws": [framework_url]}, **options))


def test_a_signed_webhook_sent_again_after_a_restart_or_kill_9_is_delivered_once(
        tmp_path: Path) -> None:
    framework = Framework()

    async def main() -> None:
        server = await framework_server(framework.handle)
        port = free_port()
        url = f"http://127.0.0.1:{port}/qqbot"
        daemon = DaemonProcess(config_file(tmp_path, ws_url(server),
                                           webhook=f"127.0.0.1:{port}"), tmp_path)
        try:
            async with ClientSession(timeout=ClientTimeout(total=10)) as session:
                sender = WebhookSender(url, APP, SECRET, session=session)

                def message(text: str) -> Prepared:
                    return sender.build("GROUP_AT_MESSAGE_CREATE", {
                        **group_message(0, GROUP, USER), "id": f"ROBOT1.0_{text}",
                        "content": text})

                async def up() -> None:
                    await daemon.start()
                    await daemon.until_listening(port, 20)
                    await until(lambda: framework.connections >= daemon.runs, 10,
                                lambda: f"framework connection\n{daemon.tail()}")

                async def deliver(prepared: Prepared, text: str) -> None:
                    assert (await sender.post(prepared)).status == 200
                    await until(lambda: framework.received[text] > 0, 10,
                                lambda: f"{text} at the framework\n{daemon.tail()}")

                first = message("first")
                await up()
                await deliver(first, "first")
                sent = [first]
                for n, signum in enumerate((signal.SIGTERM, signal.SIGKILL)):
                    late = message(f"late{n}")  # answered just before the stop
                    assert (await sender.post(late)).status == 200
                    sent.append(late)
                    await stop(daemon, signum)
                    await up()
                    for prepared in sent:  # the very same requests, signature and all
                        delivery = await sender.post(prepared)
                        assert delivery.status == 200, delivery
                    await deliver(message(f"marker{n}"), f"marker{n}")
                    assert framework.received == Counter(
                        {"first": 1, "late0": 1, **({"late1": 1} if n else {}),
                         **{f"marker{i}": 1 for i in range(n + 1)}}), daemon.tail()
                await stop(daemon, signal.SIGTERM)
        finally:
            await daemon.kill()
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 90))


def test_a_gateway_replay_after_a_restart_or_kill_9_is_delivered_once(tmp_path: Path) -> None:
    framework = Framework()
    platform = EmulatedPlatform(heartbeat_ms=200)
    state = GatewayState(tmp_path / "data" / "gateway-session.json")

    async def main() -> None:
        server = await framework_server(framework.handle)
        await platform.start()
        daemon = DaemonProcess(config_file(tmp_path, ws_url(server), platform=platform),
                               tmp_path)

        async def push(text: str) -> None:
            await platform.push("GROUP_AT_MESSAGE_CREATE", {
                **group_message(0, GROUP, USER), "id": f"ROBOT1.0_{text}", "content": text})
            await until(lambda: framework.received[text] > 0, 10,
                        lambda: f"{text} at the framework\n{daemon.tail()}")

        def established() -> int:
            """Sessions the emulator established (READY or RESUMED sent: after a replay)."""
            return sum(event["t"] in ("READY", "RESUMED") for event in platform.sent)

        async def session_started(sessions: int) -> None:
            await until(lambda: established() >= sessions, 10,
                        lambda: f"gateway session {sessions}\n{daemon.tail()}")

        try:
            await daemon.start()
            await session_started(1)
            sent: list[str] = []
            for n, signum in enumerate((signal.SIGTERM, signal.SIGKILL)):
                replay_from = state.load().seq or 0
                for i in range(3):
                    sent.append(f"ev{n}-{i}")
                    await push(sent[-1])
                # acknowledged: the seq is saved (throttled) once its batch was processed
                last = platform.sent[-1]["s"]
                await until(lambda: (state.load().seq or 0) >= last, 10,
                            lambda: f"seq {last} saved\n{daemon.tail()}")
                await stop(daemon, signum)
                # the seq saved last is lost, as a kill -9 within the save interval loses it:
                # the Resume asks for everything after an earlier seq
                state.save(state.load().session_id, replay_from)
                await daemon.start()
                await session_started(n + 2)
                await push(f"marker{n}")
                assert platform.resumes[-1]["seq"] == replay_from
                assert framework.received == Counter(
                    {**{text: 1 for text in sent}, **{f"marker{i}": 1 for i in range(n + 1)}}
                ), daemon.tail()
            await stop(daemon, signal.SIGTERM)
        finally:
            await daemon.kill()
            await platform.close()
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 90))
