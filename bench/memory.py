"""Memory benchmark: what a real daemon holds idle, per new person, per new group, and once
the windows have turned over (issue 36).

Run: ``.venv/bin/python bench/memory.py [--quick] [--strict] [--quiet-minutes N]
[--tracemalloc] [--mallocstats FOLDER]``. Not a test: it prints figures and a verdict
against the targets below; the exit code is 0 unless ``--strict`` is given and a target is
missed.

What runs
---------
daemon
    ``gensokyo-idmap serve`` as a subprocess (``bench/inbound.py``'s ``Target``: temp data
    dir, the gateway and the webhook on, a forward-WebSocket server with one consumer,
    ``log.level`` info as shipped), the identity API on a loopback port for ``/v1/stats``.
    Two configuration values are shorter than shipped so that every window turns over within
    the quiet phase: ``idmap.msgid_ttl_seconds`` (:data:`MSGID_TTL_SECONDS`, shipped 3600)
    and ``webhook.max_age_seconds`` (:data:`MAX_AGE_SECONDS`, shipped 600: the de-duplication
    window is then its 5-minute floor, not 11 minutes). The run prints both.
bare relay
    ``bench/_bare_relay.py`` (aiohttp alone: the same transports, no bridge), fed the same
    events as the daemon's first flood: its RSS beside the daemon's (issue 36.4).
emulated platform and consumer (this process)
    ``gensokyo_idmap.testing.EmulatedPlatform`` per target, every event pushed down its
    gateway; ``inbound.Consumer`` reads the forward WebSocket.

Points (each a reading of ``/proc/<pid>/status`` and ``/proc/<pid>/smaps`` once the last
event arrived and :data:`SETTLE_SECONDS` passed, and of ``/v1/stats``)
------------------------------------------------------------------------------------------
idle
    Started, gateway session up, consumer connected, no event yet.
new users
    20,000 ``GROUP_AT_MESSAGE_CREATE`` from 10,000 users never seen before (each twice, in
    100 groups), in steps of 2,000 events with a reading after each (the slope).
new groups
    50,000 events from 50,000 groups never seen before, each from one of those users, named
    as newer platform payloads name their authors (``author.username``, ``member_role``).
quiet
    ``--quiet-minutes`` (default 10) of :data:`QUIET_RATE` events a second from known users
    in the known groups, named as well: every window (a group's passive reply window, the
    message-id TTL, the de-duplication window, the recent caches) has turned over when it
    ends.

Figures: VmRSS, RssAnon and RssFile at each point; per new person and per new group the
growth of RssAnon divided by their number (bytes); where the memory is (smaps: the main
heap, other anonymous regions, each LMDB file's mapped pages, libraries); what each cache
and per-chat table holds (``/v1/stats``' ``memory`` section, when the daemon has one); the
import cost of each dependency (a fresh interpreter each: RSS growth and ``-X importtime``).
With ``--tracemalloc``, a second pass of the same phases runs the daemon under
``bench/_traced_serve.py`` (tracemalloc costs memory itself: its RSS is not the daemon's)
and prints what grew between the points, by allocating line and by the daemon's own line
that led to it. With ``--mallocstats FOLDER``, the daemon runs under
``bench/_traced_serve.py`` without tracemalloc and writes a report at each point into FOLDER
(``snapshot-00N.txt``): Python's small-object arenas (``sys._debugmallocstats()``: arenas,
bytes in objects, in free blocks and in unused pools), glibc's arenas (``malloc_stats()``),
the live objects per type and the largest containers. The reports cost the daemon a thread
and what they allocate (its thread malloc arenas grow by a few MiB): the figures of such a
run are the allocators', not the daemon's as shipped.

Targets (issue 36): idle RSS <= 55 MiB; RSS after the new users <= 70 MiB; at most
400 bytes of anonymous memory per new group; anonymous memory after the quiet phase within
10 % of what it was before the groups came.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import itertools
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

# _common before the library: importing it configures structlog (see its docstring).
from _common import check_disk, print_heading, proc_status, smaps
from inbound import FULL, Events, Target, daemon_command, flood, openid, relay_command

from gensokyo_idmap.bridge.dedup import window_seconds
from gensokyo_idmap.recent_cache import RECENT_SECONDS
from gensokyo_idmap.runtime.replies import REPLY_WINDOW_SECONDS
from gensokyo_idmap.testing.loopback import free_port

BENCH = Path(__file__).resolve().parent
MSGID_TTL_SECONDS = 300  # shipped 3600: shortened so that it turns over in the quiet phase
MAX_AGE_SECONDS = 120  # shipped 600: the de-duplication window is then its floor, 5 minutes
#: From the last event's arrival to a point's reading: a pass of the daemon's chores that run
#: more often than once a minute (its LMDB files' read pages unmapped every 10 s:
#: store.lmdb.mapped_pages), not of the malloc trim (once a minute). A number, not imported:
#: the same script measures the code from before that chore too.
SETTLE_SECONDS = 12.0
QUIET_RATE = 20  # events a second in the quiet phase
KNOWN_GROUPS = 100
NEW_GROUP_BASE = 1 << 40  # group numbers of the groups flood: never a known group's
FLOOD_TIMEOUT = 300.0
TRACE_FRAMES = 10
TRACE_TIMEOUT = 300.0  # a snapshot of a large traced heap takes a while
TOP = 12
# targets (issue 36)
IDLE_MIB = 55.0
USERS_MIB = 70.0
BYTES_PER_GROUP = 400.0
BACK_WITHIN = 1.10

#: (what, module): each imported alone in a fresh interpreter
DEPENDENCIES = [
    ("aiohttp", "aiohttp"), ("lmdb", "lmdb"), ("cbor2", "cbor2"), ("pydantic", "pydantic"),
    ("structlog", "structlog"), ("click", "click"), ("PyYAML", "yaml"),
    ("PyNaCl", "nacl.signing"), ("cryptography (Ed25519)",
                                 "cryptography.hazmat.primitives.asymmetric.ed25519"),
    ("prometheus-client", "prometheus_client"), ("orjson", "orjson"), ("Jinja2", "jinja2"),
    ("aiohttp-jinja2", "aiohttp_jinja2"), ("psycopg (extra)", "psycopg"),
    ("psycopg_pool (extra)", "psycopg_pool"), ("redis (extra)", "redis"),
    ("the daemon (gensokyo_idmap.app)", "gensokyo_idmap.app"),
    ("the CLI (gensokyo_idmap.cli)", "gensokyo_idmap.cli"),
]


@dataclass(frozen=True)
class Profile:
    users: int  # new users, two events each
    user_step: int  # events between readings
    groups: int
    group_step: int
    quiet_minutes: float


FULL_RUN = Profile(users=10_000, user_step=2_000, groups=50_000, group_step=10_000,
                   quiet_minutes=10.0)
QUICK_RUN = Profile(users=1_000, user_step=500, groups=5_000, group_step=2_500,
                    quiet_minutes=1.0)


# --- the traffic ----------------------------------------------------------------------------


class Traffic(Events):
    """``inbound.Events`` with this benchmark's senders: ``fresh`` (users never seen, each
    twice, :data:`BLOCK` events apart), ``group`` (a known user in a group never seen) and
    ``known`` (a known user in a known group); the authors of ``group`` and ``known`` are
    named (:func:`named`)."""

    BLOCK = 500

    def __init__(self) -> None:
        super().__init__(dataclasses.replace(FULL, groups=KNOWN_GROUPS))
        self.fresh = 0  # fresh events taken
        self.groups = 0  # new groups taken
        self.known = 0

    def take(self, who: str) -> tuple[int, dict[str, Any]]:
        self.next += 1
        n = self.next
        if who == "fresh":
            block, i = divmod(self.fresh, 2 * self.BLOCK)
            self.fresh += 1
            return n, self.payload(n, block * self.BLOCK + i % self.BLOCK)
        users = max(1, (self.fresh + 1) // 2)
        if who == "group":
            self.groups += 1
            payload = named(self.payload(n, self.groups % users), self.groups % users)
            payload["group_openid"] = openid("G", NEW_GROUP_BASE + self.groups)
            return n, payload
        self.known += 1
        user = (self.known * 7919) % users
        return n, named(self.payload(n, user), user)


def named(payload: dict[str, Any], user: int) -> dict[str, Any]:
    """``payload`` with its author named as newer platform payloads name them
    (``author.username``, ``member_role``; one user in 50 an admin): the daemon then keeps
    each member's name and role per group for the window (``member_profiles``)."""
    payload["author"] |= {"bot": False, "username": f"bench user {user}",
                          "member_role": "admin" if user % 50 == 0 else "member"}
    return payload


