"""``bench/inbound.py --bots N``: what serving several bots costs one daemon (issue 34.6).

Not a test: it prints figures and compares them with a baseline measured in the same run.

What runs
---------
Three real daemons (``gensokyo-idmap serve``), each in its own temp data dir, each started
with a ``bots:`` list: one of 1 bot, two of N bots (default 10). Every bot has its own
emulated platform in this process (its own AppID, secret, tokens and gateway session:
``qq.gateway: true``) and its own forward-WebSocket consumer (``ws://…/<self_id>/``); the
webhook is the daemons' one listener, each callback signed with its bot's key and routed
by ``X-Bot-Appid``.

CPU per event
    The same floods for every daemon, rounds interleaved so that load from other processes
    hits all: ``GROUP_AT_MESSAGE_CREATE`` from known users, through the gateways and
    through the webhook, event ``n`` going to bot ``n mod N`` (the 1-bot daemon gets them
    all); and, for information, the second N bots' daemon with all of them on its first
    bot (what the other bots' presence costs, apart from their traffic: a daemon of its
    own, so that every daemon has stored as many events when it is measured). Each daemon
    knows the same number of people (1000 users in 50 groups, split evenly between its
    bots), all seen in a warm-up. A round's CPU is the daemon's utime + stime over its
    flood (``/proc/<pid>/stat``) divided by the events that arrived; a row shows the median
    of its rounds, and a ratio is the median over rounds of the two daemons' quotient in the
    same round (interleaved: load from elsewhere that lasts a round hits both).

    Each transport is flooded twice over. First as fast as each daemon goes (for
    information): the webhook sender keeps 32 callbacks in flight, so a daemon's rate
    follows how soon it acknowledges, and the CPU an event costs falls with the rate (a
    turn of the loop takes more callbacks in one batch: one claims look-up, one store
    write, one wait for the frameworks' confirmation for all of them). Here N bots'
    events go out on N framework connections, each confirming its own share with its own
    ping, so each waits a little longer, fewer callbacks share a batch, and the figure
    compares two rates as much as two daemons. Then every daemon at one pace,
    :data:`PACE_SHARE` of the slowest one's rate: the same events a second for all, which
    is what an operator's bots send; this is the row of the target. Target: N bots cost at
    most 5 % more CPU per event than one at one pace (``cpu ratio N / 1 <= 1.05``, each
    transport). A daemon whose rate stayed below 90 % of the pace is named: it fell behind
    (the machine was busy), and its figure is of a higher rate than the others'.
Memory per idle bot
    Two more daemons, of 1 bot and of N + 1 bots, started and left idle: their RSS
    (``VmRSS`` of ``/proc/<pid>/status``) once every bot's gateway session is up and
    :data:`SETTLE_SECONDS` more passed, the lower of :data:`IDLE_RUNS` starts each. Target:
    at most 3 MiB per extra bot ((RSS of N + 1 - RSS of 1) / N <= 3 MiB).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from _common import cpu_seconds, die_with_parent, print_heading, proc_status

from gensokyo_idmap.testing.platform_emulator import EmulatedPlatform
from gensokyo_idmap.testing.webhook_sender import WebhookSender

__all__ = ["run_bots"]

BENCH = Path(__file__).resolve().parent
EVENT = "GROUP_AT_MESSAGE_CREATE"
FIRST_APP_ID = 102_100_001
CPU_RATIO = 1.05  # CPU per event, N bots / 1 bot
MIB_PER_BOT = 3.0  # RSS per extra idle bot
PACE_SHARE = 0.5  # the common pace: this share of the slowest daemon's own rate
BEHIND = 0.9  # a daemon whose rate at the pace is below this share of it fell behind
SETTLE_SECONDS = 2.0
IDLE_RUNS = 2
START_TIMEOUT = 60.0
KNOWN_USERS = 1000
GROUPS = 50


def app_id(k: int) -> str:
    return str(FIRST_APP_ID + k)


def openid(prefix: str, i: int) -> str:
    return f"{prefix}{i:015X}E7C4A9B1D3F50862"


@dataclass
class Fleet:
    """One daemon serving ``count`` bots, each on an emulated platform of its own."""

    name: str
    count: int
    tmp: Path
    log_level: str
    hook_port: int
    forward_port: int
    focused: bool = False  # every event on the first bot
    platforms: list[EmulatedPlatform] = field(default_factory=list)
    consumers: list[Any] = field(default_factory=list)  # inbound.Consumer, one per bot
    senders: list[WebhookSender] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def slug(self) -> str:
        return self.name.replace(" ", "-").replace(",", "")

    @property
    def log_path(self) -> Path:
        return self.tmp / f"{self.slug}.log"

    def log_tail(self) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-15:])
        except OSError:
            return "(no log)"

    def config(self) -> dict[str, Any]:
        bots = [{"app_id": app_id(k), "secret": f"bench-secret-{k}",
                 "qq": {"gateway": True, "api_base": platform.url("/").rstrip("/"),
                        "token_url": platform.url("/app/getAppAccessToken")}}
                for k, platform in enumerate(self.platforms)]
        return {  # JSON is YAML
            "bots": bots,
            "idmap": {"data_dir": str(self.tmp / f"{self.slug}-data")},
            "webhook": {"listen": f"127.0.0.1:{self.hook_port}", "path": "/qqbot"},
            "api": {"listen": ""},
            "onebot": {"forward_ws": f"127.0.0.1:{self.forward_port}", "reverse_ws": [],
                       "heartbeat_interval_seconds": 60},
            "log": {"level": self.log_level, "format": "json"},
        }

    async def start(self, session: aiohttp.ClientSession, consumer_type: type[Any], *,
                    consumers: bool = True) -> None:
        """Its platforms, the daemon, each bot's gateway session; with ``consumers`` a
        consumer and a webhook sender per bot."""
        self.platforms = [EmulatedPlatform(30_000, app_id=app_id(k),
                                           secret=f"bench-secret-{k}", token_prefix=f"T{k}-")
                          for k in range(self.count)]
        for platform in self.platforms:
            await platform.start()
        path = self.tmp / f"{self.slug}.yml"
        path.write_text(json.dumps(self.config(), indent=1))
        exe = Path(sys.executable).with_name("gensokyo-idmap")
        cli = ([str(exe)] if exe.exists()
               else [sys.executable, "-c", "from gensokyo_idmap.cli import main; main()"])
        deadline = time.monotonic() + START_TIMEOUT
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen([*cli, "serve", "--config", str(path)],
                                         stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, cwd=BENCH.parent,
                                         preexec_fn=die_with_parent)
        try:
            while not all(platform.identifies for platform in self.platforms):
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("not every bot's gateway session came up")
                await asyncio.sleep(0.05)
            if not consumers:
                return
            for k in range(self.count):
                consumer = consumer_type()
                await consumer.connect(session,
                                       f"ws://127.0.0.1:{self.forward_port}/{app_id(k)}/",
                                       deadline)
                self.consumers.append(consumer)
                self.senders.append(WebhookSender(f"http://127.0.0.1:{self.hook_port}/qqbot",
                                                  app_id(k), f"bench-secret-{k}",
                                                  session=session))
        except (TimeoutError, RuntimeError, OSError, aiohttp.ClientError) as exc:
            raise RuntimeError(f"{self.name} did not start ({exc!r}); its log ends:\n"
                               f"{self.log_tail()}") from None

    def rss_kib(self) -> int:
        assert self.proc is not None
        return proc_status(self.proc.pid)["VmRSS"]

    async def close(self) -> None:
        for consumer in self.consumers:
            await consumer.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        for platform in self.platforms:
            await platform.close()


class Spread:
    """Numbers every event (unique over the run) and says which bot and whom it is from:
    event ``n`` goes to bot ``n mod count``, from one of that bot's share of the people."""

    def __init__(self) -> None:
        self.next = 0

    def take(self, count: int, one: bool = False) -> tuple[int, int, dict[str, Any]]:
        """The next event of ``count`` bots' traffic (``one``: all of it on the first bot,
        from its share of the people)."""
        self.next += 1
        n = self.next
        bot, users = (0 if one else n % count), KNOWN_USERS // count
        user = (n // count) % users
        member = openid("U", user)
        return n, bot, {"id": f"ROBOT1.0_bots{n}", "content": f" bench#{n}#",
                        "timestamp": "2025-01-01T12:00:00+08:00",
                        "group_openid": openid("G", user % max(1, GROUPS // count)),
                        "author": {"id": member, "member_openid": member}}


async def flood(fleet: Fleet, via: str, spread: Spread, count: int, timeout: float,
                post_all: Any, push_all: Any, *, pace: float | None = None,
                warm_up: bool = False) -> tuple[int, float]:
    """``count`` events spread over the bots (a focused fleet: all on its first, but for a
    ``warm_up``) as fast as the transport takes them, or ``pace`` a second; (arrived,
    seconds). ``post_all`` / ``push_all``: inbound.py's senders."""
    one = fleet.focused and not warm_up
    taken = [spread.take(fleet.count, one) for _ in range(count)]
    by_bot: dict[int, list[int]] = {}
    for n, bot, _ in taken:
        by_bot.setdefault(bot, []).append(n)
    for bot, consumer in enumerate(fleet.consumers):
        consumer.expect(by_bot.get(bot, []))
        if not by_bot.get(bot):
            consumer.all_in.set()
    numbers = [n for n, _, _ in taken]
    sent: dict[int, int] = {}
    t0 = time.perf_counter_ns()
    if via == "gateway":
        platforms = fleet.platforms

        async def send(i: int) -> Any:
            _, bot, d = taken[i]
            return await platforms[bot].push(EVENT, d)

        await asyncio.wait_for(push_all(send, sent, numbers, pace=pace), timeout)
    else:
        prepared = [fleet.senders[bot].build(EVENT, d) for _, bot, d in taken]
        # one sender posts every bot's bodies: each body carries its own AppID and signature
        await asyncio.wait_for(post_all(fleet.senders[0], prepared, sent, numbers, pace=pace),
                               timeout)
    try:
        await asyncio.wait_for(asyncio.gather(*(c.all_in.wait() for c in fleet.consumers)),
                               timeout)
    except TimeoutError:
        pass
    got = [consumer.arrived[n] for bot, consumer in enumerate(fleet.consumers)
           for n in by_bot.get(bot, []) if n in consumer.arrived]
    if not got:
        raise RuntimeError(f"{fleet.name}: nothing arrived via {via} in {timeout:g}s")
    return len(got), (max(got) - t0) / 1e9


@dataclass
class Row:
    """The rounds of one daemon in one transport: (events, seconds, its CPU seconds)."""

    rounds: list[tuple[int, float, float]] = field(default_factory=list)

    def add(self, events: int, seconds: float, cpu: float) -> None:
        self.rounds.append((events, seconds, cpu))

    @property
    def events(self) -> int:
        return statistics.median_low(n for n, _, _ in self.rounds)

    @property
    def rate(self) -> float:
        return statistics.median(n / s for n, s, _ in self.rounds if s)

    @property
    def cpu_ms_per_event(self) -> float:
        return statistics.median(self.per_round())

    def per_round(self) -> list[float]:
        """CPU ms per event of each round, in the order measured."""
        return [cpu / n * 1e3 if n else float("nan") for n, _, cpu in self.rounds]


#: (transport, fleet name) -> its rounds
Rows = dict[tuple[str, str], Row]


def ratio(rows: Rows, via: str, name: str, base: str) -> float:
    """The median over rounds of ``name``'s CPU per event over ``base``'s in the same round
    (the rounds are interleaved: load from elsewhere that lasts a round hits both)."""
    pairs = zip(rows[(via, name)].per_round(), rows[(via, base)].per_round(), strict=True)
    return statistics.median(a / b if b else float("nan") for a, b in pairs)


async def cpu_per_event(fleets: list[Fleet], events: int, rounds: int, timeout: float,
                        consumer_type: type[Any], post_all: Any, push_all: Any
                        ) -> tuple[Rows, Rows, dict[str, float]]:
    """(rows as fast as each daemon goes, rows at one pace for all, the pace of each
    transport)."""
    flat_out: Rows = {}
    paced: Rows = {}
    paces: dict[str, float] = {}
    spread = Spread()

    async def measure(rows: Rows, fleet: Fleet, via: str, pace: float | None) -> None:
        assert fleet.proc is not None
        c0 = cpu_seconds(fleet.proc.pid)
        n, seconds = await flood(fleet, via, spread, events, timeout, post_all, push_all,
                                 pace=pace)
        rows.setdefault((via, fleet.name), Row()).add(
            n, seconds, cpu_seconds(fleet.proc.pid) - c0)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as http:
        try:
            for fleet in fleets:
                await fleet.start(http, consumer_type)
                # warm-up: every (bot, person) pair once, through the webhook
                await flood(fleet, "webhook", spread, KNOWN_USERS, timeout, post_all, push_all,
                            warm_up=True)
                await flood(fleet, "gateway", spread, min(500, events), timeout, post_all,
                            push_all, warm_up=True)
            for via in ("gateway", "webhook"):
                for round_ in range(rounds):  # as fast as each goes (for information)
                    for fleet in fleets if round_ % 2 == 0 else fleets[::-1]:
                        await measure(flat_out, fleet, via, None)
                # then all at one pace, below what the slowest reached
                paces[via] = PACE_SHARE * min(flat_out[(via, fleet.name)].rate
                                              for fleet in fleets)
                for round_ in range(rounds):
                    for fleet in fleets if round_ % 2 == 0 else fleets[::-1]:
                        await measure(paced, fleet, via, paces[via])
        finally:
            for fleet in fleets:
                await fleet.close()
    return flat_out, paced, paces


async def idle_rss(fleet: Fleet, consumer_type: type[Any]) -> int:
    """The RSS (KiB) of ``fleet``'s daemon left idle once its bots' sessions are up."""
    async with aiohttp.ClientSession() as http:
        try:
            await fleet.start(http, consumer_type, consumers=False)
            await asyncio.sleep(SETTLE_SECONDS)
            return fleet.rss_kib()
        finally:
            await fleet.close()


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_bots(n: int, tmp: Path, log_level: str, events: int, rounds: int, timeout: float,
             consumer_type: type[Any], post_all: Any, push_all: Any) -> int:
    """Measure and print; the number of targets missed."""
    def fleet(name: str, count: int, focused: bool = False) -> Fleet:
        return Fleet(name, count, tmp, log_level, free_port(), free_port(), focused=focused)

    one, many, focused = "1 bot", f"{n} bots", f"{n} bots, all on one"
    print(f"{events:,} events per flood, spread over the bots; {KNOWN_USERS} known users in "
          f"{GROUPS} groups per daemon, split between its bots; {rounds} round(s)")
    flat_out, paced, paces = asyncio.run(cpu_per_event(
        [fleet(one, 1), fleet(many, n), fleet(focused, n, focused=True)], events, rounds,
        timeout, consumer_type, post_all, push_all))
    misses = 0
    for title, rows, target in (("as fast as each goes", flat_out, False),
                                ("at one pace", paced, True)):
        print_heading(f"  {title:<34} {'events':>7} {'events/s':>9} {'cpu ms/event':>13}")
        for via in ("gateway", "webhook"):
            for name in (one, many, focused):
                row = rows[(via, name)]
                print(f"  {f'{via}, {name}':<34} {row.events:>7} {row.rate:>9,.0f} "
                      f"{row.cpu_ms_per_event:>13.4f}")
        print_heading(f"  {'cpu per event, ' + many + ' / ' + one:<34} {'ratio':>7}")
        for via in ("gateway", "webhook"):
            many_ratio = ratio(rows, via, many, one)
            if target:
                ok = many_ratio <= CPU_RATIO
                misses += not ok
                behind = [name for name in (one, many, focused)
                          if rows[(via, name)].rate < BEHIND * paces[via]]
                verdict = (f"target <= {CPU_RATIO:g}  {'PASS' if ok else 'MISS'}  "
                           f"(at {paces[via]:,.0f} events/s"
                           + (f"; fell behind it: {', '.join(behind)}" if behind else "") + ")")
            else:
                verdict = "(information: each at its own rate)"
            print(f"  {via:<34} {many_ratio:>7.3f}  {verdict}")
            print(f"  {via + ', all on one of them':<34} {ratio(rows, via, focused, one):>7.3f}"
                  "  (information)")

    rss = {}
    for count in (1, n + 1):
        rss[count] = min(asyncio.run(idle_rss(fleet(f"idle {count}", count), consumer_type))
                         for _ in range(IDLE_RUNS))
    per_bot = (rss[n + 1] - rss[1]) / n / 1024
    ok = per_bot <= MIB_PER_BOT
    misses += not ok
    print_heading(f"  {'idle daemon':<34} {'RSS MiB':>9}")
    for count in (1, n + 1):
        print(f"  {f'{count} bot' + ('s' if count > 1 else ''):<34} {rss[count] / 1024:>9.1f}")
    print(f"  {'per extra bot':<34} {per_bot:>9.2f}  target <= {MIB_PER_BOT:g}  "
          f"{'PASS' if ok else 'MISS'}")
    print(f"\n(load average {os.getloadavg()[0]:.2f})")
    return misses
