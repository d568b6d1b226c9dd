"""A cluster end to end (issue 17): two ``gensokyo-idmap serve`` processes on one PostgreSQL
schema and one Redis prefix of this test's own, behind one emulated platform in webhook mode,
a reverse-WS framework on each; each daemon's config is ``examples/cluster.yml`` with this
machine's servers, ports and data dirs put over it.

What it shows, as an operator running two daemons behind one webhook URL would see it:

- the graph is one: the same user has the same vUIN on both daemons;
- message ids are one: a framework on daemon B replies to a message daemon A received, and
  the platform gets that message's id as the passive-reply ``msg_id``;
- a signed webhook flood spread over both, some events sent again to the other daemon once
  acknowledged (the platform's retry landing elsewhere), and daemon B killed with SIGKILL
  half-way: the sender keeps retrying what was not acknowledged on the other daemon, as the
  platform does, and in the end every event is acknowledged, every acknowledged event
  reached a framework, no framework got one twice, and a retry of an acknowledged event
  delivered nothing more anywhere;
- a daemon killed while its framework has not yet confirmed an event (the pong held): the
  platform's retries of that event on the other daemon are refused only until the killed
  daemon's in-flight mark, a lease of seconds, lapses; then it is delivered there, once.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import WSMsgType, web
from aiohttp.test_utils import TestServer

from gensokyo_idmap.runtime.redis.state import IN_FLIGHT_SECONDS
from gensokyo_idmap.runtime.redis.connection import RedisRuntime
from gensokyo_idmap.testing import (
    APP,
    SECRET,
    DaemonProcess,
    EmulatedPlatform,
    Prepared,
    RecordingFramework,
    WebhookSender,
    daemon_command,
    daemon_config,
    framework_server,
    free_port,
    group_message,
    until,
    write_config,
    ws_url,
)

from ..conftest import REDIS_URL
from ..store_backends import PG_DSN, fresh_schema

CLUSTER_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cluster.yml"
EVENT = "GROUP_AT_MESSAGE_CREATE"
MARK = re.compile(r"flood#(\d+)#")
USERS = 12
GROUPS = 3
FLOOD = 240  # events in the flood
IN_FLIGHT = 8  # webhook deliveries in flight at once during the flood
RETRY_EVERY = 4  # every 4th flood event is posted again to the other daemon once acknowledged
KILL_AFTER = 80  # daemon B is killed once this many flood events were acknowledged
#: How long an event may take to be acknowledged somewhere: one that was in flight on the
#: killed daemon is refused elsewhere until its in-flight mark in Redis expires.
ACK_DEADLINE = IN_FLIGHT_SECONDS + 40
RETRY_PAUSE = 0.1  # between attempts at one event, as the platform waits before a retry
MAX_ATTEMPTS = int(ACK_DEADLINE / RETRY_PAUSE) + 1  # the count bound beside the time bound
TEST_SECONDS = ACK_DEADLINE + 90  # the whole scenario, start-up and shutdown included


def openid(kind: str, n: int) -> str:
    return f"{kind}{n:07d}C1A5B7E2D4F6A8C0B2D4E6F8"


def flood_message(n: int) -> dict[str, Any]:
    """Flood event ``n``: one of :data:`USERS` users, each always in the same group."""
    user = n % USERS
    d = group_message(n, group=openid("G", user % GROUPS), user=openid("U", user))
    d["id"] = f"ROBOT1.0_cluster{n}"
    d["content"] = f" flood#{n}#"
    return d


class ClusterFramework(RecordingFramework):
    """A reverse-WS framework keeping every message event and the answers to its actions."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[dict[str, Any]] = []
        self.answers: dict[str, dict[str, Any]] = {}
        self._echo = itertools.count(1)

    def on_frame(self, frame: dict[str, Any]) -> None:
        if frame.get("post_type") == "message":
            self.messages.append(frame)
        elif "echo" in frame:
            self.answers[str(frame["echo"])] = frame

    def flood_numbers(self) -> Counter[int]:
        """How often each flood event arrived here."""
        found = (MARK.search(str(m.get("raw_message", ""))) for m in self.messages)
        return Counter(int(f.group(1)) for f in found if f is not None)

    def message_with(self, text: str) -> dict[str, Any] | None:
        return next((m for m in self.messages if text in str(m.get("raw_message"))), None)

    async def call(self, action: str, **params: Any) -> dict[str, Any]:
        """Send an action on the live connection; its answer."""
        assert self.socket is not None and not self.socket.closed, "no framework connection"
        echo = f"call{next(self._echo)}"
        await self.socket.send_json({"action": action, "params": params, "echo": echo})
        await until(lambda: echo in self.answers, 10, f"the answer to {action}")
        return self.answers.pop(echo)


