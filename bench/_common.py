"""What the benchmark scripts in bench/ (identity.py, msgid.py, migration.py) have in common.

The scripts measure different things but run alike, so the parts that are the same live here
once instead of being copied into each script:

- Logging set-up, done when this module is imported: structlog configured as in production
  (``make_filtering_bound_logger(INFO)``, so debug records are filtered) with a processor that
  drops every event, so log calls cost their production filtering but nothing is rendered or
  printed. structlog must be configured before gensokyo_idmap is imported or used (loggers are
  cached on first use), so each script imports this module before the library. The library,
  ``migrate`` and the emulated platform (``gensokyo_idmap.testing``) come from the installed
  project (``make venv`` installs it editable), not from a path added here.
- ``Result``: one figure (ops, seconds, latencies), keeping the best of several passes.
- ``throughput_pass`` / ``latency_pass``: one untimed pass over an order of keys, and one pass
  timing each op with ``time.perf_counter_ns``.
- ``Run``: the command line (``--quick``, ``--strict``, ``--profile``), the temp dir and the
  machine line printed first (python, py-lmdb, CPUs, the temp dir's file system; a tmpfs, where
  fsync is free, is refused), targets (PASS/MISS for "at least" and for "below" targets, and
  exit code 1 with ``--strict`` when one is missed) and the closing peak RSS / wall time /
  load average.
- ``Table`` and ``print_heading``: the result tables.

What each script measures, its figures, targets and the docstring explaining them stay in the
script.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import platform
import resource
import signal
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lmdb
import structlog


def _drop(_logger: Any, _method: str, _event: MutableMapping[str, Any]) -> Mapping[str, Any]:
    raise structlog.DropEvent


# Before the library is imported or used: production log filtering, and nothing printed.
structlog.configure(
    wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
    processors=[_drop],
    logger_factory=structlog.PrintLoggerFactory(file=open(os.devnull, "w")),  # noqa: SIM115
    cache_logger_on_first_use=True,
)

# --- figures ------------------------------------------------------------------------------


@dataclass
class Result:
    name: str
    ops: int = 0
    seconds: float = 0.0
    lat_ns: list[int] = field(default_factory=list)
    note: str = ""

    @property
    def ops_per_s(self) -> float:
        return self.ops / self.seconds if self.seconds else float("nan")

    def pct_us(self, q: float) -> float:
        if not self.lat_ns:
            return float("nan")
        s = self.lat_ns
        return s[min(len(s) - 1, int(q * len(s)))] / 1000.0

    def keep_best(self, ops: int, seconds: float) -> bool:
        """Record a throughput pass; keep it if it is the fastest so far."""
        if not self.seconds or ops / seconds > self.ops_per_s:
            self.ops, self.seconds = ops, seconds
            return True
        return False

    def keep_best_latencies(self, lat: list[int]) -> None:
        """Record a latency pass (sorted); keep it if its p50 is the lowest so far."""
        if not self.lat_ns or lat[len(lat) // 2] < self.lat_ns[len(self.lat_ns) // 2]:
            self.lat_ns = lat


# --- timing passes ------------------------------------------------------------------------
# A figure is a function of a key, sync or async (a coroutine is awaited). Throughput: an
# untimed pass, best of the rounds. Latency: a pass timing each op.


async def throughput_pass(fn: Callable[[int], Any], is_async: bool, order: Sequence[int]
                          ) -> float:
    clock = time.perf_counter_ns
    t0 = clock()
    if is_async:
        for i in order:
            await fn(i)
    else:
        for i in order:
            fn(i)
    return (clock() - t0) / 1e9


async def latency_pass(fn: Callable[[int], Any], is_async: bool, order: Sequence[int]
                       ) -> list[int]:
    clock = time.perf_counter_ns
    lat: list[int] = []
    append = lat.append
    if is_async:
        for i in order:
            a = clock()
            await fn(i)
            append(clock() - a)
    else:
        for i in order:
            a = clock()
            fn(i)
            append(clock() - a)
    lat.sort()
    return lat


# --- the run ------------------------------------------------------------------------------


def check_disk(path: Path) -> str:
    """The type of the file system path is on, from /proc/mounts ("?" if unknown)."""
    best, fstype = "", "?"
    try:
        with open("/proc/mounts") as mounts:
            for line in mounts:
                parts = line.split()
                mnt = parts[1]
                inside = mnt == "/" or path == Path(mnt) or str(path).startswith(mnt + "/")
                if inside and len(mnt) > len(best):
                    best, fstype = mnt, parts[2]
    except OSError:
        pass
    return fstype


class Run:
    """One run of a benchmark script: its command line (``--quick``, ``--strict``,
    ``--profile``, with the script's own help for each), the wall clock and load average from
    its start, its temp dir, the verdicts on its targets and its exit code."""

    def __init__(self, doc: str | None, *, quick: str, strict: str, profile: str) -> None:
        ap = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
        ap.add_argument("--quick", action="store_true", help=quick)
        ap.add_argument("--strict", action="store_true", help=strict)
        ap.add_argument("--profile", action="store_true", help=profile)
        args = ap.parse_args()
        self.quick: bool = args.quick
        self.strict: bool = args.strict
        self.profile: bool = args.profile
        self.misses = 0
        self.started = time.perf_counter()
        self.load0 = os.getloadavg()[0]

    @contextmanager
    def temp_dir(self, prefix: str, what: str, tmpfs_why: str) -> Iterator[Path]:
        """A ``tempfile`` directory for the run, after printing the machine line.

        If it is on a tmpfs, the run is refused: the reason (``tmpfs_why``) is printed and
        SystemExit(2) raised (the temp dir is removed first).
        """
        with tempfile.TemporaryDirectory(prefix=prefix) as tmpdir:
            tmp = Path(tmpdir)
            fstype = check_disk(tmp.resolve())
            if fstype in ("tmpfs", "ramfs"):
                print(f"refusing: {tmp} is on {fstype}, {tmpfs_why}; set TMPDIR to a disk")
                raise SystemExit(2)
            print(f"gensokyo-idmap {what} benchmark ({'quick' if self.quick else 'full'}): "
                  f"python {platform.python_version()}, py-lmdb {lmdb.__version__} "
                  f"(LMDB {'.'.join(map(str, lmdb.version()))}), {os.cpu_count()} CPUs, "
                  f"{fstype} at {tmp}")
            yield tmp

    def verdict(self, value: float, target: float) -> str:
        """PASS if value >= target, else MISS (counted for the exit code)."""
        if value >= target:
            return "PASS"
        self.misses += 1
        return "MISS"

    def verdict_below(self, value: float, limit: float) -> str:
        """PASS if value < limit (a target where less is better), else MISS (counted)."""
        if value < limit:
            return "PASS"
        self.misses += 1
        return "MISS"

    def exit_code(self) -> int:
        """1 if ``--strict`` was given and a target was missed, else 0."""
        return 1 if self.misses and self.strict else 0

    @staticmethod
    def peak_rss_mib() -> float:
        """``ru_maxrss`` of this process (KiB on Linux), in MiB."""
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def summary(self) -> str:
        """Wall time and load average since the start."""
        return (f"total {time.perf_counter() - self.started:.1f}s; "
                f"load average {self.load0:.2f} at start, {os.getloadavg()[0]:.2f} at end")

# --- helper processes ---------------------------------------------------------------------


def die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """``preexec_fn`` of a helper subprocess: SIGTERM it when this process dies, so a
    benchmark killed half-way leaves no daemon behind."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def cpu_seconds(pid: int | None) -> float:
    """utime + stime of a process (this one if None), from /proc; nan where unavailable."""
    try:
        fields = Path(f"/proc/{pid or 'self'}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def proc_status(pid: int) -> dict[str, int]:
    """The kB figures of /proc/<pid>/status."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        parts = value.split()
        if len(parts) == 2 and parts[1] == "kB":
            out[name] = int(parts[0])
    return out


def smaps(pid: int) -> dict[str, dict[str, int]]:
    """The kB figures (``Rss``, ``Anonymous``, …) of /proc/<pid>/smaps, summed per mapping
    name, named so that one mapping keeps its name from one reading to the next: the path
    of a file-backed mapping (its ``Anonymous`` kB are its private dirty pages: e.g. the
    relocated parts of libraries), ``[heap]`` (the main malloc arena) and the kernel's other
    bracketed names, ``arena@<start>`` for the 64 MiB-aligned regions glibc gives each
    thread's arena, ``anon@<start>`` for other anonymous regions (pymalloc arenas, LMDB's
    page buffers, thread stacks)."""
    out: dict[str, dict[str, int]] = {}
    figures: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split(maxsplit=5)
        if head and "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
            start = int(head[0].split("-")[0], 16)
            path = head[5].strip() if len(head) == 6 else ""
            if path:
                name = path
            elif start % (64 << 20) == 0:
                name = f"arena@{start:x}"
            else:
                name = f"anon@{start:x}"
            figures = out.setdefault(name, {})
        elif len(head) == 3 and head[0].endswith(":") and head[2] == "kB":
            field = head[0][:-1]
            figures[field] = figures.get(field, 0) + int(head[1])
    return out


# --- output -------------------------------------------------------------------------------


def unpack_ref(ref: str, into: Path) -> Path:
    """``ref`` (a commit, branch or tag) of this checkout as files under ``into`` (made
    here), for a daemon of that code to run beside this tree's in one run (``--against``):
    the directory to put first on its ``PYTHONPATH``. ``git archive`` rather than a
    worktree: nothing is added to the checkout, and the temp dir takes it away."""
    into.mkdir(parents=True)
    archive = into / "ref.tar"
    with open(archive, "wb") as out:
        subprocess.run(["git", "-C", str(Path(__file__).resolve().parent.parent), "archive",
                        ref], stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    archive.unlink()
    return into / "tree"


def print_heading(hdr: str) -> None:
    """A blank line, a table's header and a rule under it."""
    print()
    print(hdr)
    print("  " + "-" * (len(hdr) - 2))


@dataclass(frozen=True)
class Table:
    """A table of Results: figure, ops, ops/s, p50 and p99 (us), note; column widths."""

    name: int
    rate: int
    us: int

    def print_header(self) -> None:
        print_heading(f"  {'figure':<{self.name}} {'ops':>8} {'ops/s':>{self.rate}} "
                      f"{'p50 us':>{self.us}} {'p99 us':>{self.us}}")

    def row(self, r: Result) -> str:
        return (f"  {r.name:<{self.name}} {r.ops:>8} {r.ops_per_s:>{self.rate},.0f}"
                f" {r.pct_us(0.50):>{self.us}.1f} {r.pct_us(0.99):>{self.us}.1f}  {r.note}")