# --- readings -------------------------------------------------------------------------------


@dataclass
class Point:
    name: str
    status: dict[str, int]  # kB
    where: dict[str, int]  # kB per kind of mapping
    memory: dict[str, Any] | None  # /v1/stats' memory section

    def mib(self, figure: str) -> float:
        return self.status.get(figure, 0) / 1024


def where_it_is(pid: int) -> dict[str, int]:
    """RSS (kB) per kind of mapping: the main heap, thread arenas, other anonymous regions,
    each LMDB file's mapped pages, libraries, the rest."""
    out: dict[str, int] = {}

    def add(kind: str, kb: int) -> None:
        if kb:
            out[kind] = out.get(kind, 0) + kb

    for name, figures in smaps(pid).items():
        rss, anon = figures.get("Rss", 0), figures.get("Anonymous", 0)
        if name == "[heap]":
            add("anon: [heap] (main malloc arena)", anon)
        elif name.startswith("arena@"):
            add("anon: thread malloc arenas", anon)
        elif name.startswith(("anon@", "[")):
            add("anon: other (pymalloc arenas, mmap'd blocks, stacks)", anon)
        else:
            add("anon: private pages of mapped files", anon)
            if name.endswith(".db"):
                add(f"file: {Path(name).name}", rss - anon)
            elif ".so" in Path(name).name:
                add("file: shared libraries", rss - anon)
            else:
                add("file: other (python, locale, …)", rss - anon)
    return out