@dataclass
class Attempts:
    """Every post of one flood event: (daemon, HTTP status, or 0 for no answer)."""

    tries: list[tuple[int, int]] = field(default_factory=list)

    @property
    def acked(self) -> bool:
        return any(status == 200 for _, status in self.tries)

    @property
    def clean(self) -> bool:
        """Acknowledged at the first post (then maybe posted again: the retry)."""
        return bool(self.tries) and self.tries[0][1] == 200


@pytest.fixture
def dsn() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a schema of this test's own (dropped after)."""
    with fresh_schema(create=True) as schema:
        yield f"{PG_DSN}?options=-csearch_path%3D{schema}"


async def run_cli(config: Path, *args: str) -> None:
    """``gensokyo-idmap --config config ARGS`` (the kit's command line for the CLI, without
    ``serve``), which must exit 0; no ``GSK_*`` variable of the shell reaches it."""
    command = [*daemon_command(config)[:-3], "--config", str(config), *args]
    env = {name: value for name, value in os.environ.items() if not name.startswith("GSK_")}
    proc = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.STDOUT, env=env)
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, out.decode(errors="replace")


async def post(sender: WebhookSender, prepared: Prepared) -> int:
    """The status of one POST, 0 when the daemon did not answer (it is dead, or dying)."""
    try:
        return (await sender.post(prepared)).status
    except (aiohttp.ClientError, OSError, TimeoutError):
        return 0


async def deliver(senders: list[WebhookSender], first: int, prepared: Prepared,
                  attempts: Attempts, deadline: float) -> None:
    """Post until a daemon acknowledges (200), switching daemon after each refusal, as the
    platform retries; then, every :data:`RETRY_EVERY` th event, once more to the other."""
    loop = asyncio.get_running_loop()
    daemon = first
    for _ in range(MAX_ATTEMPTS):
        status = await post(senders[daemon], prepared)
        attempts.tries.append((daemon, status))
        if status == 200:
            break
        if loop.time() > deadline:
            return
        daemon = 1 - daemon
        await asyncio.sleep(RETRY_PAUSE)
    else:
        return
    assert prepared.seq is not None
    if prepared.seq % RETRY_EVERY == 0:
        other = 1 - daemon
        attempts.tries.append((other, await post(senders[other], prepared)))


#: What runs once both daemons and their frameworks are up: (a webhook sender per daemon,
#: the frameworks, the daemons, the platform). It stops the daemons it expects to survive.
Scenario = Callable[[list[WebhookSender], list["ClusterFramework"], list[DaemonProcess],
                     EmulatedPlatform], Awaitable[None]]


async def cluster(tmp_path: Path, dsn: str, prefix: str,
                  frameworks: list[ClusterFramework], scenario: Scenario) -> None:
    platform = EmulatedPlatform(overlapping_tokens=True)  # each daemon fetches its own token
    await platform.start()
    servers: list[TestServer] = []
    try:
        for framework in frameworks:
            servers.append(await framework_server(framework.handle))
        await with_servers(tmp_path, dsn, prefix, platform, frameworks, servers, scenario)
    finally:
        for server in servers:
            await server.close()
        await platform.close()


async def with_servers(tmp_path: Path, dsn: str, prefix: str, platform: EmulatedPlatform,
                       frameworks: list[ClusterFramework], servers: list[TestServer],
                       scenario: Scenario) -> None:
    """The daemons' part of :func:`cluster`, once the platform and frameworks listen."""
    ports = [free_port(), free_port()]
    daemons: list[DaemonProcess] = []
    example = yaml.safe_load(CLUSTER_EXAMPLE.read_text(encoding="utf-8"))
    for i in (0, 1):
        # examples/cluster.yml, with what is this machine's and this test's put over it
        config = daemon_config(
            tmp_path / f"data{i}", platform=platform, webhook=f"127.0.0.1:{ports[i]}",
            onebot={"reverse_ws": [ws_url(servers[i])], "forward_ws": "", "extensions": True},
            idmap={"postgres_dsn": dsn, "redis_url": REDIS_URL, "redis_prefix": prefix})
        config = {name: {**example.get(name, {}), **config.get(name, {})}
                  for name in example.keys() | config.keys()}
        config["qq"]["gateway"] = example["qq"]["gateway"]  # daemon_config's platform turns it on
        (tmp_path / f"d{i}").mkdir()
        daemons.append(DaemonProcess(write_config(tmp_path / f"d{i}" / "config.yml", config),
                                     tmp_path / f"d{i}"))
    try:
        await run_cli(daemons[0].config, "db", "upgrade")
        for daemon in daemons:
            await daemon.start()
        for i, daemon in enumerate(daemons):
            await daemon.until_listening(ports[i], 30)
            framework = frameworks[i]
            await until(lambda: framework.connections > 0, 30,  # noqa: B023 - awaited here
                        f"framework {i} connected", alive=daemon.alive)
        async with aiohttp.ClientSession() as http:
            senders = [WebhookSender(f"http://127.0.0.1:{port}/qqbot", APP, SECRET,
                                     session=http) for port in ports]
            await scenario(senders, frameworks, daemons, platform)
    finally:
        for daemon in daemons:
            await daemon.kill()


