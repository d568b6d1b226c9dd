"""Inbound benchmark: QQ platform events to a OneBot framework, daemon against a bare relay.

Run: ``.venv/bin/python bench/inbound.py [--quick] [--strict] [--events N] [--log-level L]
[--against REF]``;
``--bots N``: instead, what serving N bots costs one daemon against serving one (CPU per
event, memory per idle bot: ``bench/_inbound_bots.py`` says what runs).

This is a benchmark script, not a test. One run starts two real subprocesses on 127.0.0.1,
feeds both the same events from the emulated platform, and prints the figures of each and
their ratios. The exit code is 0 unless ``--strict`` is given and a target is missed.

What runs
---------
daemon
    ``gensokyo-idmap serve --config <tmp>/daemon.yml``: the gateway (``qq.gateway: true``,
    token endpoint and ``/gateway/bot`` of the emulator) and the webhook receiver both on,
    a forward-WebSocket server for the consumer, both stores in the temp dir (durable, as in
    production), ``log.level`` from ``--log-level`` (default ``info``, as shipped), rendered
    as JSON to a file.
bare relay (``bench/_bare_relay.py``)
    The same transports (aiohttp gateway client, aiohttp webhook server with the same Ed25519
    check, aiohttp forward-WebSocket server) passing the platform's frames on untouched: no
    identity store, no msgid map, no translation. The ceiling. It finishes one gateway
    event (written to the consumer) before reading the next, and acknowledges a webhook
    delivery once the frame was written to the consumer. (The daemon reads ahead: up to 64
    gateway events in flight, in batches. A relay that read ahead too would reach about
    twice the rate and be bound by this process; this one is the ceiling of record.)
emulated platform and consumer (this process)
    One ``gensokyo_idmap.testing.EmulatedPlatform`` per target (token, discovery,
    gateway; ``push()`` sends a dispatch), one ``gensokyo_idmap.testing.WebhookSender`` per
    target (bodies built and signed before the clock starts), and one forward-WebSocket
    consumer per target that stamps each event on arrival.

daemon at REF (``--against REF``)
    The same daemon from a git ref of this checkout (``git archive`` into the temp dir, first
    on its ``PYTHONPATH``), flooded in turn with this tree's in every round: a change's cost
    in events/s, latency and CPU per event, measured in one run on one machine (the
    ``ratio daemon / daemon at REF`` rows; the CPU per event is the steadier figure on a
    busy machine).

Scenarios (each for the daemon and the bare relay)
---------------------------------------------------
gateway / webhook, known users
    ``GROUP_AT_MESSAGE_CREATE`` from a fixed set of users (each always in the same one of a
    set of groups), all seen once in a warm-up: the daemon's read-only path (identities and
    ``last_seen`` found, one msgid write per message).
gateway / webhook, new users
    Every event from a user never seen before (in the known groups): the daemon allocates a
    vUIN and waits for the durable commit before forwarding.

Figures
-------
events, events/s
    A flood of N events (8000, 500 with ``--quick``, or ``--events``): the gateway pushes
    them as fast as the emulator can send, the webhook keeps 32 deliveries in flight. The
    time runs from the first dispatch to the last arrival at the consumer; best of the rounds.
    The bare relay takes gateway events one at a time, so there its events/s is about 1 /
    its per-event latency; the daemon's gateway and both webhooks process concurrently.
p50 / p99 us
    From a separate pass of events sent one at a time (the next only after the previous
    arrived): dispatch (``push()`` / start of the POST) to arrival at the consumer, by
    ``time.perf_counter_ns`` in this process. The pass with the lowest p50 is kept.
cpu
    Each row's note gives the CPU used during its floods by the server process and by this
    process, as a share of one core, and the server's CPU time per event (utime + stime of
    its process from ``/proc/<pid>/stat``, over every event of its floods). This process
    feeds and consumes; if it is near 100% the figure is bound by the benchmark, not the
    server.

Targets: daemon / bare relay events/s >= 0.5 for known users via the gateway, >= 0.8 via
the signed webhook (both check the same Ed25519 signature per callback: the daemon with
PyNaCl's libsodium, about 50 us a check, the relay with ``cryptography``'s OpenSSL, about
100 us, as when the target was set; the daemon's acknowledgement waits for the framework's
pong and the durable de-duplication claim, the relay's only for the write). The rounds interleave daemon and relay, scenario by scenario,
so load from other processes hits both; ``--rounds`` sets how many (best of them kept).

Confirmation by ping
--------------------
The daemon counts an event as delivered to a WebSocket framework once a pong after it came
back (docs/delivery.md), not once it was written: the acknowledgement to the platform waits for
that. A third target, ``daemon, confirm on write``, is the same daemon with the bench-only
environment variable ``GENSOKYO_IDMAP_BENCH_CONFIRM_ON_WRITE=1`` (not a configuration key:
it weakens the guarantee), under which an event counts as delivered once written, as before.
It runs in the gateway / known users scenario only, interleaved with the others, and the run
prints both figures and their ratio. Target: confirmation costs at most 10 % (on / off
events/s >= 0.90).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

# _common before the library: importing it configures structlog (see its docstring).
from _common import (
    Result,
    Table,
    check_disk,
    cpu_seconds,
    die_with_parent,
    print_heading,
    unpack_ref,
)

from gensokyo_idmap.testing.platform_emulator import APP, SECRET, EmulatedPlatform
from gensokyo_idmap.testing.webhook_sender import WebhookSender

BENCH = Path(__file__).resolve().parent
EVENT = "GROUP_AT_MESSAGE_CREATE"
MARK = re.compile(r"bench#(\d+)#")  # in the message text: found in either target's frames
WINDOW = 32  # webhook deliveries in flight during a flood
TARGET_RATIO = {"gateway": 0.5, "webhook": 0.8}  # known users, daemon / bare relay
CONFIRM_RATIO = 0.9  # events/s with ping confirmation / with confirmation on write
CONFIRM_SCENARIO = ("gateway", "known")
CONFIRM_OFF = "daemon, confirm on write"
CONFIRM_ENV = "GENSOKYO_IDMAP_BENCH_CONFIRM_ON_WRITE"
START_TIMEOUT = 30.0
TOTAL_TIMEOUT = 300.0  # the whole measurement, subprocesses included
SCENARIOS = [("gateway", "known"), ("gateway", "new"), ("webhook", "known"),
             ("webhook", "new")]


@dataclass(frozen=True)
class Profile:
    events: int  # per flood
    latency_events: int  # per one-at-a-time pass
    known_users: int
    groups: int
    rounds: int
    flood_timeout: float


FULL = Profile(events=8000, latency_events=300, known_users=1000, groups=50, rounds=3,
               flood_timeout=40.0)
QUICK = Profile(events=500, latency_events=100, known_users=200, groups=20, rounds=1,
                flood_timeout=30.0)


# --- events -------------------------------------------------------------------------------


def openid(prefix: str, i: int) -> str:
    return f"{prefix}{i:015X}E7C4A9B1D3F50862"


class Events:
    """Numbers every event (unique over the run: message ids never repeat) and builds its
    payload; the number travels in the text, where the consumer finds it."""

    def __init__(self, prof: Profile) -> None:
        self.prof = prof
        self.next = 0
        self.new_users = 0

    def take(self, who: str) -> tuple[int, dict[str, Any]]:
        self.next += 1
        n = self.next
        if who == "known":
            user = n % self.prof.known_users
        else:
            self.new_users += 1
            user = self.prof.known_users + self.new_users
        return n, self.payload(n, user)

    def payload(self, n: int, user: int) -> dict[str, Any]:
        member = openid("U", user)
        return {"id": f"ROBOT1.0_bench{n}", "content": f" bench#{n}#",
                "timestamp": "2025-01-01T12:00:00+08:00",
                "group_openid": openid("G", user % self.prof.groups),
                "author": {"id": member, "member_openid": member}}


# --- the consumer ---------------------------------------------------------------------------


class Consumer:
    """A forward-WebSocket client: the arrival time of every bench event, by its number."""

    def __init__(self) -> None:
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self.arrived: dict[int, int] = {}
        self.waiting: dict[int, asyncio.Future[int]] = {}
        self.pending: set[int] = set()
        self.all_in = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None

    async def connect(self, session: aiohttp.ClientSession, url: str, deadline: float) -> None:
        while True:
            try:
                self.ws = await session.ws_connect(url, heartbeat=None)
                break
            except (aiohttp.ClientError, OSError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.05)
        first = await self.ws.receive(timeout=10)
        if '"lifecycle"' not in str(first.data):
            raise RuntimeError(f"{url}: no lifecycle frame first: {first.data!r}")
        self._reader = asyncio.create_task(self._read(self.ws))

    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        clock, search = time.perf_counter_ns, MARK.search
        async for message in ws:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            found = search(message.data)
            if found is None:
                continue  # heartbeat
            t = clock()
            n = int(found.group(1))
            self.arrived[n] = t
            waiter = self.waiting.pop(n, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(t)
            if n in self.pending:
                self.pending.discard(n)
                if not self.pending:
                    self.all_in.set()

    def expect(self, numbers: list[int]) -> None:
        """Set ``all_in`` once every one of ``numbers`` arrived."""
        self.pending = set(numbers)
        self.all_in.clear()

    def wait_for(self, n: int) -> asyncio.Future[int]:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.waiting[n] = future
        return future

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)


# --- the targets ----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Target:
    name: str
    command: Callable[[Target], list[str]]  # called once the emulator listens
    tmp: Path
    log_level: str = "info"
    platform: EmulatedPlatform = field(default_factory=lambda: EmulatedPlatform(30_000))
    hook_port: int = field(default_factory=free_port)
    forward_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    consumer: Consumer = field(default_factory=Consumer)
    sender: WebhookSender | None = None
    env: dict[str, str] = field(default_factory=dict)  # added to this process's environment
    idmap: dict[str, Any] = field(default_factory=dict)  # the daemon's idmap keys, over ours
    onebot: dict[str, Any] = field(default_factory=dict)  # the daemon's onebot keys, over ours
    webhook: dict[str, Any] = field(default_factory=dict)  # the daemon's webhook keys, over ours
    api: dict[str, Any] = field(default_factory=dict)  # the daemon's api section (default: none)
    only: tuple[str, str] | None = None  # the one scenario it runs (None: all)

    @property
    def slug(self) -> str:
        return re.sub(r"[^\w.]+", "-", self.name)

    @property
    def log_path(self) -> Path:
        return self.tmp / f"{self.slug}.log"

    @property
    def hook_url(self) -> str:
        return f"http://127.0.0.1:{self.hook_port}/qqbot"

    def log_tail(self) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-15:])
        except OSError:
            return "(no log)"

    async def start(self, session: aiohttp.ClientSession) -> None:
        """Start the subprocess; return once the consumer is connected, the gateway session is
        up and the webhook answers op 13."""
        deadline = time.monotonic() + START_TIMEOUT
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.command(self), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, cwd=BENCH.parent,
                                         env={**os.environ, **self.env},
                                         preexec_fn=die_with_parent)
        try:
            await self.consumer.connect(session, f"ws://127.0.0.1:{self.forward_port}/",
                                        deadline)
            while not self.platform.identifies:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("no gateway Identify")
                await asyncio.sleep(0.05)
            self.sender = WebhookSender(self.hook_url, APP, SECRET, session=session)
            validation = await self.sender.validate()
            if not validation.ok:
                raise RuntimeError(f"op 13 answered wrongly: {validation.delivery}")
        except (TimeoutError, RuntimeError, OSError, aiohttp.ClientError) as exc:
            raise RuntimeError(f"{self.name} did not start ({exc!r}); its log ends:\n"
                               f"{self.log_tail()}") from None

    async def close(self) -> None:
        """The consumer, the subprocess and the emulated platform, stopped."""
        await self.consumer.close()
        self.stop()
        await self.platform.close()

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def daemon_command(target: Target) -> list[str]:
    """Writes the daemon's config (it needs the emulator's URL) and returns its command."""
    base = target.platform.url("/").rstrip("/")
    config = {  # JSON is YAML
        "bot": {"app_id": APP, "secret": SECRET},
        "idmap": {"data_dir": str(target.tmp / f"{target.slug}-data"), **target.idmap},
        "qq": {"gateway": True, "api_base": base,
               "token_url": target.platform.url("/app/getAppAccessToken")},
        "webhook": {"listen": f"127.0.0.1:{target.hook_port}", "path": "/qqbot",
                    **target.webhook},
        "onebot": {"forward_ws": f"127.0.0.1:{target.forward_port}", "reverse_ws": [],
                   "heartbeat_interval_seconds": 60, **target.onebot},
        "log": {"level": target.log_level, "format": "json"},
        **({"api": target.api} if target.api else {}),
    }
    config_path = target.tmp / f"{target.slug}.yml"
    config_path.write_text(json.dumps(config, indent=1))
    exe = Path(sys.executable).with_name("gensokyo-idmap")
    cli = ([str(exe)] if exe.exists()
           else [sys.executable, "-c", "from gensokyo_idmap.cli import main; main()"])
    return [*cli, "serve", "--config", str(config_path)]


def relay_command(target: Target) -> list[str]:
    return [sys.executable, str(BENCH / "_bare_relay.py"), "--app-id", APP, "--secret", SECRET,
            "--forward-ws", f"127.0.0.1:{target.forward_port}",
            "--webhook-listen", f"127.0.0.1:{target.hook_port}", "--webhook-path", "/qqbot",
            "--gateway", "--api-base", target.platform.url("/").rstrip("/"),
            "--token-url", target.platform.url("/app/getAppAccessToken")]


# --- the passes -----------------------------------------------------------------------------


async def post_all(sender: WebhookSender, prepared: list[Any], sent: dict[int, int],
                   numbers: list[int], acked: list[int] | None = None, *,
                   pace: float | None = None) -> None:
    """Post the prepared deliveries, WINDOW in flight; each must be acknowledged (200), and
    the time of each acknowledgement goes into ``acked`` when given. ``pace``: at most that
    many a second (delivery ``i`` not before ``i / pace`` seconds from the start)."""
    clock = time.perf_counter_ns
    todo = iter(range(len(prepared)))
    start = time.monotonic()

    async def worker() -> None:
        for i in todo:
            if pace and (delay := start + i / pace - time.monotonic()) > 0:
                await asyncio.sleep(delay)
            sent[numbers[i]] = clock()
            delivery = await sender.post(prepared[i])
            if delivery.status != 200:
                raise RuntimeError(f"webhook delivery answered {delivery.status}: "
                                   f"{delivery.body[:200]!r}")
            if acked is not None:
                acked.append(clock())

    await asyncio.gather(*(worker() for _ in range(WINDOW)))


async def _push_all(send: Callable[[int], Awaitable[Any]], sent: dict[int, int],
                    numbers: list[int], *, pace: float | None = None) -> None:
    """Push every event down the gateway as fast as the socket takes them, letting the
    consumer run every 16 pushes: a write that does not block never yields, so without
    that the push loop would hold this process until the socket is full, and the consumer
    (the framework, a process of its own in reality) could not answer the daemon's pings
    meanwhile; the confirmed daemon would then measure this process, not itself.
    ``pace``: at most that many a second (as :func:`post_all`)."""
    clock = time.perf_counter_ns
    start = time.monotonic()
    for i, n in enumerate(numbers):
        if pace and (delay := start + i / pace - time.monotonic()) > 0:
            await asyncio.sleep(delay)
        sent[n] = clock()
        await send(i)
        if i % 16 == 15:
            await asyncio.sleep(0)


def dispatcher(target: Target, via: str, events: Events, who: str, count: int
               ) -> tuple[list[int], Callable[[int], Awaitable[Any]] | None, list[Any]]:
    """The numbers of ``count`` new events and what sends event i (gateway), or the signed
    deliveries (webhook), all built before the clock starts."""
    taken = [events.take(who) for _ in range(count)]
    numbers = [n for n, _ in taken]
    if via == "gateway":
        payloads = [d for _, d in taken]
        push = target.platform.push

        async def send(i: int) -> Any:
            return await push(EVENT, payloads[i])

        return numbers, send, []
    assert target.sender is not None
    return numbers, None, [target.sender.build(EVENT, d) for _, d in taken]


async def flood(target: Target, via: str, events: Events, who: str, count: int,
                timeout: float, acked: list[int] | None = None) -> tuple[int, float]:
    """Send ``count`` events as fast as the transport takes them; (arrived, seconds). The
    webhook's acknowledgement times go into ``acked`` when given."""
    consumer = target.consumer
    numbers, send, prepared = dispatcher(target, via, events, who, count)
    sent: dict[int, int] = {}
    consumer.expect(numbers)
    t0 = time.perf_counter_ns()
    if send is not None:
        await asyncio.wait_for(_push_all(send, sent, numbers), timeout)
    else:
        assert target.sender is not None
        await asyncio.wait_for(post_all(target.sender, prepared, sent, numbers, acked),
                               timeout)
    try:
        await asyncio.wait_for(consumer.all_in.wait(), timeout)
    except TimeoutError:
        pass
    got = [consumer.arrived[n] for n in numbers if n in consumer.arrived]
    if not got:
        raise RuntimeError(f"{target.name}: nothing arrived via {via} in {timeout:g}s")
    return len(got), (max(got) - t0) / 1e9