async def read_stats(http: aiohttp.ClientSession, api: str) -> dict[str, Any] | None:
    """``/v1/stats``' ``memory`` section, None where the daemon has none."""
    try:
        async with http.get(f"http://{api}/v1/stats") as resp:
            if resp.status != 200:
                return None
            data = await resp.json()
    except (aiohttp.ClientError, OSError, ValueError):
        return None
    memory = data.get("memory")
    return memory if isinstance(memory, dict) else None


class Tracer:
    """The traced daemon's snapshots, one per point (SIGUSR1 to ``bench/_traced_serve.py``)."""

    def __init__(self, folder: Path, suffix: str = ".pickle") -> None:
        self.folder = folder
        self.suffix = suffix  # ".txt": the reports of ``--mallocstats``
        self.taken = 0

    async def snapshot(self, pid: int) -> None:
        self.taken += 1
        path = self.folder / f"snapshot-{self.taken:03d}{self.suffix}"
        os.kill(pid, signal.SIGUSR1)
        deadline = time.monotonic() + TRACE_TIMEOUT
        while not path.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"no tracemalloc snapshot {path.name} in {TRACE_TIMEOUT:g}s")
            await asyncio.sleep(0.2)

    def paths(self) -> list[Path]:
        return [self.folder / f"snapshot-{n:03d}{self.suffix}"
                for n in range(1, self.taken + 1)]


@dataclass
class Pass:
    """One daemon's run through the phases."""

    target: Target
    http: aiohttp.ClientSession
    traffic: Traffic
    tracer: Tracer | None = None
    points: list[Point] = field(default_factory=list)

    @property
    def pid(self) -> int:
        assert self.target.proc is not None
        return self.target.proc.pid

    async def point(self, name: str) -> Point:
        await asyncio.sleep(SETTLE_SECONDS)
        if self.target.proc is None or self.target.proc.poll() is not None:
            raise RuntimeError(f"{self.target.name} exited:\n{self.target.log_tail()}")
        api = self.target.api.get("listen")
        found = Point(name, proc_status(self.pid), where_it_is(self.pid),
                      None if api is None else await read_stats(self.http, api))
        if self.tracer is not None:
            await self.tracer.snapshot(self.pid)
        self.points.append(found)
        return found

    async def send(self, who: str, count: int) -> None:
        arrived, _ = await flood(self.target, "gateway", self.traffic, who, count,
                                 FLOOD_TIMEOUT)
        if arrived < count:
            raise RuntimeError(f"{self.target.name}: only {arrived} of {count} events arrived")


    async def steps(self, who: str, total: int, step: int, *, each: bool = True) -> None:
        """``total`` events of ``who`` in floods of ``step``, a reading printed after each
        (``each=False``: after the last only)."""
        sent = 0
        while sent < total:
            count = min(step, total - sent)
            await self.send(who, count)
            sent += count
            if each or sent == total:
                print(step_row(self.target, sent), flush=True)