async def graph_message_ids_and_a_flood(senders: list[WebhookSender],
                                        frameworks: list[ClusterFramework],
                                        daemons: list[DaemonProcess],
                                        platform: EmulatedPlatform) -> None:
    await one_graph_and_one_set_of_message_ids(senders, frameworks, platform)
    await flood_with_a_kill(senders, frameworks, daemons)
    assert await daemons[0].close() == 0, daemons[0].tail()


async def one_graph_and_one_set_of_message_ids(senders: list[WebhookSender],
                                               frameworks: list[ClusterFramework],
                                               platform: EmulatedPlatform) -> None:
    """A user speaks on A, then on B: one vUIN. B's framework replies to A's message: the
    platform gets A's message as msg_id (not B's, the chat's newest)."""
    first = group_message(1, group=openid("G", 99), user=openid("U", 99))
    first["content"] = " hello on A"
    then = group_message(2, group=openid("G", 99), user=openid("U", 99))
    then["content"] = " hello on B"
    assert (await senders[0].dispatch(EVENT, first)).status == 200
    assert (await senders[1].dispatch(EVENT, then)).status == 200
    await until(lambda: frameworks[0].message_with("hello on A") is not None, 10, "A's event")
    await until(lambda: frameworks[1].message_with("hello on B") is not None, 10, "B's event")
    on_a, on_b = frameworks[0].message_with("hello on A"), frameworks[1].message_with("hello on B")
    assert on_a is not None and on_b is not None
    assert on_a["real_user_id"] == on_b["real_user_id"] == openid("U", 99)
    assert on_a["user_id"] == on_b["user_id"]
    assert on_a["group_id"] == on_b["group_id"]
    assert on_a["message_id"] != on_b["message_id"]

    answer = await frameworks[1].call(
        "send_group_msg", group_id=on_a["group_id"],
        message=[{"type": "reply", "data": {"id": str(on_a["message_id"])}},
                 {"type": "text", "data": {"text": "answered through B"}}])
    assert answer["status"] == "ok", answer
    path, body = platform.api_requests("POST", "/messages")[-1]
    assert path == f"/v2/groups/{openid('G', 99)}/messages"
    assert body["msg_id"] == first["id"], body
    assert body["content"] == "answered through B"


async def flood_with_a_kill(senders: list[WebhookSender], frameworks: list[ClusterFramework],
                            daemons: list[DaemonProcess]) -> None:
    prepared = [senders[0].build(EVENT, flood_message(n)) for n in range(1, FLOOD + 1)]
    numbers = {p.seq: int(MARK.search(p.body.decode()).group(1))  # type: ignore[union-attr]
               for p in prepared}
    attempts = {n: Attempts() for n in numbers.values()}
    deadline = asyncio.get_running_loop().time() + ACK_DEADLINE
    todo = iter(prepared)

    async def worker() -> None:
        for p in todo:
            n = numbers[p.seq]
            await deliver(senders, n % 2, p, attempts[n], deadline)

    async def kill_b() -> None:
        await until(lambda: sum(a.acked for a in attempts.values()) >= KILL_AFTER, 60,
                    f"{KILL_AFTER} events acknowledged", alive=daemons[1].alive)
        await daemons[1].kill()

    killer = asyncio.create_task(kill_b())
    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    await killer
    assert daemons[1].returncode == -9
    unacked = sorted(n for n, a in attempts.items() if not a.acked)
    assert not unacked, f"never acknowledged: {unacked[:20]} ({len(unacked)})"
    refused_after_kill = [n for n, a in attempts.items() if a.tries[0][1] != 200]
    assert refused_after_kill, "the kill came after the flood: nothing was retried"

    def missing() -> list[int]:
        got = frameworks[0].flood_numbers() + frameworks[1].flood_numbers()
        return sorted(n for n, a in attempts.items() if a.acked and not got[n])

    await until(lambda: not missing(), 10,
                lambda: f"acknowledged events no framework got: {missing()[:20]}",
                alive=daemons[0].alive)
    for i, framework in enumerate(frameworks):
        twice = {n: c for n, c in framework.flood_numbers().items() if c > 1}
        assert not twice, f"framework {i} got events more than once: {twice}"
    both = frameworks[0].flood_numbers() + frameworks[1].flood_numbers()
    retried = [n for n, a in attempts.items() if a.clean and len(a.tries) > 1]
    assert retried, "no acknowledged event was posted again"
    assert all(both[n] == 1 for n in retried), {n: both[n] for n in retried if both[n] != 1}
    vuins: dict[str, set[int]] = {}
    for framework in frameworks:
        for message in framework.messages:
            vuins.setdefault(message["real_user_id"], set()).add(message["user_id"])
    assert len(vuins) == USERS + 1
    assert all(len(v) == 1 for v in vuins.values()), vuins
    assert len({next(iter(v)) for v in vuins.values()}) == USERS + 1  # no vUIN names two


