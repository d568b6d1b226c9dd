"""Soak: a steady load on a real daemon for many minutes; its memory, fds and files per minute.

Run: ``.venv/bin/python bench/soak.py [--minutes 15] [--rate 100] [--tracemalloc]``
(``make soak``). Not part of ``make bench``: it takes a quarter of an hour by default.

This is a benchmark script, not a test. It answers one question: does the daemon hold
steady under a steady load, i.e. is everything it keeps per event, per chat, per connection
or per request bounded or expired? After the de-duplication window (5 minutes) and the
message-id TTL (``--msgid-ttl``, 120 s here) have turned over, every figure should be flat.
The de-duplication window follows ``webhook.max_age_seconds`` (``--max-age``, 120 s here:
the window is then its floor, 5 minutes; 11 minutes with the shipped 600 s).

What runs
---------
daemon
    ``gensokyo-idmap serve`` as a subprocess, configured as in production except for a short
    ``idmap.msgid_ttl_seconds`` (``--msgid-ttl``), sweep interval (10 s) and
    ``webhook.max_age_seconds`` (``--max-age``), so message ids and claimed event ids turn
    over within the run: the gateway (``qq.gateway: true``) and the webhook both on, a
    reverse-WebSocket framework, a forward-WebSocket server, the identity API, durable
    stores in a temp dir, ``log.level`` info rendered as JSON to a file outside the data dir.
emulated platform and frameworks (this process)
    ``gensokyo_idmap.testing.EmulatedPlatform`` (token, gateway, OpenAPI sends) and
    ``gensokyo_idmap.testing.WebhookSender`` (signed callbacks). Events alternate between
    the gateway and the webhook, ``--rate`` per second in all, paced by the clock: group
    @-messages (3 of 4) and C2C messages from 2,000 known users, ``--new-share`` of them
    from a user never seen before, who then replaces the longest-known one (the active set
    stays the same size, the identity store keeps growing). The reverse-WS framework
    answers every fifth message with a passive reply (``send_group_msg`` /
    ``send_private_msg`` quoting the message), so the outbound path and outbound message
    ids run too, and drops its connection every 3 minutes (the daemon reconnects; what it
    owes meanwhile goes through outbox.db). A forward-WS client reconnects every minute.
    ``/healthz``, ``/metrics`` and ``/v1/stats`` are fetched every 10 s.

Figures (one row per ``--sample-seconds``, default a minute)
-----------------------------------------------------------
rss, anon, file
    ``VmRSS``, ``RssAnon`` and ``RssFile`` of the daemon (MiB). File-backed pages (the LMDB
    maps, shared libraries) count in VmRSS and RssFile, not in RssAnon: the identity store
    grows by design (every new user stays), and so do its mapped pages. fds: entries of ``/proc/<pid>/fd``. data: bytes allocated on
    disk by the files of the data dir (``st_blocks``; LMDB files are sparse), and the
    msgid-map.db entries (``/v1/stats``). events: sent this minute, acknowledged
    (webhook 200 or gateway dispatch written), arrived at the reverse-WS framework;
    replies: actions answered ok; failed: webhook answers other than 200, actions not ok.

The closing lines give the growth of each figure between the first sample after a
turnover and the last, per 10 minutes, for two turnovers: the de-dup window and the msgid
TTL (``max(de-dup window, msgid TTL) + sweep interval``), and every window the daemon keeps,
which includes the platform's 60-minute C2C reply window (the reply counts of C2C messages
are kept that long, so they grow for the first hour): ``--minutes 75`` for that verdict.
A third verdict starts half an hour later (``--minutes 120`` for it): the reply counts are
hash tables that lose and gain keys at the same rate once the C2C window has turned over,
and such a table settles at the power of two above three times what it holds, up to twice
the size it reached while filling. So one resize comes some minutes after the window (at
minute 75 with the default load: +2.2 MiB of anonymous memory), and none after it; the
test ``test_steady_replies_keep_the_memory_flat_once_every_window_turned_over`` shows it
on the fake clock.
With ``--tracemalloc`` the daemon runs under ``bench/_traced_serve.py`` (tracemalloc with
``--trace-frames`` frames, several times slower: lower ``--rate``, compare its growth, not its
speed) and the 15 allocation sites that grew
most between the first snapshot after the turnover and the last are printed with their
tracebacks: where the memory goes, if it goes anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

# _common before the library: importing it configures structlog (see its docstring).
from _common import check_disk, die_with_parent, proc_status, smaps
from aiohttp import WSMsgType, web
from aiohttp.test_utils import TestServer

from gensokyo_idmap.bridge.dedup import window_seconds
from gensokyo_idmap.runtime.replies import REPLY_WINDOW_SECONDS
from gensokyo_idmap.testing.loopback import framework_server, free_port, ws_url
from gensokyo_idmap.testing.platform_emulator import APP, SECRET, EmulatedPlatform
from gensokyo_idmap.testing.webhook_sender import WebhookSender

BENCH = Path(__file__).resolve().parent
SWEEP_SECONDS = 10.0
POLL_SECONDS = 10.0  # /healthz, /metrics, /v1/stats
REVERSE_DROP_SECONDS = 180.0  # the framework closes its connection this often
FORWARD_CHURN_SECONDS = 60.0  # the forward-WS client reconnects this often
REPLY_EVERY = 5  # the framework answers every fifth message
SETTLE_MINUTES = 30.0  # after every window: the reply counts' tables have resized (docstring)
WEBHOOK_IN_FLIGHT = 64
START_TIMEOUT = 30.0
TRACED_START_TIMEOUT = 180.0  # imports under tracemalloc are slow


def openid(prefix: str, n: int) -> str:
    return f"{prefix}{n:015X}5A0C7E1B93D4F286"


# --- the load -------------------------------------------------------------------------------


@dataclass
class Counts:
    """What happened during the current sample period (reset at each sample)."""

    sent: int = 0
    acked: int = 0
    arrived: int = 0
    replies: int = 0
    failed: int = 0
    forward: int = 0

    def take(self) -> Counts:
        taken = Counts(**vars(self))
        for name in vars(self):
            setattr(self, name, 0)
        return taken


@dataclass
class Load:
    rate: float
    new_share: float
    users: int = 2000  # the known users: the newest this many (a steady active set)
    groups: int = 100
    newest: int = 2000  # the highest user number so far; new users count up from here
    counts: Counts = field(default_factory=Counts)
    n: int = 0
    rng: random.Random = field(default_factory=lambda: random.Random(15))

    def next_event(self) -> tuple[str, dict[str, Any]]:
        """The next event: (type, d); unique message ids, one of the known users or a new
        one, who joins them as the oldest known user leaves: the number of people active at
        any time stays the same, as in a steady real load, while new identities keep
        coming."""
        self.n += 1
        if self.rng.random() < self.new_share:
            self.newest += 1
            user = self.newest
        else:
            user = self.rng.randrange(self.newest - self.users + 1, self.newest + 1)
        uid = openid("U", user)
        stamp = "2025-01-01T12:00:00+08:00"
        if self.n % 4:
            return "GROUP_AT_MESSAGE_CREATE", {
                "id": f"ROBOT1.0_soak{self.n}", "content": f" soak {self.n}", "timestamp": stamp,
                "group_openid": openid("G", user % self.groups),
                "author": {"id": uid, "member_openid": uid}}
        return "C2C_MESSAGE_CREATE", {
            "id": f"ROBOT1.0_soak{self.n}", "content": f"soak {self.n}", "timestamp": stamp,
            "author": {"id": uid, "user_openid": uid}}


class Framework:
    """The reverse-WS framework: counts arrivals, answers every fifth message with a passive
    reply, and drops its connection every REVERSE_DROP_SECONDS."""

    def __init__(self, counts: Counts) -> None:
        self.counts = counts
        self.connections = 0
        self.echo = 0
        self.connected_at = 0.0

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.connections += 1
        self.connected_at = time.monotonic()
        async for message in ws:
            if message.type != WSMsgType.TEXT:
                continue
            frame = json.loads(message.data)
            if "echo" in frame:
                if frame.get("retcode") == 0:
                    self.counts.replies += 1
                else:
                    self.counts.failed += 1
                continue
            if frame.get("post_type") != "message":
                continue
            self.counts.arrived += 1
            if self.counts.arrived % REPLY_EVERY == 0:
                await ws.send_str(json.dumps(self._reply(frame)))
            if time.monotonic() - self.connected_at > REVERSE_DROP_SECONDS:
                await ws.close()
                break
        return ws

    def _reply(self, event: dict[str, Any]) -> dict[str, Any]:
        self.echo += 1
        group = event.get("message_type") == "group"
        target = {"group_id": event["group_id"]} if group else {"user_id": event["user_id"]}
        return {"action": "send_group_msg" if group else "send_private_msg", "echo": self.echo,
                "params": {**target, "message": [
                    {"type": "reply", "data": {"id": str(event["message_id"])}},
                    {"type": "text", "data": {"text": "pong"}}]}}


async def forward_client(url: str, counts: Counts, stop: asyncio.Event) -> None:
    """A forward-WS framework that reconnects every FORWARD_CHURN_SECONDS."""
    async with aiohttp.ClientSession() as session:
        while not stop.is_set():
            try:
                async with session.ws_connect(url, heartbeat=None) as ws:
                    until = time.monotonic() + FORWARD_CHURN_SECONDS
                    while not stop.is_set() and time.monotonic() < until:
                        try:
                            message = await ws.receive(timeout=1.0)
                        except TimeoutError:
                            continue
                        if message.type != WSMsgType.TEXT:
                            break
                        if '"post_type":"message"' in message.data:
                            counts.forward += 1
            except (aiohttp.ClientError, OSError):
                await asyncio.sleep(1.0)


async def poll_api(session: aiohttp.ClientSession, base: str, stop: asyncio.Event,
                   stats: dict[str, Any]) -> None:
    """/healthz, /metrics and /v1/stats every POLL_SECONDS; the last stats kept."""
    while not stop.is_set():
        try:
            for path in ("/healthz", "/metrics"):
                async with session.get(base + path) as resp:
                    await resp.read()
            async with session.get(base + "/v1/stats") as resp:
                if resp.status == 200:
                    stats.update(await resp.json())
        except (aiohttp.ClientError, OSError):
            pass
        try:
            await asyncio.wait_for(stop.wait(), POLL_SECONDS)
        except TimeoutError:
            pass


async def drive(load: Load, platform: EmulatedPlatform, sender: WebhookSender,
                stop: asyncio.Event) -> None:
    """``load.rate`` events per second, alternately by gateway and webhook, paced by the
    clock (a late tick sends at once; the schedule does not drift)."""
    in_flight = asyncio.Semaphore(WEBHOOK_IN_FLIGHT)
    tasks: set[asyncio.Task[None]] = set()
    counts = load.counts

    async def post(t: str, d: dict[str, Any]) -> None:
        try:
            delivery = await sender.post(sender.build(t, d))
            if delivery.status == 200:
                counts.acked += 1
            else:
                counts.failed += 1
        except (TimeoutError, aiohttp.ClientError, OSError):
            counts.failed += 1
        finally:
            in_flight.release()

    interval = 1.0 / load.rate
    start = time.monotonic()
    i = 0
    while not stop.is_set():
        t, d = load.next_event()
        counts.sent += 1
        if i % 2:
            await platform.push(t, d)
            counts.acked += 1
        else:
            await in_flight.acquire()
            task = asyncio.create_task(post(t, d))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        sender.deliveries.clear()  # the sender's own record: this process is not measured
        i += 1
        delay = start + i * interval - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
    await asyncio.gather(*tasks, return_exceptions=True)


# --- measuring the daemon ---------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    minute: float
    rss_mib: float
    anon_mib: float
    file_mib: float
    fds: int
    data_bytes: int
    msgid_entries: int | None
    counts: Counts
    #: Anonymous kB per mapping (see :func:`anon_by_mapping`).
    anon_regions: dict[str, int] = field(default_factory=dict)


def anon_by_mapping(pid: int) -> dict[str, int]:
    """Anonymous kB per mapping of /proc/<pid>/smaps (named as :func:`_common.smaps` names
    them), those holding any. The closing lines say which of them moved, when RSS does."""
    return {name: figures["Anonymous"] for name, figures in smaps(pid).items()
            if figures.get("Anonymous")}


def slope_per_10(samples: list[Sample], figure: Callable[[Sample], float]) -> float:
    """Least-squares slope of ``figure`` per 10 minutes: unlike last - first, one sample taken
    during a load spike does not decide it."""
    xs = [s.minute for s in samples]
    ys = [figure(s) for s in samples]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return 10 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


def window_medians(samples: list[Sample], minutes: float = 10.0
                   ) -> list[tuple[float, float, float]]:
    """Median RssAnon of each ``minutes``-long window of ``samples`` (first minute, last
    minute, MiB): a leak raises every window; a load peak shows in one sample only."""
    out: list[tuple[float, float, float]] = []
    start = samples[0].minute
    while start <= samples[-1].minute:
        window = sorted(s.anon_mib for s in samples if start <= s.minute < start + minutes)
        if window:
            out.append((round(start), round(start + minutes), window[len(window) // 2]))
        start += minutes
    return out


def region_growth(samples: list[Sample], turnover_minutes: float, limit: int = 8) -> list[str]:
    """The mappings whose anonymous memory grew or shrank most after the turnover."""
    steady = [s for s in samples if s.minute >= turnover_minutes and s.anon_regions]
    if len(steady) < 3:
        return []
    names = set().union(*(s.anon_regions for s in steady))
    moved = sorted(((slope_per_10(steady, lambda s, n=n: s.anon_regions.get(n, 0) / 1024), n)
                    for n in names), key=lambda t: -abs(t[0]))[:limit]
    lines = ["  anonymous memory by mapping after the turnover (least-squares MiB per 10 min,"
             " first and last MiB):"]
    for per10, n in moved:
        lines.append(f"    {per10:+6.2f}  {steady[0].anon_regions.get(n, 0) / 1024:7.2f} -> "
                     f"{steady[-1].anon_regions.get(n, 0) / 1024:7.2f}  {n}")
    return lines


def data_bytes(folder: Path) -> int:
    """Bytes allocated on disk by the files in ``folder`` (LMDB files are sparse)."""
    return sum(p.stat().st_blocks * 512 for p in folder.iterdir() if p.is_file())


def sample(pid: int, data: Path, started: float, counts: Counts,
           stats: dict[str, Any]) -> Sample:
    status = proc_status(pid)
    msgid = stats.get("msgid_map", {}).get("entries")
    return Sample((time.monotonic() - started) / 60, status["VmRSS"] / 1024,
                  status.get("RssAnon", 0) / 1024, status.get("RssFile", 0) / 1024,
                  len(os.listdir(f"/proc/{pid}/fd")),
                  data_bytes(data), msgid, counts.take(), anon_by_mapping(pid))


HEADER = (f"  {'min':>5} {'rss MiB':>8} {'anon MiB':>9} {'file MiB':>9} {'fds':>5} {'data KiB':>9} "
          f"{'msgids':>7} {'sent':>6} {'acked':>6} {'arrived':>7} {'forward':>7} "
          f"{'replies':>7} {'failed':>6}")


def row(s: Sample) -> str:
    c = s.counts
    msgids = "?" if s.msgid_entries is None else str(s.msgid_entries)
    return (f"  {s.minute:>5.1f} {s.rss_mib:>8.2f} {s.anon_mib:>9.2f} {s.file_mib:>9.2f} {s.fds:>5} "
            f"{s.data_bytes / 1024:>9.0f} {msgids:>7} {c.sent:>6} {c.acked:>6} {c.arrived:>7} "
            f"{c.forward:>7} {c.replies:>7} {c.failed:>6}")


def growth(samples: list[Sample], turnover_minutes: float, what: str) -> list[str]:
    """Growth per 10 minutes of each figure from the first sample after ``what`` turned over."""
    steady = [s for s in samples if s.minute >= turnover_minutes]
    if len(steady) < 2:
        return [f"  fewer than two samples after {what} turned over at "
                f"{turnover_minutes:.1f} min: run longer (--minutes) for a verdict"]
    first, last = steady[0], steady[-1]
    per10 = 10 / (last.minute - first.minute)
    return [
        f"  from minute {first.minute:.1f} to {last.minute:.1f} (after {what} turned over at "
        f"{turnover_minutes:.1f} min), per 10 minutes:",
        f"    rss  {(last.rss_mib - first.rss_mib) * per10:+.2f} MiB   "
        f"anon {(last.anon_mib - first.anon_mib) * per10:+.2f} MiB   "
        f"file {(last.file_mib - first.file_mib) * per10:+.2f} MiB   "
        f"fds {(last.fds - first.fds) * per10:+.1f}   "
        f"data {(last.data_bytes - first.data_bytes) * per10 / 1024:+.0f} KiB",
        f"    rss range after the turnover {min(s.rss_mib for s in steady):.2f} .. "
        f"{max(s.rss_mib for s in steady):.2f} MiB",
        "    median anon per 10 minutes (a load spike moves one sample, not the median): "
        + "  ".join(f"{a:g}-{b:g} min {m:.2f}" for a, b, m in window_medians(steady)),
        f"    least-squares slope per 10 minutes: rss "
        f"{slope_per_10(steady, lambda s: s.rss_mib):+.2f} MiB   anon "
        f"{slope_per_10(steady, lambda s: s.anon_mib):+.2f} MiB   file "
        f"{slope_per_10(steady, lambda s: s.file_mib):+.2f} MiB",
    ]


def top_growth(folder: Path, turnover_minutes: float, every: float, limit: int = 15
               ) -> list[str]:
    """The allocation sites that grew most between the first snapshot after the turnover
    and the last (tracebacks, innermost frame last)."""
    snaps = sorted(folder.glob("snapshot-*.pickle"))
    first_after = max(1, int(turnover_minutes * 60 / every + 0.999))
    if len(snaps) <= first_after:
        return ["  not enough tracemalloc snapshots after the turnover"]
    totals = []
    for snap in snaps:
        loaded = tracemalloc.Snapshot.load(str(snap))
        totals.append(f"{sum(t.size for t in loaded.traces) / 2**20:.2f}")
    old = tracemalloc.Snapshot.load(str(snaps[first_after - 1]))
    new = tracemalloc.Snapshot.load(str(snaps[-1]))
    lines = [f"  tracemalloc: traced MiB per snapshot: {' '.join(totals)}",
             f"  {snaps[-1].name} against {snaps[first_after - 1].name}, by line:"]
    for stat in new.compare_to(old, "lineno")[:limit]:
        lines.append(f"  {stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d} blocks  "
                     f"{stat.traceback[0]}")
    lines.append("  … and by traceback:")
    for stat in new.compare_to(old, "traceback")[:limit]:
        lines.append(f"  {stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d} blocks "
                     f"(now {stat.size / 1024:.1f} KiB in {stat.count})")
        lines += [f"      {line}" for line in stat.traceback.format(limit=6)]
    return lines


# --- the run --------------------------------------------------------------------------------


def daemon_config(tmp: Path, platform: EmulatedPlatform, framework: TestServer,
                  ports: dict[str, int], args: argparse.Namespace) -> Path:
    config = {  # JSON is YAML
        "bot": {"app_id": APP, "secret": SECRET},
        "idmap": {"data_dir": str(tmp / "data"), "msgid_ttl_seconds": args.msgid_ttl,
                  "msgid_sweep_interval_seconds": SWEEP_SECONDS},
        "qq": {"gateway": True, "api_base": platform.url("/").rstrip("/"),
               "token_url": platform.url("/app/getAppAccessToken")},
        "webhook": {"listen": f"127.0.0.1:{ports['webhook']}", "path": "/qqbot",
                    "max_age_seconds": args.max_age},
        "onebot": {"reverse_ws": [ws_url(framework)], "reconnect_interval_seconds": 1,
                   "forward_ws": f"127.0.0.1:{ports['forward']}",
                   "heartbeat_interval_seconds": 5},
        "api": {"listen": f"127.0.0.1:{ports['api']}"},
        "log": {"level": args.log_level, "format": "json"},
    }
    path = tmp / "daemon.yml"
    path.write_text(json.dumps(config, indent=1))
    return path


def daemon_command(config: Path, traced: Path | None, every: float, frames: int) -> list[str]:
    if traced is not None:
        return [sys.executable, str(BENCH / "_traced_serve.py"), str(traced), str(every),
                str(frames), "serve", "--config", str(config)]
    exe = Path(sys.executable).with_name("gensokyo-idmap")
    cli = ([str(exe)] if exe.exists()
           else [sys.executable, "-c", "from gensokyo_idmap.cli import main; main()"])
    return [*cli, "serve", "--config", str(config)]


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


async def wait_up(proc: subprocess.Popen[bytes], sender: WebhookSender, framework: Framework,
                  platform: EmulatedPlatform, log: Path, timeout: float) -> None:
    """Until the webhook answers op 13, the framework is connected and the gateway identified."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the daemon exited ({proc.returncode}):\n{log_tail(log)}")
        try:
            if ((await sender.validate()).ok and framework.connections
                    and platform.identifies):
                return
        except (aiohttp.ClientError, OSError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"the daemon did not come up in {timeout:g}s:\n"
                               f"{log_tail(log)}")
        await asyncio.sleep(0.2)


