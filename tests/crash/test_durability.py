"""Durability of the write path across processes (DESIGN §3.4, §3.5).

"An event is forwarded downstream only after the transaction that gave its vUINs is
durable: a vUIN once shown to a bot framework is never handed to someone else, even after
``kill -9``."  ``tests/crash/durability_child.py`` plays the daemon: it prints ``key vuin`` only
after ``await graph.resolve(...)`` returned. These tests

- kill that child with SIGKILL at random moments, over and over on one file, and check
  after each kill that every line it ever printed is in the store with exactly that vUIN,
  that ``identity_to_vuin`` and ``vuin_to_identity`` are exact inverses, and that no vUIN
  names two people;
- run two children on one file at once, with disjoint keys (no vUIN may be handed out
  twice) and with the same keys (each key must get one vUIN, the same in both processes).

The children are real processes on a real LMDB file in ``tmp_path``. Every wait is bounded
and every child is killed and reaped in a ``finally``. The random kill times come from a
fixed seed (``DURABILITY_SEED`` overrides it; the seed is in every failure message).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path


from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore

CHILD = Path(__file__).with_name("durability_child.py")
ROOT = CHILD.parents[2]
SEED = int(os.environ.get("DURABILITY_SEED", "20240611"))

KILL_ROUNDS = 24
#: Far more than a child gets through before it is killed: every round is cut off mid-run.
KEYS_PER_ROUND = 1_000_000
BATCH = 16
STARTUP_TIMEOUT = 20.0  # s until a child's first line
EXIT_TIMEOUT = 20.0  # s for a killed child to be reaped and its pipe to reach EOF
RUN_TIMEOUT = 60.0  # s for a child that runs to completion


@dataclass
class Child:
    """One durability_child.py process and every complete line it printed."""

    proc: subprocess.Popen[bytes]
    stderr_path: Path
    lines: list[bytes] = field(default_factory=list)
    partial: bytes = b""
    first_line: threading.Event = field(default_factory=threading.Event)
    reader: threading.Thread | None = None

    @classmethod
    def start(cls, args: Sequence[str], stderr_path: Path) -> Child:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p
        )
        env["PYTHONUNBUFFERED"] = "1"
        with open(stderr_path, "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, str(CHILD), *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                bufsize=0,
                cwd=ROOT,
                env=env,
            )
        child = cls(proc, stderr_path)
        child.reader = threading.Thread(target=child._read, daemon=True)
        child.reader.start()
        return child

    def _read(self) -> None:
        assert self.proc.stdout is not None
        pending = b""
        while True:
            chunk = self.proc.stdout.read(65536)  # unbuffered: whatever the pipe holds
            if not chunk:
                break
            pending += chunk
            *complete, pending = pending.split(b"\n")
            if complete:
                self.lines.extend(complete)
                self.first_line.set()
        self.partial = pending  # a line cut off by the kill: never a promise

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)

    def reap(self, timeout: float = EXIT_TIMEOUT) -> int:
        """Wait for exit and EOF; returns the exit code."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.wait(timeout=timeout)
            raise AssertionError(f"child {self.proc.pid} did not exit within {timeout} s") from None
        finally:
            if self.reader is not None:
                self.reader.join(timeout=timeout)
        assert self.reader is None or not self.reader.is_alive(), "stdout reader stuck"
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return code

    def cleanup(self) -> None:
        """For finally blocks: nothing may be left running, and no pipe left open."""
        try:
            self.kill()
        finally:
            try:
                self.proc.wait(timeout=EXIT_TIMEOUT)
            finally:
                if self.reader is not None:
                    self.reader.join(timeout=EXIT_TIMEOUT)
                if self.proc.stdout is not None and not self.proc.stdout.closed:
                    self.proc.stdout.close()

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-4000:]

    def pairs(self) -> list[tuple[str, int]]:
        """The printed ``key vuin`` lines; anything else on stdout is a failure."""
        out: list[tuple[str, int]] = []
        for raw in self.lines:
            parts = raw.decode("utf-8").split(" ")
            assert len(parts) == 2 and parts[0].startswith("openid:QQ:") and parts[1].isdigit(), (
                f"child {self.proc.pid} printed a line that is not 'key vuin': {raw!r}"
            )
            vuin = int(parts[1])
            assert vuin > 0, f"child {self.proc.pid} printed vUIN {vuin} for {parts[0]}"
            out.append((parts[0], vuin))
        return out


def child_args(
    db: Path, start: int, count: int, *, prefix: str | None = None, extra: Iterable[str] = ()
) -> list[str]:
    args = [str(db), str(start), str(count), "--app-id", "102000001", "--batch", str(BATCH)]
    if prefix is not None:
        args += ["--prefix", prefix]
    return [*args, *extra]


@dataclass(frozen=True)
class StoreState:
    forward: dict[str, int]
    reverse: set[tuple[int, str]]
    counter: int