async def one_at_a_time(target: Target, via: str, events: Events, who: str, count: int,
                        timeout: float) -> list[int]:
    """Latencies (ns, sorted): each event sent once the previous one arrived."""
    numbers, send, prepared = dispatcher(target, via, events, who, count)
    assert target.sender is not None
    lat: list[int] = []
    clock = time.perf_counter_ns
    for i, n in enumerate(numbers):
        arrival = target.consumer.wait_for(n)
        t0 = clock()
        if send is not None:
            await send(i)
        else:
            delivery = await target.sender.post(prepared[i])
            if delivery.status != 200:
                raise RuntimeError(f"webhook delivery answered {delivery.status}")
        lat.append(await asyncio.wait_for(arrival, timeout) - t0)
    lat.sort()
    return lat


async def warm_up(target: Target, events: Events, prof: Profile) -> None:
    """Every known user once via the webhook (their vUINs are allocated here), then a short
    gateway burst."""
    assert target.sender is not None
    prepared = []
    numbers = []
    for user in range(prof.known_users):
        events.next += 1
        numbers.append(events.next)
        prepared.append(target.sender.build(EVENT, events.payload(events.next, user)))
    target.consumer.expect(numbers)
    await asyncio.wait_for(post_all(target.sender, prepared, {}, numbers), prof.flood_timeout)
    await asyncio.wait_for(target.consumer.all_in.wait(), prof.flood_timeout)
    await flood(target, "gateway", events, "known", min(100, prof.events), prof.flood_timeout)