def step_row(target: Target, events: int) -> str:
    assert target.proc is not None
    status = proc_status(target.proc.pid)
    return (f"  {target.name:<12} {events:>8,} {status['VmRSS'] / 1024:>9.1f} "
            f"{status['RssAnon'] / 1024:>9.1f} {status['RssFile'] / 1024:>9.1f}")


STEP_HEADER = f"  {'':<12} {'events':>8} {'rss MiB':>9} {'anon MiB':>9} {'file MiB':>9}"


async def floods(run: Pass, prof: Profile, relay: Pass | None) -> None:
    """The phases after idle: new users (and the relay fed the same), new groups, quiet."""
    print_heading(STEP_HEADER + "   (new users: a reading every "
                  f"{prof.user_step:,} events)")
    await run.steps("fresh", 2 * prof.users, prof.user_step)
    if relay is not None:
        await relay.steps("fresh", 2 * prof.users, prof.user_step, each=False)
        await relay.point("new users")
    await run.point("new users")

    print_heading(STEP_HEADER + f"   (new groups: a reading every {prof.group_step:,} events)")
    await run.steps("group", prof.groups, prof.group_step)
    await run.point("new groups")

    print_heading(STEP_HEADER + f"   (quiet: {QUIET_RATE} events/s from known users, a "
                  "reading a minute)")
    started = time.monotonic()
    end = started + prof.quiet_minutes * 60
    sent, minute = 0, 1
    while time.monotonic() < end:
        tick = time.monotonic()
        await run.send("known", QUIET_RATE)
        sent += QUIET_RATE
        if time.monotonic() >= started + minute * 60:
            print(step_row(run.target, sent) + f"   minute {minute}", flush=True)
            minute += 1
        await asyncio.sleep(max(0.0, min(1.0 - (time.monotonic() - tick),
                                          end - time.monotonic())))
    await run.point("quiet")


def daemon_target(tmp: Path, name: str) -> Target:
    return Target(name, daemon_command, tmp, "info",
                  idmap={"msgid_ttl_seconds": MSGID_TTL_SECONDS},
                  webhook={"max_age_seconds": MAX_AGE_SECONDS},
                  api={"listen": f"127.0.0.1:{free_port()}"})


def traced_command(folder: Path, frames: int = TRACE_FRAMES) -> Any:
    """``bench/_traced_serve.py``'s command: tracemalloc with ``frames`` frames, or (0) the
    allocators' reports instead."""
    def command(target: Target) -> list[str]:
        serve = daemon_command(target)[-3:]  # serve --config <file>
        return [sys.executable, str(BENCH / "_traced_serve.py"), str(folder), "0",
                str(frames), *serve]
    return command


async def measure(tmp: Path, prof: Profile, reports: Path | None = None) -> tuple[Pass, Pass]:
    """The daemon through every phase, the bare relay through the first; with ``reports``,
    the daemon writes the allocators' report of each point there (``--mallocstats``)."""
    async with aiohttp.ClientSession() as http:
        daemon = Pass(daemon_target(tmp, "daemon"), http, Traffic())
        if reports is not None:
            daemon.target.command = traced_command(reports, 0)
            daemon.tracer = Tracer(reports, ".txt")
        relay = Pass(Target("bare relay", relay_command, tmp), http, Traffic())
        try:
            for run in (daemon, relay):
                await run.target.platform.start()
                await run.target.start(http)
            await daemon.point("idle")
            await relay.point("idle")
            await floods(daemon, prof, relay)
        finally:
            await relay.target.close()
            await daemon.target.close()
    return daemon, relay


async def measure_traced(tmp: Path, prof: Profile) -> Pass:
    folder = tmp / "tracemalloc"
    folder.mkdir()
    async with aiohttp.ClientSession() as http:
        target = daemon_target(tmp, "traced")
        target.command = traced_command(folder)
        run = Pass(target, http, Traffic(), Tracer(folder))
        try:
            await target.platform.start()
            await target.start(http)
            await run.point("idle")
            await floods(run, prof, None)
        finally:
            await target.close()
    return run


# --- the report -----------------------------------------------------------------------------