def read_store(db: Path) -> StoreState:
    """Open the file in this process (as a restarted daemon would), read it, close it."""
    store = LmdbIdentityStore(db)
    try:
        with store.read() as view:
            forward = dict(view.iter_identities())
            reverse = set(view.iter_vuin_sets())
            counter = view.vuin_counter()
    finally:
        store.close()
    return StoreState(forward, reverse, counter)


def check_invariants(state: StoreState, context: str) -> None:
    """identity_to_vuin and vuin_to_identity are exact inverses; no vUIN names two people."""
    as_reverse = {(vuin, key) for key, vuin in state.forward.items()}
    assert as_reverse == state.reverse, (
        f"{context}: identity_to_vuin and vuin_to_identity differ: "
        f"only forward {sorted(as_reverse - state.reverse)[:5]}, "
        f"only reverse {sorted(state.reverse - as_reverse)[:5]}"
    )
    by_vuin: dict[int, set[str]] = defaultdict(set)
    for vuin, key in state.reverse:
        by_vuin[vuin].add(key)
    # Every resolve in these tests names one new OpenID: a vUIN with two keys is two people.
    shared = {vuin: sorted(keys) for vuin, keys in by_vuin.items() if len(keys) > 1}
    assert not shared, f"{context}: vUINs naming several OpenIDs: {dict(list(shared.items())[:5])}"
    if state.forward:
        highest = max(state.forward.values())
        assert state.counter >= highest, (
            f"{context}: meta.vuin_counter {state.counter} is below vUIN {highest} in use"
        )


def check_printed(state: StoreState, printed: dict[str, int], context: str) -> None:
    """Every pair a child printed (= showed downstream) is stored with exactly that vUIN."""
    lost = {k: v for k, v in printed.items() if k not in state.forward}
    moved = {
        k: (v, state.forward[k])
        for k, v in printed.items()
        if k in state.forward and state.forward[k] != v
    }
    assert not lost and not moved, (
        f"{context}: printed but lost {len(lost)} (e.g. {list(lost.items())[:3]}), "
        f"printed but stored with another vUIN {len(moved)} (e.g. {list(moved.items())[:3]})"
    )


def add_printed(
    printed: dict[str, int], shown: dict[int, str], pairs: Iterable[tuple[str, int]], context: str
) -> None:
    for key, vuin in pairs:
        assert printed.setdefault(key, vuin) == vuin, (
            f"{context}: {key} printed with vUIN {vuin} and earlier with {printed[key]}"
        )
        assert shown.setdefault(vuin, key) == key, (
            f"{context}: vUIN {vuin} shown for {key} and earlier for {shown[vuin]}"
        )


# --------------------------------------------------------------------------- kill -9


def test_sigkill_never_loses_or_reuses_a_printed_vuin(tmp_path: Path) -> None:
    db = tmp_path / "openid-map.db"
    rng = random.Random(SEED)
    printed: dict[str, int] = {}
    shown: dict[int, str] = {}
    kills = killed_mid_write = 0
    partial_lines = 0
    began = time.monotonic()
    report: list[str] = []

    for round_no in range(KILL_ROUNDS):
        context = f"seed {SEED}, round {round_no}"
        # Every fourth round is timed from the spawn, so some kills land while the child
        # starts up and opens the file; the others from the first durable line, so they
        # land while resolves and commits are in flight.
        from_spawn = round_no % 4 == 0
        delay = rng.uniform(0.05, 0.4)
        start = round_no * KEYS_PER_ROUND
        child = Child.start(
            child_args(db, start, KEYS_PER_ROUND), tmp_path / f"kill-{round_no}.stderr"
        )
        try:
            if not from_spawn:
                assert child.first_line.wait(STARTUP_TIMEOUT) or child.proc.poll() is not None, (
                    f"{context}: child printed nothing within {STARTUP_TIMEOUT} s"
                )
            time.sleep(delay)
            assert child.proc.poll() is None, (
                f"{context}: child exited by itself with {child.proc.returncode} before the "
                f"kill; stderr:\n{child.stderr()}"
            )
            child.kill()
            code = child.reap()
        finally:
            child.cleanup()
        kills += 1
        assert code == -signal.SIGKILL, (
            f"{context}: child ended with {code}, not by SIGKILL; stderr:\n{child.stderr()}"
        )
        pairs = child.pairs()
        killed_mid_write += bool(pairs)
        partial_lines += bool(child.partial)
        assert all(
            start <= int(key.rsplit("-", 2)[1]) < start + KEYS_PER_ROUND for key, _ in pairs
        ), f"{context}: a printed key is outside this round's numbering (keys must be new)"
        add_printed(printed, shown, pairs, context)
        report.append(f"r{round_no}:{'spawn' if from_spawn else 'write'}+"
                      f"{delay * 1000:.0f}ms={len(pairs)}")

        if db.exists():  # a kill before the first open may leave no file at all
            state = read_store(db)
            check_invariants(state, context)
            check_printed(state, printed, context)
        else:
            assert not printed, f"{context}: {len(printed)} pairs printed but no store file"

    elapsed = time.monotonic() - began
    summary = (
        f"seed {SEED}: {kills} kills ({killed_mid_write} after the first line, "
        f"{partial_lines} cut mid-line), {len(printed)} printed pairs, {elapsed:.1f} s; "
        + " ".join(report)
    )
    print(summary)
    assert kills >= 20, summary
    assert len(printed) > 0, f"the child never printed a pair: {summary}"
    assert killed_mid_write >= KILL_ROUNDS // 2, f"too few kills landed mid-run: {summary}"
    # After all the kills the file is still a working store: a fresh child resolves again.
    final = Child.start(child_args(db, KILL_ROUNDS * KEYS_PER_ROUND, 4), tmp_path / "final.stderr")
    try:
        code = final.reap(RUN_TIMEOUT)
    finally:
        final.cleanup()
    assert code == 0, f"a child after {kills} kills failed: {final.stderr()}"
    final_pairs = final.pairs()
    assert len(final_pairs) == 4 * BATCH, summary
    add_printed(printed, shown, final_pairs, "after the kills")
    state = read_store(db)
    check_invariants(state, "after the kills")
    check_printed(state, printed, "after the kills")


