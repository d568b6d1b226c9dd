"""Webhook intake with a forward-WS client that stopped reading, against intake without it.

Run: ``.venv/bin/python bench/stalled_client.py [--quick] [--strict] [--events N] [--rounds R]``

This is a benchmark script, not a test. It starts two daemons (``gensokyo-idmap serve``, set
up as in ``bench/inbound.py``: webhook on, a forward-WebSocket server, durable stores in a
temp dir), each with a forward-WS consumer that reads every frame (the healthy framework).
Right before each of its floods the second daemon also gets a client that completes the
WebSocket handshake and never reads again: a raw socket with a small receive buffer, so the
kernel's buffers fill (a frozen framework). Both daemons run with
``onebot.ping_timeout_seconds: 60``, so the stalled client stays connected through the whole
flood; the script checks that it was not closed before the flood ended (the daemon's log has
no 1013 line for it yet) and closes it after.

Floods of N known-user group messages (8000, 2000 with ``--quick``, or ``--events``) go
through the signed webhook with 32 deliveries in flight, each to be acknowledged (200),
one daemon then the other in each round, the order swapped every round (``--rounds``,
default 7, 1 with ``--quick``); events/s runs from the first POST to the last arrival at the
healthy consumer.

Figures: per round, events/s with the stalled client / without it, the two floods back to
back; the median over the rounds is the result (on a shared machine the load drifts by
several times within minutes, so the best of each daemon's rounds, taken minutes apart,
compares hours, not daemons). Target >= 0.9 (issue 29 item 4: a framework that stops
reading costs the others at most 10 %). With each daemon, the median over the rounds of
the longest wait for an acknowledgement (between two, or from the start to the first): a
wait for the stalled client shows there, where the load of the machine moves it little.
And each daemon's CPU time per event over its floods (utime + stime from /proc): what the
stalled client costs in work rather than in waiting.
The exit code is 0 unless ``--strict`` is given and the target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import dataclasses
import itertools
import os
import platform
import socket
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import aiohttp

# _common before the library: importing it configures structlog (see its docstring).
from _common import check_disk, cpu_seconds, print_heading
from inbound import (
    FULL,
    QUICK,
    Events,
    Profile,
    Target,
    daemon_command,
    flood,
    temp_dir,
    warm_up,
)

TARGET_RATIO = 0.9
PING_TIMEOUT = 60.0  # longer than any flood: the stalled client is there throughout
#: ``[onebot] no pong in time`` and ``[onebot] forward ws client fell behind`` in the
#: daemon's JSON log, whose lines carry the component in a field of their own.
CLOSED_LINES = ('"event":"no pong in time', '"event":"forward ws client fell behind')
TOTAL_TIMEOUT = 600.0
WITHOUT, WITH = "daemon", "daemon + stalled client"


@contextmanager
def stalled_client(port: int) -> Iterator[socket.socket]:
    """A forward-WS client that completes the handshake and then never reads: the kernel's
    buffers fill and the daemon's writes to it block."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window
    try:
        sock.settimeout(10)
        sock.connect(("127.0.0.1", port))
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                     f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                     f"Sec-WebSocket-Version: 13\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:  # a byte at a time: nothing after the head is read
            byte = sock.recv(1)
            if not byte:
                raise RuntimeError("the daemon closed the stalled client's handshake")
            head += byte
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise RuntimeError(f"handshake refused: {head[:200]!r}")
        yield sock
    finally:
        sock.close()


def closed_lines(target: Target) -> int:
    """How many forward-WS clients the daemon closed for want of pongs or room, so far."""
    try:
        text = target.log_path.read_text(errors="replace")
    except OSError:
        return 0
    return sum(text.count(line) for line in CLOSED_LINES)