def test_two_daemons_one_graph_one_runtime_and_a_kill_loses_nothing(
        tmp_path: Path, dsn: str, redis_runtime: RedisRuntime) -> None:
    """``redis_runtime`` (conftest): a prefix of this test's own, its keys deleted after."""
    frameworks = [ClusterFramework(), ClusterFramework()]
    asyncio.run(asyncio.wait_for(cluster(tmp_path, dsn, redis_runtime.prefix, frameworks,
                                         graph_message_ids_and_a_flood), TEST_SECONDS))


# --- a daemon killed mid-delivery: the other takes its event over (issue 29.5) -------------

#: Between the platform's retries of the event the killed daemon held; and how many
#: refusals (503: in flight elsewhere) the other daemon may answer before it takes the
#: event over: 10 s of retries, where the old 30 s in-flight mark took 120.
TAKEOVER_PAUSE = 0.25
TAKEOVER_REFUSALS = 40


class PongHoldingFramework(ClusterFramework):
    """Answers the daemon's pings until the first message event arrived, none after: that
    event's delivery stays unconfirmed (in flight) on its daemon."""

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=False)
        await ws.prepare(request)
        self.connections += 1
        self.socket = ws
        async for message in ws:
            if message.type == WSMsgType.PING and not self.messages:
                await ws.pong(message.data)
            elif message.type == WSMsgType.TEXT:
                self.on_frame(json.loads(message.data))
        return ws


async def kill_mid_delivery(senders: list[WebhookSender], frameworks: list[ClusterFramework],
                            daemons: list[DaemonProcess], platform: EmulatedPlatform) -> None:
    """Daemon 0 is killed while its framework holds the pong of an event it delivers; the
    platform retries the event on daemon 1, which refuses it while daemon 0's in-flight
    mark lives, then delivers it, once."""
    prepared = senders[0].build(EVENT, flood_message(1))
    first = asyncio.create_task(post(senders[0], prepared))
    await until(lambda: frameworks[0].flood_numbers()[1] == 1, 10,
                "the event on daemon 0's framework", alive=daemons[0].alive)
    await daemons[0].kill()  # its framework has not confirmed the event yet
    assert await first == 0, "daemon 0 acknowledged the event before its kill"
    refusals = 0
    while (status := await post(senders[1], prepared)) != 200:
        assert status == 503, status
        refusals += 1
        assert refusals < TAKEOVER_REFUSALS, \
            f"daemon 1 still refuses the killed daemon's event after {refusals} retries"
        await asyncio.sleep(TAKEOVER_PAUSE)
    await until(lambda: frameworks[1].flood_numbers()[1] == 1, 10,
                "the event on daemon 1's framework", alive=daemons[1].alive)
    assert (await post(senders[1], prepared)) == 200  # now a known repeat
    assert frameworks[1].flood_numbers() == {1: 1}
    assert await daemons[1].close() == 0, daemons[1].tail()


def test_an_event_a_killed_daemon_was_delivering_is_taken_over_within_seconds(
        tmp_path: Path, dsn: str, redis_runtime: RedisRuntime) -> None:
    """A daemon's in-flight marks are leases it renews while it delivers: killed, it renews
    nothing, and the other daemon takes the platform's next retries of its event within a
    lease (a few seconds), not after a fixed 30 s."""
    frameworks = [PongHoldingFramework(), ClusterFramework()]
    asyncio.run(asyncio.wait_for(cluster(tmp_path, dsn, redis_runtime.prefix, frameworks,
                                         kill_mid_delivery), 120))