class Verdicts:
    def __init__(self) -> None:
        self.misses = 0

    def below(self, label: str, value: float, limit: float, unit: str) -> str:
        ok = value <= limit
        self.misses += not ok
        return (f"  {label:<48} {value:>9.2f} {unit:<5} target <= {limit:g}  "
                f"{'PASS' if ok else 'MISS'}")


def print_points(daemon: Pass, relay: Pass, prof: Profile) -> None:
    print_heading(f"  {'point':<60} {'rss MiB':>9} {'anon MiB':>9} {'file MiB':>9}")
    labels = {"idle": "idle",
              "new users": f"after {2 * prof.users:,} events from {prof.users:,} new users",
              "new groups": f"after {prof.groups:,} events from {prof.groups:,} new groups",
              "quiet": f"after {prof.quiet_minutes:g} min of known users only"}
    for run in (daemon, relay):
        for p in run.points:
            print(f"  {run.target.name + ', ' + labels[p.name]:<60} {p.mib('VmRSS'):>9.1f} "
                  f"{p.mib('RssAnon'):>9.1f} {p.mib('RssFile'):>9.1f}")


def per_unit(daemon: Pass, prof: Profile) -> tuple[float, float]:
    idle, users, groups = daemon.points[0], daemon.points[1], daemon.points[2]
    print_heading(f"  {'growth':<44} {'rss B':>9} {'anon B':>9} {'file B':>9}")
    rows = (("per new person (idle -> new users)", idle, users, prof.users),
            ("per new group (new users -> new groups)", users, groups, prof.groups))
    for label, a, b, count in rows:
        print(f"  {label:<44} "
              + " ".join(f"{(b.status[f] - a.status[f]) * 1024 / count:>9,.0f}"
                         for f in ("VmRSS", "RssAnon", "RssFile")))
    person = (users.status["RssAnon"] - idle.status["RssAnon"]) * 1024 / prof.users
    group = (groups.status["RssAnon"] - users.status["RssAnon"]) * 1024 / prof.groups
    return person, group


def print_where(run: Pass) -> None:
    kinds: list[str] = []
    for p in run.points:
        kinds += [k for k in p.where if k not in kinds]
    print_heading(f"  {'where (smaps, MiB)':<52}"
                  + "".join(f"{p.name:>12}" for p in run.points))
    for kind in sorted(kinds):
        print(f"  {kind:<52}" + "".join(f"{p.where.get(kind, 0) / 1024:>12.1f}"
                                        for p in run.points))


def print_tables(run: Pass) -> None:
    print_heading(f"  {'caches and per-chat tables (/v1/stats)':<40}"
                  + "".join(f"{p.name:>22}" for p in run.points))
    if all(p.memory is None for p in run.points):
        print("  n/a (no memory section)")
        return
    names: list[str] = []
    for p in run.points:
        for table in (p.memory or {}).get("tables", []):
            if table.get("name") not in names:
                names.append(str(table.get("name")))
    print(f"  {'':<40}" + "".join(f"{'entries':>11}{'KiB':>11}" for _ in run.points))
    for name in names:
        cells = []
        for p in run.points:
            found = next((t for t in (p.memory or {}).get("tables", [])
                          if t.get("name") == name), None)
            cells.append(f"{'n/a':>22}" if found is None else
                         f"{found.get('entries', 0):>11,}{(found.get('bytes') or 0) / 1024:>11.1f}")
        print(f"  {name:<40}" + "".join(cells))
    for figure in ("rss_anon_bytes", "rss_file_bytes"):
        print(f"  {figure + ' (as the daemon sees it)':<40}" + "".join(
            f"{'':>11}{((p.memory or {}).get(figure) or 0) / 2**20:>10.1f}M"
            for p in run.points))


def turnover_seconds() -> float:
    """When every window has turned over after the last event of the floods."""
    return max(REPLY_WINDOW_SECONDS["group"], window_seconds(MAX_AGE_SECONDS),
               MSGID_TTL_SECONDS + 60.0, 2 * RECENT_SECONDS)  # 60: the sweep's interval