async def measure(targets: list[Target], prof: Profile, events_per_flood: int
                  ) -> tuple[dict[str, list[float]], dict[str, list[float]], dict[str, float]]:
    rates: dict[str, list[float]] = {t.name: [] for t in targets}
    gaps: dict[str, list[float]] = {t.name: [] for t in targets}
    cpu: dict[str, list[float]] = {t.name: [0.0, 0.0] for t in targets}  # seconds, events
    events = Events(prof)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as http:
        try:
            for target in targets:
                await target.platform.start()
                await target.start(http)
                await warm_up(target, events, prof)
            for round_ in range(prof.rounds):
                for target in targets if round_ % 2 == 0 else targets[::-1]:
                    assert target.proc is not None
                    cpu0 = cpu_seconds(target.proc.pid)
                    acked = [time.perf_counter_ns()]  # the start: a wait before the first
                    if target.name == WITHOUT:
                        n, seconds = await flood(target, "webhook", events, "known",
                                                 events_per_flood, prof.flood_timeout, acked)
                    else:
                        before = closed_lines(target)
                        with stalled_client(target.forward_port):
                            n, seconds = await flood(target, "webhook", events, "known",
                                                     events_per_flood, prof.flood_timeout,
                                                     acked)
                            if closed_lines(target) != before:
                                raise RuntimeError("the stalled client was closed during the "
                                                   "flood: raise PING_TIMEOUT")
                    if n < events_per_flood:
                        raise RuntimeError(f"{target.name}: only {n} of {events_per_flood} "
                                           "events arrived")
                    rates[target.name].append(n / seconds)
                    cpu[target.name][0] += cpu_seconds(target.proc.pid) - cpu0
                    cpu[target.name][1] += n
                    acked.sort()
                    gap = max(b - a for a, b in itertools.pairwise(acked)) / 1e6
                    gaps[target.name].append(gap)
                    print(f"  round {round_ + 1}  {target.name:<26} {n / seconds:>8,.0f} "
                          f"events/s, longest wait for an acknowledgement {gap:,.0f} ms",
                          flush=True)
        finally:
            for target in targets:
                await target.close()
    return rates, gaps, {name: spent / n for name, (spent, n) in cpu.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2000 events per flood, one round")
    ap.add_argument("--strict", action="store_true", help="exit 1 if the target is missed")
    ap.add_argument("--events", type=int, default=None, help="events per flood")
    ap.add_argument("--rounds", type=int, default=None,
                    help="rounds (default 7, 1 with --quick); the median ratio is kept")
    args = ap.parse_args(argv)
    prof = dataclasses.replace(QUICK, events=2000) if args.quick else dataclasses.replace(
        FULL, rounds=7)
    if args.rounds:
        prof = dataclasses.replace(prof, rounds=args.rounds)
    count = args.events or prof.events
    started = time.perf_counter()
    with temp_dir() as tmp:
        fstype = check_disk(tmp.resolve())
        print(f"gensokyo-idmap stalled-client benchmark: python {platform.python_version()}, "
              f"{os.cpu_count()} CPUs, {fstype} at {tmp}; {count:,} webhook events per "
              f"flood, {prof.rounds} round(s)")
        onebot = {"ping_timeout_seconds": PING_TIMEOUT}
        targets = [Target(WITHOUT, daemon_command, tmp, "info", onebot=onebot),
                   Target(WITH, daemon_command, tmp, "info", onebot=onebot)]
        try:
            rates, gaps, cpu = asyncio.run(asyncio.wait_for(
                measure(targets, prof, count), TOTAL_TIMEOUT))
        except (RuntimeError, TimeoutError, OSError, aiohttp.ClientError) as err:
            print(f"benchmark failed: {err!r}")
            for target in targets:
                print(f"--- {target.name} log, last lines:\n{target.log_tail()}")
            return 2
    ratios = [w / wo for w, wo in zip(rates[WITH], rates[WITHOUT], strict=True)]
    ratio = statistics.median(ratios)
    ok = ratio >= TARGET_RATIO
    print_heading(f"  {'webhook, known users (median of rounds)':<42} {'events/s':>9}")
    for name in (WITHOUT, WITH):
        print(f"  {name:<42} {statistics.median(rates[name]):>9,.0f}  longest wait for an "
              f"acknowledgement {statistics.median(gaps[name]):,.0f} ms, "
              f"cpu {cpu[name] * 1e3:.3f} ms/event")
    print(f"  {'ratio with / without, per round':<42} "
          + " ".join(f"{r:.3f}" for r in ratios))
    print(f"  {'ratio with / without the stalled client':<42} {ratio:>9.3f}  "
          f"target >= {TARGET_RATIO:g}  {'PASS' if ok else 'MISS'}")
    print(f"\ntotal {time.perf_counter() - started:.1f}s")
    return 1 if args.strict and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
