"""What a flood of new groups costs the in-memory tables, and what they give back after it.

Run: ``.venv/bin/python bench/tables.py [--quick] [--groups N] [--same-user] [--trace]
[--quiet-minutes N] [--strict]``

This is a benchmark script, not a test: it prints figures and compares them with the ones
it took before the flood, in the same run. The exit code is 0 unless ``--strict`` is given
and a target is missed.

What runs
---------
In this process, the real inbound path of one bot over real stores in a temp dir
(``openid-map.db``, ``msgid-map.db``): ``InboundPipeline.process_batch`` with the durable
delivery claims, batches of 64 ``GROUP_AT_MESSAGE_CREATE`` frames parsed from JSON as the
gateway parses them, each from a group never seen before, its author named
(``author.username``, ``member_role``) as newer platform payloads name them: a new member
of each group, or (``--same-user``) one known member in every group. Its OneBot events go
to a sink that takes them (no framework: the tables are the subject). Logging is configured
as in production, its lines dropped.

Figures
-------
per group, during the window
    The resident anonymous memory (``RssAnon``) after ``--groups`` groups (50,000; 5,000
    with ``--quick``), less what it was after a warm-up of 3,000 groups, per group; both
    read after a garbage collection and a ``malloc_trim``. ``--trace`` adds what
    ``tracemalloc`` counts per group and its largest sources (slower; the RSS figure then
    includes tracemalloc's own).
after the windows
    The tables' clocks moved past the longest of their windows (the de-duplication window,
    the member profiles' and caches' two generations), the memory chore's sweep run as it
    would run once a minute, then the same reading: what is left of the flood, as a share of
    the resident anonymous memory before it. With ``--quiet-minutes N``, instead, N minutes
    of ``bench/memory.py``'s quiet phase on the tables' clock (20 messages a second from the
    warm-up's members in their groups, the sweep once a minute): the objects the traffic
    after a flood keeps are made into the room the flood's left, as in the daemon. Beside
    it, Python's small-object allocator: its arenas and the bytes of the objects in them
    before the flood and after (``sys._debugmallocstats()``), what is held against what
    would do (not with ``--trace``: under tracemalloc the allocator reports nothing).
tables
    Each in-memory table's entries and estimated bytes (``/v1/stats``' ``memory``) at both
    points.

Targets (issue 36.3): at most 400 bytes per group during the window; after it, anonymous
memory within 10 % of where it was before the flood. The second is not the tables' alone:
once they forgot the flood (their entries at 0), what stays is Python's small-object
arenas (1 MiB each, given back only when every object in one is gone) that a few objects
made during the flood and still alive keep (docs/operations.md, *Memory*).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

# _common before the library: importing it configures structlog (see its docstring).
import _common  # noqa: F401

from gensokyo_idmap.bridge.chat_turns import ChatTurns
from gensokyo_idmap.bridge.dedup import window_seconds
from gensokyo_idmap.bridge.inbound import BridgeSettings, InboundBridge, InboundPipeline
from gensokyo_idmap.bridge.members import KEPT_SECONDS
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.memory import malloc_trim_function
from gensokyo_idmap.process_figures import resident_parts
from gensokyo_idmap.qq import events as qq_events
from gensokyo_idmap.qq.events import parse_dispatch, parse_envelope
from gensokyo_idmap.recent_cache import RECENT_SECONDS
from gensokyo_idmap.runtime.claims import DeliveryLog, DurableClaims
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore
from gensokyo_idmap.runtime.msgid import MsgIdMap
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.tables import Named, Tables
from gensokyo_idmap.testing.platform_emulator import APP, group_message

BATCH = 64
WARM_UP = 3000
WARM_UP_BASE = 10**9  # the warm-up's group and message numbers
QUIET_BASE = 2 * 10**9  # the quiet phase's message numbers
QUIET_RATE = 20  # events a second in the quiet phase (bench/memory.py's)
PER_GROUP_TARGET = 400
LEFT_TARGET = 0.10


class Sink:
    """Takes every OneBot event at once (no framework: what it keeps is not measured)."""

    def publish(self, event: dict[str, Any]) -> None:
        return None


class Clock:
    """time.monotonic moved on by ``offset``: the tables' clocks, set forward after the
    flood instead of waiting out their windows."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset


def frames(start: int, n: int, same_user: bool) -> list[bytes]:
    found = []
    for i in range(start, start + n):
        user = "F" * 32 if same_user else "E" + f"{i:031X}"
        d = group_message(i, group=f"{i:032X}", user=user, username=f"member {i}",
                          role="member")
        found.append(json.dumps({"op": 0, "s": i + 1, "t": "GROUP_AT_MESSAGE_CREATE",
                                 "id": f"GROUP_AT_MESSAGE_CREATE:{i}", "d": d}).encode())
    return found


def known_frames(start: int, n: int) -> list[bytes]:
    """Messages numbered from ``start`` (new message ids) by the members of the warm-up's
    groups, each in their own group (known people in known chats)."""
    found = []
    for i in range(start, start + n):
        member = WARM_UP_BASE + (i * 7919) % WARM_UP
        d = group_message(i, group=f"{member:032X}", user="E" + f"{member:031X}",
                          username=f"member {member}", role="member")
        found.append(json.dumps({"op": 0, "s": i + 1, "t": "GROUP_AT_MESSAGE_CREATE",
                                 "id": f"GROUP_AT_MESSAGE_CREATE:{i}", "d": d}).encode())
    return found


async def flood(pipeline: InboundPipeline, start: int, n: int, same_user: bool,
                make: Callable[[int, int], list[bytes]] | None = None) -> None:
    for first in range(start, start + n, BATCH):
        count = min(BATCH, start + n - first)
        raw = frames(first, count, same_user) if make is None else make(first, count)
        await pipeline.process_batch([parse_dispatch(parse_envelope(r), APP) for r in raw])


async def quiet(pipeline: InboundPipeline, tables: Tables, clock: Clock, minutes: int) -> None:
    """``minutes`` of :data:`QUIET_RATE` events a second from known members (bench/memory.py's
    quiet phase) on the tables' clock: a minute's events, the clock a minute on, the memory
    chore's sweep."""
    for minute in range(minutes):
        await flood(pipeline, QUIET_BASE + minute * 60 * QUIET_RATE, 60 * QUIET_RATE, False,
                    known_frames)
        clock.offset += 60.0
        tables.sweep()


def anon_now(trim: Callable[[], int] | None) -> int:
    gc.collect()
    if trim is not None:
        trim()
    anon, _ = resident_parts()
    if anon is None:
        sys.exit("no RssAnon in /proc/self/status: this benchmark needs Linux")
    return anon


def pymalloc_figures() -> tuple[int, int] | None:
    """Python's small-object allocator: (arenas allocated now, bytes in allocated blocks),
    read from ``sys._debugmallocstats()``, which writes to the C level's stderr; None while
    tracemalloc runs (its hooks stand before the allocator, which then reports nothing)."""
    with tempfile.TemporaryFile() as out:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read().decode()
    figures = {line.split("=")[0].strip(): int(line.split("=")[1].replace(",", ""))
               for line in text.splitlines() if line.startswith("# ") and "=" in line}
    if "# arenas allocated current" not in figures:
        return None
    return (figures["# arenas allocated current"], figures["# bytes in allocated blocks"])


def set_clocks(named: list[Named], clock: Clock) -> None:
    """Every table (and the cache inside a table) reads ``clock`` from now on."""
    for _, table in named:
        for part in (table, getattr(table, "_kept", None)):
            if part is not None and hasattr(part, "_clock"):
                part._clock = clock