# --- the run --------------------------------------------------------------------------------


@dataclass
class Figures:
    results: dict[tuple[str, str, str], Result] = field(default_factory=dict)
    #: per row: server CPU s, this process's CPU s, wall s, events (over its floods)
    cpu: dict[tuple[str, str, str], list[float]] = field(default_factory=dict)

    def result(self, key: tuple[str, str, str]) -> Result:
        if key not in self.results:
            self.results[key] = Result(f"{key[0]}, {key[1]} users  {key[2]}")
            self.cpu[key] = [0.0, 0.0, 0.0, 0.0]
        return self.results[key]

    def cpu_per_event(self, key: tuple[str, str, str]) -> float:
        """The server's CPU seconds per event over the row's floods."""
        server, _bench, _wall, events = self.cpu[key]
        return server / events

    def cpu_note(self, key: tuple[str, str, str]) -> str:
        server, bench, wall, events = self.cpu[key]
        return (f"cpu: {key[2]} {server / wall:.0%} = {server / events * 1e3:.3f} ms/event, "
                f"bench {bench / wall:.0%}")


async def measure(targets: list[Target], prof: Profile, events_per_flood: int,
                  latency_events: int, scenarios: list[tuple[str, str]]) -> Figures:
    figures = Figures()
    events = Events(prof)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=WINDOW * 2)) as http:
        try:
            for target in targets:
                await target.platform.start()
                await target.start(http)
                await warm_up(target, events, prof)
            for round_ in range(prof.rounds):
                for via, who in scenarios:
                    order = targets if round_ % 2 == 0 else targets[::-1]
                    for target in order:
                        if target.only is not None and target.only != (via, who):
                            continue
                        key = (via, who, target.name)
                        result = figures.result(key)
                        assert target.proc is not None
                        c0, b0, w0 = (cpu_seconds(target.proc.pid), cpu_seconds(None),
                                      time.perf_counter())
                        n, seconds = await flood(target, via, events, who, events_per_flood,
                                                 prof.flood_timeout)
                        cpu = figures.cpu[key]
                        cpu[0] += cpu_seconds(target.proc.pid) - c0
                        cpu[1] += cpu_seconds(None) - b0
                        cpu[2] += time.perf_counter() - w0
                        cpu[3] += n
                        result.keep_best(n, seconds)
                        if n < events_per_flood:
                            result.note = f"only {n} of {events_per_flood} arrived"
                        result.keep_best_latencies(await one_at_a_time(
                            target, via, events, who, latency_events, prof.flood_timeout))
        finally:
            for target in targets:
                await target.close()
    return figures