def stop_daemon(proc: subprocess.Popen[bytes], log: Path) -> str:
    """SIGTERM, then how it ended: the exit code and whether ``[app] stopped`` was logged."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
            return "did not exit within 30 s of SIGTERM (killed)"
    # a JSON line: "[app] stopped" is "event":"stopped" with "component":"app"
    stopped = any('"event":"stopped"' in line and '"component":"app"' in line
                  for line in log.read_text(errors="replace").splitlines())
    return f"exit code {proc.returncode}, " + ("'[app] stopped' logged" if stopped
                                               else "no '[app] stopped' in the log")


async def soak(args: argparse.Namespace, tmp: Path) -> int:
    load = Load(args.rate, args.new_share)
    framework = Framework(load.counts)
    platform = EmulatedPlatform(heartbeat_ms=30_000)
    await platform.start()
    server = await framework_server(framework.handle)
    ports = {"webhook": free_port(), "forward": free_port(), "api": free_port()}
    config = daemon_config(tmp, platform, server, ports, args)
    traced = (args.snapshots or tmp / "tracemalloc") if args.tracemalloc else None
    if traced is not None:
        traced.mkdir(parents=True, exist_ok=True)
    log = tmp / "daemon.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(daemon_command(config, traced, args.sample_seconds,
                                               args.trace_frames),
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                cwd=BENCH.parent, preexec_fn=die_with_parent)
    stop = asyncio.Event()
    samples: list[Sample] = []
    turnover = (max(window_seconds(args.max_age), args.msgid_ttl) + SWEEP_SECONDS) / 60
    every_window = max(turnover * 60, *REPLY_WINDOW_SECONDS.values()) / 60 + 1
    settled = every_window + SETTLE_MINUTES
    try:
        async with aiohttp.ClientSession() as session:
            sender = WebhookSender(f"http://127.0.0.1:{ports['webhook']}/qqbot", APP, SECRET,
                                   session=session)
            await wait_up(proc, sender, framework, platform, log,
                          TRACED_START_TIMEOUT if traced else START_TIMEOUT)
            stats: dict[str, Any] = {}
            started = time.monotonic()
            workers = [
                asyncio.create_task(drive(load, platform, sender, stop)),
                asyncio.create_task(forward_client(f"ws://127.0.0.1:{ports['forward']}/",
                                                   load.counts, stop)),
                asyncio.create_task(poll_api(session, f"http://127.0.0.1:{ports['api']}",
                                             stop, stats)),
            ]
            print(HEADER)
            print("  " + "-" * (len(HEADER) - 2))
            samples.append(sample(proc.pid, tmp / "data", started, load.counts, stats))
            print(row(samples[-1]), flush=True)
            end = started + args.minutes * 60
            while time.monotonic() < end - 1:
                await asyncio.sleep(min(args.sample_seconds,
                                        end - time.monotonic(),
                                        started + len(samples) * args.sample_seconds
                                        - time.monotonic()))
                if proc.poll() is not None:
                    raise RuntimeError(f"the daemon died ({proc.returncode}):\n{log_tail(log)}")
                samples.append(sample(proc.pid, tmp / "data", started, load.counts, stats))
                print(row(samples[-1]), flush=True)
            stop.set()
            await asyncio.wait_for(asyncio.gather(*workers), 30)
    finally:
        stop.set()
        ending = stop_daemon(proc, log)
        await server.close()
        await platform.close()
    print()
    print("\n".join(growth(samples, turnover, "the de-dup window and the msgid TTL")))
    print("\n".join(growth(samples, every_window, "every window, the C2C reply window too")))
    print("\n".join(growth(samples, settled, "every window and the reply counts' tables")))
    print("\n".join(region_growth(samples, turnover)))
    print(f"  the daemon after SIGTERM: {ending}")
    if traced is not None:
        print()
        print("\n".join(top_growth(traced, turnover, args.sample_seconds)))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--minutes", type=float, default=15.0,
                    help="how long the load runs (default 15)")
    ap.add_argument("--rate", type=float, default=100.0, help="events per second (default 100)")
    ap.add_argument("--new-share", type=float, default=0.05,
                    help="share of events from a user never seen before (default 0.05)")
    ap.add_argument("--msgid-ttl", type=int, default=120,
                    help="the daemon's idmap.msgid_ttl_seconds (default 120)")
    ap.add_argument("--max-age", type=int, default=120,
                    help="the daemon's webhook.max_age_seconds (default 120)")
    ap.add_argument("--sample-seconds", type=float, default=60.0,
                    help="one row of figures this often (default 60)")
    ap.add_argument("--tracemalloc", action="store_true",
                    help="run the daemon under tracemalloc and print what grew most")
    ap.add_argument("--snapshots", type=Path, default=None,
                    help="with --tracemalloc: keep the snapshots in this folder")
    ap.add_argument("--trace-frames", type=int, default=6,
                    help="with --tracemalloc: frames kept per allocation (default 6)")
    ap.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                    help="the daemon's log.level (default info, as shipped)")
    args = ap.parse_args(argv)
    if args.minutes <= 0 or args.rate <= 0 or args.sample_seconds <= 0:
        ap.error("--minutes, --rate and --sample-seconds must be positive")
    if not 0 <= args.new_share <= 1:
        ap.error("--new-share must be between 0 and 1")
    with tempfile.TemporaryDirectory(prefix="idmap-soak-") as tmpdir:
        tmp = Path(tmpdir)
        print(f"gensokyo-idmap soak: {args.minutes:g} min at {args.rate:g} events/s "
              f"({args.new_share:.0%} new users), msgid TTL {args.msgid_ttl} s, de-dup window "
              f"{window_seconds(args.max_age):g} s, {check_disk(tmp.resolve())} at {tmp}"
              + ("; under tracemalloc" if args.tracemalloc else ""))
        try:
            return asyncio.run(soak(args, tmp))
        except RuntimeError as err:
            print(f"soak failed: {err}")
            return 2


if __name__ == "__main__":
    sys.exit(main())