# --------------------------------------------------------------------------- two processes

TWO_PROC_COUNT = 60


def run_pair(
    tmp_path: Path, db: Path, prefixes: tuple[str, str], tag: str
) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """Start two children on one file, release them together, let both finish."""
    go = tmp_path / f"{tag}.go"
    ready = [tmp_path / f"{tag}-{n}.ready" for n in range(2)]
    children: list[Child] = []
    try:
        for n, prefix in enumerate(prefixes):
            extra = ["--ready-file", str(ready[n]), "--go-file", str(go)]
            children.append(
                Child.start(
                    child_args(db, 0, TWO_PROC_COUNT, prefix=prefix, extra=extra),
                    tmp_path / f"{tag}-{n}.stderr",
                )
            )
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not all(r.exists() for r in ready):
            dead = [c for c in children if c.proc.poll() is not None]
            assert not dead, f"{tag}: child exited before it was ready: {dead[0].stderr()}"
            assert time.monotonic() < deadline, f"{tag}: children not ready in time"
            time.sleep(0.005)
        go.touch()
        codes = [c.reap(RUN_TIMEOUT) for c in children]
    finally:
        for c in children:
            c.cleanup()
    for n, (c, code) in enumerate(zip(children, codes, strict=True)):
        assert code == 0, f"{tag}: child {n} exited with {code}: {c.stderr()}"
        assert not c.partial, f"{tag}: child {n} left a partial line {c.partial!r}"
    a, b = (c.pairs() for c in children)
    for n, pairs in enumerate((a, b)):
        keys = [k for k, _ in pairs]
        assert len(keys) == len(set(keys)) == TWO_PROC_COUNT * BATCH, (
            f"{tag}: child {n} printed {len(keys)} lines ({len(set(keys))} keys), "
            f"expected {TWO_PROC_COUNT * BATCH}"
        )
    return a, b


def test_two_processes_disjoint_keys_never_share_a_vuin(tmp_path: Path) -> None:
    db = tmp_path / "openid-map.db"
    a, b = run_pair(tmp_path, db, ("procA", "procB"), "disjoint")
    assert not {k for k, _ in a} & {k for k, _ in b}, "the key ranges were meant to be disjoint"
    printed: dict[str, int] = {}
    shown: dict[int, str] = {}
    add_printed(printed, shown, a, "process A")
    add_printed(printed, shown, b, "process B")  # fails if B was shown a vUIN A was shown
    assert len(shown) == len(a) + len(b)
    state = read_store(db)
    check_invariants(state, "two processes, disjoint keys")
    check_printed(state, printed, "two processes, disjoint keys")
    assert set(state.forward) == set(printed), "the store holds keys nobody printed"


def test_two_processes_same_keys_get_the_same_vuin(tmp_path: Path) -> None:
    db = tmp_path / "openid-map.db"
    a, b = run_pair(tmp_path, db, ("shared", "shared"), "same")
    in_a, in_b = dict(a), dict(b)
    assert set(in_a) == set(in_b), "both processes were meant to resolve the same keys"
    differ = {k: (in_a[k], in_b[k]) for k in in_a if in_a[k] != in_b[k]}
    assert not differ, (
        f"{len(differ)} keys got different vUINs in the two processes, e.g. "
        f"{list(differ.items())[:5]}"
    )
    printed: dict[str, int] = {}
    shown: dict[int, str] = {}
    add_printed(printed, shown, a, "process A")
    add_printed(printed, shown, b, "process B")
    assert len(shown) == len(in_a), "distinct keys must have distinct vUINs"
    state = read_store(db)
    check_invariants(state, "two processes, same keys")
    check_printed(state, printed, "two processes, same keys")
    assert set(state.forward) == set(printed), "the store holds keys nobody printed"