def verdicts(daemon: Pass, relay: Pass, prof: Profile, per_group: float) -> int:
    idle, users, _, quiet = daemon.points
    v = Verdicts()
    print_heading("  targets (issue 36)")
    print(v.below("idle RSS", idle.mib("VmRSS"), IDLE_MIB, "MiB"))
    print(v.below(f"RSS after {prof.users:,} new users", users.mib("VmRSS"), USERS_MIB, "MiB")
          + f"   (bare relay: {relay.points[1].mib('VmRSS'):.1f} MiB)")
    print(v.below("anonymous memory per new group", per_group, BYTES_PER_GROUP, "B"))
    back = quiet.status["RssAnon"] / users.status["RssAnon"]
    if prof.quiet_minutes * 60 >= turnover_seconds():
        print(v.below("anon after quiet / before the groups came", back, BACK_WITHIN, "x"))
    else:
        print(f"  {'anon after quiet / before the groups came':<48} {back:>9.2f} x      "
              f"(info: the windows turn over after {turnover_seconds() / 60:.1f} min; "
              f"--quiet-minutes {prof.quiet_minutes:g})")
    return v.misses


# --- tracemalloc ----------------------------------------------------------------------------


def _site(trace: tracemalloc.Trace) -> tuple[str, str]:
    """(the allocating line, the daemon's innermost line that led to it)."""
    frames = list(reversed(trace.traceback))  # a Traceback runs from the oldest frame
    inner = f"{frames[0].filename}:{frames[0].lineno}" if frames else "?"
    ours = next((f"{f.filename}:{f.lineno}" for f in frames if "gensokyo_idmap" in f.filename),
                "-")
    return inner, ours


def _by_site(snapshot: tracemalloc.Snapshot) -> dict[tuple[str, str], tuple[int, int]]:
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for trace in snapshot.traces:
        key = _site(trace)
        size, count = out.get(key, (0, 0))
        out[key] = (size + trace.size, count + 1)
    return out


def _short(path: str) -> str:
    for mark in ("gensokyo_idmap/", "site-packages/", "lib/python3"):
        if mark in path:
            return path[path.index(mark):]
    return path


def print_traced(run: Pass) -> None:
    assert run.tracer is not None
    sites = [_by_site(tracemalloc.Snapshot.load(str(p))) for p in run.tracer.paths()]
    print_heading("  tracemalloc (a separate daemon; its RSS is not the daemon's)")
    print("  " + "   ".join(f"{p.name}: traced {sum(s for s, _ in site.values()) / 2**20:.1f}"
                            f" MiB, rss {p.mib('VmRSS'):.1f}"
                            for p, site in zip(run.points, sites, strict=True)))
    for (a, old), (b, new) in itertools.pairwise(zip(run.points, sites, strict=True)):
        grown = sorted(((new.get(k, (0, 0))[0] - old.get(k, (0, 0))[0],
                         new.get(k, (0, 0))[1] - old.get(k, (0, 0))[1], k)
                        for k in set(old) | set(new)), key=lambda t: -abs(t[0]))[:TOP]
        print(f"\n  {a.name} -> {b.name}: what grew most (KiB, blocks, allocated at / "
              "by the daemon's line)")
        for size, count, (inner, ours) in grown:
            print(f"  {size / 1024:>+9.1f} {count:>+8,}  {_short(inner)}"
                  + ("" if ours in ("-", inner) else f"  <- {_short(ours)}"))
    last = max(range(len(sites)), key=lambda i: sum(s for s, _ in sites[i].values()))
    print(f"\n  largest at {run.points[last].name} (KiB, blocks):")
    for (inner, ours), (size, count) in sorted(sites[last].items(),
                                               key=lambda kv: -kv[1][0])[:TOP]:
        print(f"  {size / 1024:>9.1f} {count:>8,}  {_short(inner)}"
              + ("" if ours in ("-", inner) else f"  <- {_short(ours)}"))


# --- imports --------------------------------------------------------------------------------


def import_cost(module: str | None) -> tuple[dict[str, int], float, int] | None:
    """A fresh interpreter that imports ``module`` (None: nothing): its /proc status once
    the import is done, the cumulative ``-X importtime`` of ``module`` (ms) and the number of
    modules it loaded; None if it cannot be imported."""
    code = ("import sys; n = len(sys.modules); "
            + (f"import {module}; " if module else "")
            + "print(len(sys.modules) - n, flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-X", "importtime", "-c", code],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    line = proc.stdout.readline()
    status = proc_status(proc.pid) if line.strip() else {}
    _, err = proc.communicate("")
    if not line.strip():
        return None
    cumulative = 0.0
    for row in err.splitlines():
        parts = row.split("|")
        if len(parts) == 3 and parts[2].strip() == module:
            cumulative = int(parts[1]) / 1000
    return status, cumulative, int(line)


