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
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import yaml
from aiohttp import ClientSession, ClientTimeout

from gensokyo_idmap.qq.gateway import GatewayState

from gensokyo_idmap.testing.loopback import RecordingFramework, framework_server, free_port, ws_url
from gensokyo_idmap.testing.platform_emulator import APP, SECRET, EmulatedPlatform, group_message
from gensokyo_idmap.testing.webhook_sender import Prepared, WebhookSender
from .test_daemon_crash import log_tail, until, webhook_up

SCRIPT = Path(sys.executable).parent / "gensokyo-idmap"
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


class Daemon:
    """``gensokyo-idmap serve`` on one config, started and stopped as the test says."""

    def __init__(self, config: Path, logs: Path) -> None:
        self.config = config
        self.logs = logs
        self.runs = 0
        self.child: asyncio.subprocess.Process | None = None

    @property
    def log(self) -> Path:
        return self.logs / f"daemon-{self.runs}.log"

    async def start(self) -> asyncio.subprocess.Process:
        self.runs += 1
        with self.log.open("wb") as log:
            self.child = await asyncio.create_subprocess_exec(
                str(SCRIPT), "serve", "--config", str(self.config),
                stdout=asyncio.subprocess.DEVNULL, stderr=log)
        return self.child

    async def stop(self, signum: int) -> None:
        assert self.child is not None
        self.child.send_signal(signum)
        code = await asyncio.wait_for(self.child.wait(), 10)
        assert code == (0 if signum == signal.SIGTERM else -signal.SIGKILL), log_tail(self.log)

    async def kill(self) -> None:
        if self.child is not None and self.child.returncode is None:
            self.child.kill()
            await self.child.wait()


def write_config(tmp_path: Path, framework_url: str, **sections: Any) -> Path:
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({
        "bot": {"app_id": APP, "secret": SECRET},
        "idmap": {"data_dir": str(tmp_path / "data")},
        "onebot": {"reverse_ws": [framework_url], "heartbeat_interval_seconds": 60,
                   "reconnect_interval_seconds": 0.1},
        "log": {"level": "info"},
        **sections,
    }))
    return config


def test_a_signed_webhook_sent_again_after_a_restart_or_kill_9_is_delivered_once(
        tmp_path: Path) -> None:
    framework = Framework()

    async def main() -> None:
        server = await framework_server(framework.handle)
        port = free_port()
        url = f"http://127.0.0.1:{port}/qqbot"
        daemon = Daemon(write_config(tmp_path, ws_url(server),
                                     webhook={"listen": f"127.0.0.1:{port}"}), tmp_path)
        try:
            async with ClientSession(timeout=ClientTimeout(total=10)) as session:
                sender = WebhookSender(url, APP, SECRET, session=session)

                def message(text: str) -> Prepared:
                    return sender.build("GROUP_AT_MESSAGE_CREATE", {
                        **group_message(0, GROUP, USER), "id": f"ROBOT1.0_{text}",
                        "content": text})

                async def up() -> None:
                    child = await daemon.start()
                    await webhook_up(session, url, child, daemon.log)
                    await until(lambda: framework.connections >= daemon.runs, 10,
                                lambda: f"framework connection\n{log_tail(daemon.log)}")

                async def deliver(prepared: Prepared, text: str) -> None:
                    assert (await sender.post(prepared)).status == 200
                    await until(lambda: framework.received[text] > 0, 10,
                                lambda: f"{text} at the framework\n{log_tail(daemon.log)}")

                first = message("first")
                await up()
                await deliver(first, "first")
                sent = [first]
                for n, signum in enumerate((signal.SIGTERM, signal.SIGKILL)):
                    late = message(f"late{n}")  # answered just before the stop
                    assert (await sender.post(late)).status == 200
                    sent.append(late)
                    await daemon.stop(signum)
                    await up()
                    for prepared in sent:  # the very same requests, signature and all
                        delivery = await sender.post(prepared)
                        assert delivery.status == 200, delivery
                    await deliver(message(f"marker{n}"), f"marker{n}")
                    assert framework.received == Counter(
                        {"first": 1, "late0": 1, **({"late1": 1} if n else {}),
                         **{f"marker{i}": 1 for i in range(n + 1)}}), log_tail(daemon.log)
                await daemon.stop(signal.SIGTERM)
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
        daemon = Daemon(write_config(tmp_path, ws_url(server), qq={
            "gateway": True, "api_base": platform.url("/").rstrip("/"),
            "token_url": platform.url("/app/getAppAccessToken")}), tmp_path)

        async def push(text: str) -> None:
            await platform.push("GROUP_AT_MESSAGE_CREATE", {
                **group_message(0, GROUP, USER), "id": f"ROBOT1.0_{text}", "content": text})
            await until(lambda: framework.received[text] > 0, 10,
                        lambda: f"{text} at the framework\n{log_tail(daemon.log)}")

        def established() -> int:
            """Sessions the emulator established (READY or RESUMED sent: after a replay)."""
            return sum(event["t"] in ("READY", "RESUMED") for event in platform.sent)

        async def session_started(sessions: int) -> None:
            await until(lambda: established() >= sessions, 10,
                        lambda: f"gateway session {sessions}\n{log_tail(daemon.log)}")

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
                            lambda: f"seq {last} saved\n{log_tail(daemon.log)}")
                await daemon.stop(signum)
                # the seq saved last is lost, as a kill -9 within the save interval loses it:
                # the Resume asks for everything after an earlier seq
                state.save(state.load().session_id, replay_from)
                await daemon.start()
                await session_started(n + 2)
                await push(f"marker{n}")
                assert platform.resumes[-1]["seq"] == replay_from
                assert framework.received == Counter(
                    {**{text: 1 for text in sent}, **{f"marker{i}": 1 for i in range(n + 1)}}
                ), log_tail(daemon.log)
            await daemon.stop(signal.SIGTERM)
        finally:
            await daemon.kill()
            await platform.close()
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 90))
