"""kill -9 the daemon and fault the framework, over and over: no acknowledged event is lost.

DESIGN §8a: an event is delivered to a WebSocket framework once a pong after it came back,
and the platform is acknowledged only once every framework has the event delivered or kept
for it in outbox.db. Here both ends fail while group messages stream in over the gateway
(the in-process emulator, which keeps pushing while the daemon is down and replays after a
Resume) and the webhook (each chat posted in turn, again until it gets its 200, as the
platform does):

* the daemon is a real process (``gensokyo-idmap serve``), killed with SIGKILL and started
  again on the same data dir;
* the framework is a real process too (``tests/crash/framework_child.py``): a reverse-WS endpoint
  that records every message event it reads to a file, fsyncs before it answers a ping, and
  is faulted four ways: frozen (SIGSTOP: it still accepts TCP, reads nothing, answers
  nothing) and then killed, killed outright, disconnected cleanly (close frame), dropped
  abruptly (no close frame);
* some daemon kills land while the framework is frozen.

Checked at the end, after a quiet phase with both ends healthy: every event the platform was
acknowledged for (a webhook answered 200; a gateway event at or below the seq the daemon had
saved when it died or stopped) is in the framework's records at least once; per chat, the
first deliveries come in the order the chat's messages were sent. Repeats are allowed (an
event written but not confirmed is sent again) and counted.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import ClientError, ClientSession, ClientTimeout

from gensokyo_idmap.qq.gateway import GatewayState
from gensokyo_idmap.qq.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, WebhookKey

from gensokyo_idmap.testing.loopback import free_port
from gensokyo_idmap.testing.platform_emulator import SECRET
from gensokyo_idmap.testing import DaemonProcess, daemon_config, until, write_config

from .test_daemon_crash import CONTENT, ResumingPlatform, check_store, group_payload

FRAMEWORK = Path(__file__).with_name("framework_child.py")
SEED = int(os.environ.get("FAULT_SEED", "14"))
DAEMON_KILLS = 22
FRAMEWORK_FAULTS = ("freeze", "freeze", "freeze", "freeze", "kill", "kill", "clean", "clean",
                    "clean", "abrupt", "abrupt", "abrupt")
FROZEN_DURING_KILL = 3  # daemon kills that land while the framework is frozen
PING_TIMEOUT = 0.5
GW_CHATS = ("g0", "g1", "g2")
WH_CHATS = ("w0", "w1", "w2")
USERS = [f"5{n:031X}" for n in range(8)]


@dataclass(kw_only=True)
class Child:
    """One of the test's processes, started again after each fault, and a file per run
    (its record or its log)."""

    tmp: Path
    proc: asyncio.subprocess.Process | None = None
    files: list[Path] = field(default_factory=list)

    def next_file(self, name: str) -> Path:
        self.files.append(self.tmp / f"{name}-{len(self.files)}")
        return self.files[-1]

    def signal(self, signum: int) -> None:
        assert self.proc is not None and self.proc.returncode is None
        self.proc.send_signal(signum)

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGCONT)  # a frozen one too
            self.proc.kill()
            await self.proc.wait()


@dataclass(kw_only=True)
class Framework(Child):
    """The framework process of the moment; ``files``: the records of all of them."""

    port: int

    async def start(self) -> None:
        record = self.next_file("framework.records")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, str(FRAMEWORK), str(self.port), str(record),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 20)
        assert line == b"ready\n", line

    def delivered(self) -> list[tuple[str, int]]:
        """Every (chat, seq) any framework process recorded, in the order received."""
        out = []
        for path in self.files:
            if not path.exists():
                continue
            for line in path.read_text().splitlines():
                match = CONTENT.search(line)
                assert match is not None, line
                out.append((match.group(1), int(match.group(2))))
        return out


def plan(rng: random.Random) -> list[tuple[str, ...]]:
    """The faults in a shuffled order: each step is a daemon kill, a framework fault, or a
    daemon kill while the framework is frozen (then the framework is killed)."""
    steps: list[tuple[str, ...]] = [("daemon",)] * (DAEMON_KILLS - FROZEN_DURING_KILL)
    steps += [("framework", fault) for fault in FRAMEWORK_FAULTS]
    steps += [("frozen-daemon",)] * FROZEN_DURING_KILL
    rng.shuffle(steps)
    return steps


async def push_gateway(platform: ResumingPlatform, chats: Sequence[str],
                       user: Callable[[], str], rng: random.Random,
                       stop: asyncio.Event) -> None:
    """Group messages of ``chats`` pushed by the emulator, a few ms apart, until ``stop``."""
    sent = dict.fromkeys(chats, 0)
    while not stop.is_set():
        chat = rng.choice(chats)
        sent[chat] += 1
        try:
            await platform.push("GROUP_AT_MESSAGE_CREATE", group_payload(chat, sent[chat],
                                                                         user()))
        except (ConnectionError, RuntimeError, ClientError):
            pass  # recorded in ``sent``: the next Resume replays it
        await asyncio.sleep(rng.uniform(0.004, 0.012))


async def post_webhooks(session: ClientSession, url: str, chat: str, key: WebhookKey,
                        user: Callable[[], str], acked: list[tuple[str, int]],
                        stop: asyncio.Event) -> None:
    """The chat's messages one after the other, each posted again until it gets its 200
    (as the platform retries; then it joins ``acked``); once ``stop`` is set, the one
    pending is finished."""
    seq = 0
    while not stop.is_set():
        seq += 1
        body = json.dumps({"op": 0, "s": seq, "t": "GROUP_AT_MESSAGE_CREATE",
                           "id": f"GROUP_AT_MESSAGE_CREATE:{chat}-{seq}",
                           "d": group_payload(chat, seq, user())}).encode()
        while True:
            ts = str(int(time.time()))
            headers = {TIMESTAMP_HEADER: ts, SIGNATURE_HEADER: key.sign_callback(ts, body)}
            try:
                async with session.post(url, data=body, headers=headers) as resp:
                    await resp.read()
                    status = resp.status
            except (ClientError, asyncio.TimeoutError):
                status = 0  # the daemon is down
            if status == 200:
                acked.append((chat, seq))
                break
            await asyncio.sleep(0.05)


async def catch_up(platform: ResumingPlatform, framework: Framework, daemon: DaemonProcess,
                   tasks: Sequence[asyncio.Task[None]], stop: asyncio.Event,
                   acked: list[tuple[str, int]]) -> None:
    """The quiet end: the sources stop, every message the emulator sent and every webhook
    in ``acked`` reaches the framework, then the daemon stops cleanly."""
    stop.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 60)
    wanted = {(c, s) for _, c, s in platform.messages()} | set(acked)
    await until(lambda: wanted <= set(framework.delivered()), 60, lambda: (
        f"the rest: missing {sorted(wanted - set(framework.delivered()))[:20]}\n"
        f"{daemon.tail()}"))
    assert await daemon.stop(signal.SIGTERM) == 0, daemon.tail()


async def tear_down(platform: ResumingPlatform, framework: Framework, daemon: DaemonProcess,
                    tasks: Sequence[asyncio.Task[None]], stop: asyncio.Event) -> None:
    """Whatever the test started, stopped (after a failure too)."""
    stop.set()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await daemon.kill()
    await framework.kill()
    await platform.close()


@pytest.mark.slow
def test_no_acknowledged_event_is_lost_to_daemon_kills_and_framework_faults(
        tmp_path: Path) -> None:
    rng = random.Random(SEED)
    platform = ResumingPlatform()
    data_dir = tmp_path / "data"
    state_file = data_dir / "gateway-session.json"
    wh_acked: list[tuple[str, int]] = []
    gw_acked_seq = 0  # the highest emulator seq the daemon is known to have saved
    faults: dict[str, int] = {}
    daemon_kills = 0

    def note_saved_seq() -> None:
        nonlocal gw_acked_seq
        gw_acked_seq = max(gw_acked_seq, GatewayState(state_file).load().seq or 0)

    def user() -> str:
        return rng.choice(USERS) if rng.random() < 0.5 else f"{rng.getrandbits(128):032X}"

    async def main() -> list[tuple[str, int]]:
        nonlocal daemon_kills
        await platform.start()
        framework = Framework(tmp=tmp_path, port=free_port())
        port = free_port()
        url = f"http://127.0.0.1:{port}/qqbot"
        daemon = DaemonProcess(write_config(tmp_path / "config.yml", daemon_config(
            data_dir, platform=platform, webhook=f"127.0.0.1:{port}",
            onebot={"reverse_ws": [f"ws://127.0.0.1:{framework.port}/ws"],
                    "extensions": True, "heartbeat_interval_seconds": 1,
                    "ping_timeout_seconds": PING_TIMEOUT})), tmp_path)

        async def daemon_up() -> None:
            await daemon.start()
            await daemon.until_listening(port, 20)

        key = WebhookKey.from_secret(SECRET)
        stop_streams = asyncio.Event()
        tasks: list[asyncio.Task[None]] = []
        try:
            async with ClientSession(timeout=ClientTimeout(total=10)) as session:
                await framework.start()
                await daemon_up()
                await until(state_file.exists, 20, lambda: f"gateway READY\n{daemon.tail()}")
                tasks.append(asyncio.create_task(push_gateway(platform, GW_CHATS, user, rng,
                                                              stop_streams)))
                tasks += [asyncio.create_task(post_webhooks(session, url, chat, key, user,
                                                            wh_acked, stop_streams))
                          for chat in WH_CHATS]
                for step in plan(rng):
                    await asyncio.sleep(rng.uniform(0.2, 0.6))  # events stream in
                    if step[0] == "framework":
                        fault = step[1]
                        faults[fault] = faults.get(fault, 0) + 1
                        if fault == "freeze":
                            framework.signal(signal.SIGSTOP)
                            await asyncio.sleep(rng.uniform(2, 3) * PING_TIMEOUT)
                            await framework.kill()
                            await framework.start()
                        elif fault == "kill":
                            await framework.kill()
                            await framework.start()
                        else:
                            framework.signal(signal.SIGUSR1 if fault == "clean"
                                             else signal.SIGUSR2)
                        continue
                    if step[0] == "frozen-daemon":
                        faults["freeze"] = faults.get("freeze", 0) + 1
                        framework.signal(signal.SIGSTOP)
                        await asyncio.sleep(rng.uniform(0.5, 2) * PING_TIMEOUT)
                    assert await daemon.stop(signal.SIGKILL) == -signal.SIGKILL
                    daemon_kills += 1
                    note_saved_seq()
                    if step[0] == "frozen-daemon":
                        await framework.kill()
                        await framework.start()
                    await daemon_up()
                # quiet: no more faults; the platform stops sending, the daemon catches up
                await catch_up(platform, framework, daemon, tasks, stop_streams, wh_acked)
                note_saved_seq()
        finally:
            await tear_down(platform, framework, daemon, tasks, stop_streams)
        return framework.delivered()

    delivered = asyncio.run(asyncio.wait_for(main(), 240))

    seen = set(delivered)
    gw_acked = [(c, s) for seq, c, s in platform.messages() if seq <= gw_acked_seq]
    acked = set(gw_acked) | set(wh_acked)
    lost = sorted(acked - seen)
    first: dict[str, list[int]] = {}
    for chat, seq in delivered:
        if seq not in first.setdefault(chat, []):
            first[chat].append(seq)
    out_of_order = {}
    for chat, order in first.items():
        wrong = next((i for i in range(len(order) - 1) if order[i] > order[i + 1]), None)
        if wrong is not None:
            out_of_order[chat] = order[max(0, wrong - 5):wrong + 6]
    duplicates = len(delivered) - len(seen)
    framework_faults = sum(faults.values())
    print(f"seed={SEED} daemon-kills={daemon_kills} framework-faults={framework_faults} "
          f"{dict(sorted(faults.items()))} acked={len(acked)} (webhook {len(wh_acked)}, "
          f"gateway {len(gw_acked)}) lost={len(lost)} duplicates={duplicates}")
    assert daemon_kills >= 20 and framework_faults >= 10
    assert len(gw_acked) > 0 and len(wh_acked) > 0
    assert lost == [], f"acknowledged, never delivered: {lost[:20]} ({len(lost)})"
    assert not out_of_order, f"first deliveries out of order around: {out_of_order}"
    check_store(data_dir, {})  # the identity store survived all of it (verify is clean)