def print_imports() -> None:
    base = import_cost(None)
    assert base is not None
    print_heading(f"  {'import cost, each alone in a fresh interpreter':<48} {'rss MiB':>8} "
                  f"{'anon MiB':>9} {'ms':>7} {'modules':>8}")
    print(f"  {'python itself (nothing imported)':<48} {base[0]['VmRSS'] / 1024:>8.1f} "
          f"{base[0]['RssAnon'] / 1024:>9.1f} {'':>7} {'':>8}")
    for what, module in DEPENDENCIES:
        found = import_cost(module)
        if found is None:
            print(f"  {what:<48} not installed")
            continue
        status, ms, modules = found
        print(f"  {what:<48} {(status['VmRSS'] - base[0]['VmRSS']) / 1024:>+8.1f} "
              f"{(status['RssAnon'] - base[0]['RssAnon']) / 1024:>+9.1f} {ms:>7.0f} "
              f"{modules:>8}")


# --- the run --------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="a tenth of the events, a minute of quiet (the windows do not turn "
                         "over: that verdict is information only)")
    ap.add_argument("--strict", action="store_true", help="exit 1 if a target is missed")
    ap.add_argument("--quiet-minutes", type=float, default=None,
                    help="minutes of known users only before the last reading (default 10, "
                         "1 with --quick)")
    ap.add_argument("--tracemalloc", action="store_true",
                    help="a second pass under tracemalloc: what grew between the points")
    ap.add_argument("--mallocstats", type=Path, metavar="FOLDER",
                    help="the daemon writes a report of its allocators at each point into "
                         "FOLDER (bench/_traced_serve.py: pymalloc's arenas, glibc's, live "
                         "objects per type, the largest containers)")
    ap.add_argument("--no-imports", action="store_true",
                    help="leave out the import cost of each dependency")
    args = ap.parse_args(argv)
    prof = QUICK_RUN if args.quick else FULL_RUN
    if args.quiet_minutes is not None:
        if args.quiet_minutes < 0:
            ap.error("--quiet-minutes must be >= 0")
        prof = dataclasses.replace(prof, quiet_minutes=args.quiet_minutes)
    started, load0 = time.perf_counter(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="idmap-bench-memory-") as tmpdir:
        tmp = Path(tmpdir)
        print(f"gensokyo-idmap memory benchmark ({'quick' if args.quick else 'full'}): "
              f"python {platform.python_version()}, aiohttp {aiohttp.__version__}, "
              f"{os.cpu_count()} CPUs, {check_disk(tmp.resolve())} at {tmp}")
        print(f"shorter than shipped, so that every window turns over in the quiet phase: "
              f"idmap.msgid_ttl_seconds {MSGID_TTL_SECONDS} (shipped 3600), "
              f"webhook.max_age_seconds {MAX_AGE_SECONDS} (shipped 600; de-duplication window "
              f"{window_seconds(MAX_AGE_SECONDS) / 60:g} min, shipped "
              f"{window_seconds() / 60:g}); a group's passive reply window "
              f"{REPLY_WINDOW_SECONDS['group'] / 60:g} min; every window turned over "
              f"{turnover_seconds() / 60:g} min after the floods")
        if not args.no_imports:
            print_imports()
        try:
            if args.mallocstats is not None:
                args.mallocstats.mkdir(parents=True, exist_ok=True)
            daemon, relay = asyncio.run(measure(tmp, prof, args.mallocstats))
        except (RuntimeError, TimeoutError, OSError, aiohttp.ClientError) as err:
            print(f"benchmark failed: {err!r}")
            return 2
        print_points(daemon, relay, prof)
        _, per_group = per_unit(daemon, prof)
        print_where(daemon)
        print_tables(daemon)
        misses = verdicts(daemon, relay, prof, per_group)
        if args.tracemalloc:
            try:
                traced = asyncio.run(measure_traced(tmp, prof))
            except (RuntimeError, TimeoutError, OSError, aiohttp.ClientError) as err:
                print(f"tracemalloc pass failed: {err!r}")
                return 2
            print_traced(traced)
    print(f"\ntotal {time.perf_counter() - started:.1f}s; "
          f"load average {load0:.2f} at start, {os.getloadavg()[0]:.2f} at end")
    return 1 if misses and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