@contextlib.contextmanager
def temp_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="idmap-bench-inbound-") as tmpdir:
        yield Path(tmpdir)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer events, one round")
    ap.add_argument("--strict", action="store_true", help="exit 1 if a target is missed")
    ap.add_argument("--events", type=int, default=None, help="events per flood")
    ap.add_argument("--rounds", type=int, default=None,
                    help="interleaved rounds (default 3, 1 with --quick; with --bots 5, "
                         "1 with --quick); the best is kept (with --bots the median)")
    ap.add_argument("--scenario", action="append", default=None, metavar="VIA:WHO",
                    choices=[f"{via}:{who}" for via, who in SCENARIOS],
                    help="run only this scenario (repeatable), e.g. gateway:known; for profiling")
    ap.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                    help="the daemon's log.level (default info, as shipped)")
    ap.add_argument("--against", default=None, metavar="REF",
                    help="also run the daemon of a git ref of this checkout (e.g. main), its "
                         "floods interleaved with this tree's: events/s and CPU per event "
                         "of this tree over the ref's")
    ap.add_argument("--bots", type=int, default=None, metavar="N",
                    help="compare a daemon of N bots with one of 1 bot instead: CPU per "
                         "event and memory per idle bot (issue 34.6)")
    args = ap.parse_args(argv)
    if args.bots is not None:
        return bots_main(args)
    scenarios = ([tuple(s.split(":")) for s in args.scenario] if args.scenario
                 else SCENARIOS)
    prof = QUICK if args.quick else FULL
    if args.rounds:
        prof = dataclasses.replace(prof, rounds=args.rounds)
    count = args.events if args.events else prof.events
    latency_events = max(5, min(prof.latency_events, count))
    started, load0 = time.perf_counter(), os.getloadavg()[0]

    with temp_dir() as tmp:
        fstype = check_disk(tmp.resolve())
        print(f"gensokyo-idmap inbound benchmark ({'quick' if args.quick else 'full'}): "
              f"python {platform.python_version()}, aiohttp {aiohttp.__version__}, "
              f"{os.cpu_count()} CPUs, {fstype} at {tmp}; daemon log.level {args.log_level}")
        if fstype in ("tmpfs", "ramfs"):
            print(f"  warning: {fstype}: fsync is free, new-user figures are optimistic")
        print(f"{count:,} events per flood, {latency_events} one at a time, "
              f"{prof.known_users} known users in {prof.groups} groups, {prof.rounds} round(s)")
        targets = [Target("daemon", daemon_command, tmp, args.log_level),
                   Target("bare relay", relay_command, tmp)]
        against = None
        if args.against:
            tree = unpack_ref(args.against, tmp / "against")
            against = Target(f"daemon at {args.against}", daemon_command, tmp, args.log_level,
                             env={"PYTHONPATH": os.pathsep.join(
                                 [str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])})
            targets.append(against)
        if CONFIRM_SCENARIO in scenarios:
            targets.append(Target(CONFIRM_OFF, daemon_command, tmp, args.log_level,
                                  env={CONFIRM_ENV: "1"}, only=CONFIRM_SCENARIO))
        try:
            figures = asyncio.run(asyncio.wait_for(
                measure(targets, prof, count, latency_events, scenarios), TOTAL_TIMEOUT))
        except (RuntimeError, TimeoutError, OSError, aiohttp.ClientError) as err:
            print(f"benchmark failed: {err!r}")
            for target in targets:
                print(f"--- {target.name} log, last lines:\n{target.log_tail()}")
            return 2

    table = Table(name=48, rate=10, us=9)
    table.print_header()
    for via, who in scenarios:
        for name in ("daemon", *([against.name] if against else []), "bare relay", CONFIRM_OFF):
            key = (via, who, name)
            if key not in figures.results:
                continue
            r = figures.results[key]
            cpu = figures.cpu_note(key)
            r.note = f"{r.note}; {cpu}" if r.note else cpu
            print(table.row(r))

    misses = 0
    print_heading(f"  {'ratio daemon / bare relay':<34} {'events/s':>9} {'p50 lat':>9}")
    for via, who in scenarios:
        d, b = figures.results[(via, who, "daemon")], figures.results[(via, who, "bare relay")]
        value = d.ops_per_s / b.ops_per_s
        latency = d.pct_us(0.5) / b.pct_us(0.5)
        if who == "known":
            ok = value >= TARGET_RATIO[via]
            misses += not ok
            verdict = f"target >= {TARGET_RATIO[via]:g}  {'PASS' if ok else 'MISS'}"
        else:
            verdict = "(info)"
        print(f"  {f'{via}, {who} users':<34} {value:>9.3f} {latency:>8.2f}x  {verdict}")

    if against is not None:
        print_heading(f"  {'ratio daemon / ' + against.name:<34} {'events/s':>9} "
                      f"{'p50 lat':>9} {'cpu/event':>10}")
        for via, who in scenarios:
            this, that = (via, who, "daemon"), (via, who, against.name)
            d, r = figures.results[this], figures.results[that]
            cpu, cpu_ref = figures.cpu_per_event(this), figures.cpu_per_event(that)
            # CPU time comes in clock ticks (10 ms): a tiny flood may show none
            cpu_ratio = f"{cpu / cpu_ref:>9.3f}x" if cpu and cpu_ref else f"{'n/a':>10}"
            print(f"  {f'{via}, {who} users':<34} {d.ops_per_s / r.ops_per_s:>9.3f} "
                  f"{d.pct_us(0.5) / r.pct_us(0.5):>8.2f}x {cpu_ratio}")

    if CONFIRM_SCENARIO in scenarios:
        via, who = CONFIRM_SCENARIO
        on = figures.results[(via, who, "daemon")].ops_per_s
        off = figures.results[(via, who, CONFIRM_OFF)].ops_per_s
        ok = on / off >= CONFIRM_RATIO
        misses += not ok
        print_heading(f"  {'confirmation by ping':<34} {'events/s':>9}")
        print(f"  {f'{via}, {who} users, ping-confirmed':<34} {on:>9,.0f}")
        print(f"  {f'{via}, {who} users, confirm on write':<34} {off:>9,.0f}")
        print(f"  {'ratio confirmed / on write':<34} {on / off:>9.3f}  "
              f"target >= {CONFIRM_RATIO:g}  {'PASS' if ok else 'MISS'}")

    print(f"\ntotal {time.perf_counter() - started:.1f}s; "
          f"load average {load0:.2f} at start, {os.getloadavg()[0]:.2f} at end")
    return 1 if misses and args.strict else 0