def print_tables(tables: Tables, heading: str) -> None:
    print(f"  {heading}:")
    for figures in tables.figures():
        if figures.entries:
            print(f"    {figures.name:24} {figures.entries:>8} entries "
                  f"{figures.bytes / 2**20:8.2f} MiB")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--groups", type=int, default=None, help="default 50,000")
    parser.add_argument("--quick", action="store_true", help="5,000 groups")
    parser.add_argument("--same-user", action="store_true",
                        help="one known member in every group (default: a new one each)")
    parser.add_argument("--trace", action="store_true", help="tracemalloc's figures too")
    parser.add_argument("--quiet-minutes", type=int, default=0,
                        help="after the flood, minutes of known members' messages (20 a "
                             "second, on the tables' clock) instead of the clock jumping past "
                             "the windows; at least 12 for every window to turn over (the "
                             "de-duplication window: 11 minutes)")
    parser.add_argument("--strict", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args()
    if args.groups is None:
        args.groups = 5000 if args.quick else 50_000
    trim = malloc_trim_function()
    clock = Clock()
    with tempfile.TemporaryDirectory(prefix="bench-tables-") as tmp:
        identities = LmdbIdentityStore(Path(tmp) / "openid-map.db")
        msgid_store = LmdbMsgIdStore(Path(tmp) / "msgid-map.db")
        window = window_seconds()
        bridge = InboundBridge(IdentityGraph(identities), MsgIdMap(msgid_store),
                               BridgeSettings(app_id=APP, self_id=1))
        deliveries = DeliveryLog(window, claims=DurableClaims(msgid_store, window))
        turns = ChatTurns()
        pipeline = InboundPipeline(bridge, [Sink()], deliveries, turns=turns)
        tables = Tables()
        tables.add_from(bridge, bridge.msgids, deliveries, turns)
        tables.add_all(qq_events.memory_tables())
        named = [*bridge.memory_tables(), *bridge.msgids.memory_tables(),
                 *deliveries.memory_tables(), *qq_events.memory_tables()]
        set_clocks(named, clock)

        await flood(pipeline, WARM_UP_BASE, WARM_UP, args.same_user)
        before = anon_now(trim)
        small_before = pymalloc_figures()
        if args.trace:
            tracemalloc.start(1)
            traced = tracemalloc.take_snapshot()
        started = time.perf_counter()
        await flood(pipeline, 0, args.groups, args.same_user)
        seconds = time.perf_counter() - started
        during = anon_now(trim)
        per_group = (during - before) / args.groups
        who = "one known member" if args.same_user else "a new member each"
        print(f"{args.groups} new groups ({who}) in {seconds:.1f} s; RssAnon before "
              f"{before / 2**20:.1f} MiB")
        print(f"  during the window: +{(during - before) / 2**20:.1f} MiB, "
              f"{per_group:.0f} bytes per group (target <= {PER_GROUP_TARGET}: "
              f"{'PASS' if per_group <= PER_GROUP_TARGET else 'MISS'})")
        if args.trace:
            snapshot = tracemalloc.take_snapshot()
            print(f"  tracemalloc: {tracemalloc.get_traced_memory()[0] / args.groups:.0f} "
                  "bytes per group traced since the flood began; largest sources:")
            for stat in snapshot.compare_to(traced, "lineno")[:8]:
                print(f"    {stat.size_diff / args.groups:6.0f} B/group  {stat.traceback}")
        print_tables(tables, "tables during the window")

        longest = max(window, KEPT_SECONDS, RECENT_SECONDS)
        if args.quiet_minutes:
            await quiet(pipeline, tables, clock, args.quiet_minutes)
        else:
            for _ in range(3):  # the chore once a window passed, three times: two generations
                clock.offset += longest + 1
                tables.sweep()
        after = anon_now(trim)
        left = (after - before) / before
        small_after = pymalloc_figures()
        if small_before is not None and small_after is not None:
            print(f"  small objects (pymalloc): {small_before[0]} arenas of 1 MiB for "
                  f"{small_before[1] / 2**20:.1f} MiB of objects before the flood, "
                  f"{small_after[0]} for {small_after[1] / 2**20:.1f} MiB after")
        print(f"  after the windows: RssAnon {after / 2**20:.1f} MiB, "
              f"{(after - before) / 2**20:+.1f} MiB against before the flood ({left:+.1%}; "
              f"target within {LEFT_TARGET:.0%}: "
              f"{'PASS' if abs(left) <= LEFT_TARGET else 'MISS'})")
        print_tables(tables, "tables after the windows")
        if args.trace:
            snapshot = tracemalloc.take_snapshot()
            print(f"  tracemalloc: {tracemalloc.get_traced_memory()[0] / 2**20:.1f} MiB "
                  "traced since the flood began are left; largest sources:")
            for stat in snapshot.compare_to(traced, "lineno")[:8]:
                print(f"    {stat.size_diff / 2**10:8.0f} KiB {stat.count_diff:+8d}  "
                      f"{stat.traceback}")
            tracemalloc.stop()
        identities.close()
        msgid_store.close()
    missed = per_group > PER_GROUP_TARGET or abs(left) > LEFT_TARGET
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