#: interleaved rounds of ``--bots``: the ratio is their median
BOTS_ROUNDS = 5


def bots_main(args: argparse.Namespace) -> int:
    """``--bots N``: a daemon of N bots against one of 1 bot (``_inbound_bots``)."""
    from _inbound_bots import run_bots

    if args.bots < 2:
        print("--bots: give at least 2 (a daemon of N bots is compared with one of 1)")
        return 2
    prof = QUICK if args.quick else FULL
    rounds = args.rounds or (prof.rounds if args.quick else BOTS_ROUNDS)
    count = args.events if args.events else prof.events
    started, load0 = time.perf_counter(), os.getloadavg()[0]
    with temp_dir() as tmp:
        fstype = check_disk(tmp.resolve())
        print(f"gensokyo-idmap inbound benchmark, {args.bots} bots against 1 "
              f"({'quick' if args.quick else 'full'}): python {platform.python_version()}, "
              f"{os.cpu_count()} CPUs, {fstype} at {tmp}; daemon log.level {args.log_level}")
        try:
            misses = run_bots(args.bots, tmp, args.log_level, count, rounds,
                              prof.flood_timeout, Consumer, post_all, _push_all)
        except (RuntimeError, TimeoutError, OSError, aiohttp.ClientError) as err:
            print(f"benchmark failed: {err!r}")
            return 2
    print(f"total {time.perf_counter() - started:.1f}s; load average {load0:.2f} at start")
    return 1 if misses and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
