"""``kill -9`` during a legacy migration: no marker and no data, or everything (issue 4).

``tests/crash/migration_child.py`` plays a daemon start that migrates a copy of a legacy
fixture into a fresh data dir. For each fixture this test

1. migrates it in-process, uninterrupted: the reference content;
2. runs one child to completion, to measure how long a child lives and how long each of
   its phases takes (the child prints ``imported``, ``opened``, ``migrated``, ``closed``);
3. starts one child per kill moment, each in a fresh data dir, and SIGKILLs it: at once,
   2 ms after the start, near the measured end, at random fractions of the measured run
   (interpreter start, imports, opening, migration, closing), and at random moments after
   a phase line arrives (its stdout is read live): while opening the stores, inside
   ``migrate_legacy`` (sha256 pass, msgid counter, the write transaction, its commit) and
   after the commit while closing;
4. after each kill opens the stores in this process, as the next daemon start would: either
   there is no marker and openid-map.db holds nothing (identities, vUIN sets, aliases,
   last_seen, config, UserInfo, counter), or there is a marker and the content equals the
   reference; then runs the migration again to completion on that dir and compares it with
   the reference again (msgid-map.db's carried counter included).

At least one kill must land between "opened" and "migrated" (inside migrate_legacy), and
at least 20 children must really be killed; should the planned moments fall short, extra
kills aimed at the window follow. Kill times come from a fixed seed
(``MIGRATION_KILL_SEED`` overrides it; the seed is in every failure message). Every wait
is bounded; every child is killed and reaped in a ``finally``.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

import pytest

from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore
from migrate.legacy import MARKER, migrate_legacy

CHILD = Path(__file__).with_name("migration_child.py")
ROOT = CHILD.parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "legacy"
APP = "102076543"  # settings.appid of the fixtures
SEED = int(os.environ.get("MIGRATION_KILL_SEED", "20261130"))

RANDOM_KILLS = 8  # uniform over the whole measured run, from the child's start
OPENING_KILLS = 2  # while it opens the stores (after its "imported" line)
WINDOW_KILLS = 9  # inside migrate_legacy (after its "opened" line)
LATE_KILLS = 2  # after the commit, while it closes the stores (after "migrated")
EXTRA_WINDOW_KILLS = 10  # at most, only while no kill landed inside migrate_legacy or
MIN_KILLS = 20  # fewer children than this were really killed (the rest had exited)
RUN_TIMEOUT = 30.0  # s for a child that runs to completion
EXIT_TIMEOUT = 10.0  # s for a killed child to be reaped
CHECK_TIMEOUT = 30.0  # s for opening, checking and re-migrating one killed dir
PHASES = ("imported", "opened", "migrated", "closed")

T = TypeVar("T")


@dataclass(frozen=True)
class Content:
    """Everything a migration writes to openid-map.db (the marker's own fields aside)."""

    identities: list[tuple[str, int]]
    vuin_sets: list[tuple[int, str]]
    aliases: list[tuple[int, int]]
    config: list[tuple[bytes, bytes]]
    user_info: list[tuple[bytes, bytes]]
    vuin_counter: int


@dataclass
class Snapshot:
    marker: object
    content: Content
    other_tables: int  # last_seen entries: a migration never writes any
    msg_counter: int


@dataclass
class Run:
    """One child: when it started, what it printed, how it ended."""

    delay: float | None
    code: int
    phases: dict[str, float] = field(default_factory=dict)
    status: str | None = None
    stderr: str = ""

    def reached(self) -> str:
        done = [p for p in PHASES if p in self.phases]
        return done[-1] if done else "nothing"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def bounded(fn: Callable[[], T], timeout: float, what: str) -> T:
    """``fn()`` on a daemon thread, waited for at most ``timeout`` s (a stuck LMDB lock
    of a killed child must fail the test, not hang it)."""
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except Exception as exc:  # noqa: BLE001 - handed back to the test thread
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True, name=what)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise AssertionError(f"{what}: still running after {timeout} s (a hang)")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


def snapshot(identity: LmdbIdentityStore, msgid: LmdbMsgIdStore) -> Snapshot:
    with identity.read() as view:
        counts = view.counts()
        legacy = view.legacy_counts()
        content = Content(
            identities=sorted(view.iter_identities()),
            vuin_sets=sorted(view.iter_vuin_sets()),
            aliases=sorted(view.iter_aliases()),
            config=sorted(view.iter_config()),
            user_info=sorted(view.iter_user_info()),
            vuin_counter=view.vuin_counter(),
        )
        marker = view.get_meta(MARKER)
    # the counts agree with what the iterators return
    assert counts.identities == len(content.identities)
    assert counts.aliases == len(content.aliases)
    assert legacy.config == len(content.config)
    assert legacy.user_info == len(content.user_info)
    assert counts.vuins == len({v for v, _ in content.vuin_sets})
    with msgid.read() as mview:
        msg_counter = mview.msg_counter()
    return Snapshot(marker, content, counts.last_seen, msg_counter)


def open_stores(data: Path) -> tuple[LmdbIdentityStore, LmdbMsgIdStore]:
    identity = LmdbIdentityStore(data / "openid-map.db")
    try:
        msgid = LmdbMsgIdStore(data / "msgid-map.db")
    except BaseException:
        identity.close()
        raise
    return identity, msgid


def migrate_in_process(legacy: Path, data: Path) -> tuple[Snapshot, Snapshot, str]:
    """(state as found, state after migrating to completion, report status)."""
    identity, msgid = open_stores(data)
    try:
        found = snapshot(identity, msgid)
        report = migrate_legacy(legacy, identity, msgid, APP)
        after = snapshot(identity, msgid)
    finally:
        msgid.close()
        identity.close()
    return found, after, report.status


def spawn(legacy: Path, data: Path, stderr_path: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    with open(stderr_path, "wb") as err:
        return subprocess.Popen(
            [sys.executable, str(CHILD), str(legacy), str(data), APP],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            cwd=ROOT,
            env=env,
        )


def run_child(legacy: Path, data: Path, kill: tuple[str | None, float] | None,
              stderr_path: Path) -> Run:
    """Start a child; ``kill = (anchor, delay)`` SIGKILLs it ``delay`` s after its start
    (anchor None) or after it printed the phase ``anchor``; ``kill = None`` lets it finish.

    The child's stdout is read live on a thread, so a kill anchored at a phase follows that
    phase by ``delay`` plus the pipe's latency, however long the interpreter took to start.
    """
    started = time.monotonic()
    proc = spawn(legacy, data, stderr_path)
    lines: list[bytes] = []
    seen = {phase: threading.Event() for phase in PHASES}

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            lines.append(raw)
            phase = raw.split(b" ", 1)[0].decode(errors="replace")
            if phase in seen:
                seen[phase].set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if kill is not None:
            anchor, delay = kill
            if anchor is not None:
                deadline = time.monotonic() + RUN_TIMEOUT
                while not seen[anchor].wait(0.001):
                    if proc.poll() is not None or time.monotonic() > deadline:
                        break
                base = time.monotonic()
            else:
                base = started
            remaining = base + delay - time.monotonic()
            if remaining > 0:
                time.sleep(remaining)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        code = proc.wait(timeout=RUN_TIMEOUT if kill is None else EXIT_TIMEOUT)
        reader.join(EXIT_TIMEOUT)
        assert not reader.is_alive(), "the child's stdout did not reach EOF"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=EXIT_TIMEOUT)
        reader.join(EXIT_TIMEOUT)
        if proc.stdout is not None and not proc.stdout.closed:
            proc.stdout.close()
    run = Run(kill[1] if kill else None, code,
              stderr=stderr_path.read_text(errors="replace")[-3000:])
    for line in b"".join(lines).decode().splitlines():
        parts = line.split(" ")
        assert parts[0] in PHASES and len(parts) in (2, 3), f"unexpected child line {line!r}"
        run.phases[parts[0]] = float(parts[1]) - started
        if parts[0] == "migrated":
            run.status = parts[2]
    return run


def assert_empty(found: Snapshot, context: str) -> None:
    content = found.content
    held = {
        "identities": len(content.identities),
        "vuin_sets": len(content.vuin_sets),
        "aliases": len(content.aliases),
        "config": len(content.config),
        "user_info": len(content.user_info),
        "last_seen": found.other_tables,
        "vuin_counter": content.vuin_counter,
    }
    assert not any(held.values()), f"{context}: no marker, but the store holds {held}"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["small-counter", "small-hash"])
def test_kill_9_during_migration_leaves_nothing_or_everything(tmp_path: Path, name: str) -> None:
    rng = random.Random(f"{SEED}:{name}")
    legacy = tmp_path / "legacy" / "idmap.db"
    legacy.parent.mkdir()
    shutil.copyfile(FIXTURES / f"{name}.db", legacy)
    before = sha(legacy)

    # 1. the reference: one uninterrupted migration
    _, reference, status = migrate_in_process(legacy, tmp_path / "reference")
    assert status == "migrated" and reference.marker is not None
    assert reference.content.identities, "the reference migration wrote nothing"
    ref = reference.content

    # 2. one child to completion: its duration and its migration window
    measured = run_child(legacy, tmp_path / "measure", None, tmp_path / "measure.stderr")
    assert measured.code == 0, f"child failed: {measured.stderr}"
    assert measured.status == "migrated" and set(measured.phases) == set(PHASES), measured
    total = measured.phases["closed"]
    opening = measured.phases["opened"] - measured.phases["imported"]
    migrating = measured.phases["migrated"] - measured.phases["opened"]
    closing = measured.phases["closed"] - measured.phases["migrated"]
    _, after, status = bounded(
        partial(migrate_in_process, legacy, tmp_path / "measure"), CHECK_TIMEOUT, "re-open")
    assert status == "already_migrated" and after.content == ref

    # 3. the kill moments: (anchor phase or None for the start, delay after it)
    plan: list[tuple[str | None, float]] = [(None, 0.0), (None, 0.002), (None, total * 0.98)]
    plan += [(None, rng.uniform(0.0, total)) for _ in range(RANDOM_KILLS)]
    plan += [("imported", rng.uniform(0.0, opening)) for _ in range(OPENING_KILLS)]
    plan += [("opened", rng.uniform(0.0, migrating * 1.1)) for _ in range(WINDOW_KILLS)]
    plan += [("migrated", rng.uniform(0.0, closing)) for _ in range(LATE_KILLS)]
    extra = [("opened", rng.uniform(0.0, migrating)) for _ in range(EXTRA_WINDOW_KILLS)]

    outcomes: Counter[str] = Counter()
    inside = killed = 0
    log: list[str] = []
    i = 0
    while i < len(plan) or ((inside == 0 or killed < MIN_KILLS) and extra):
        kill = plan[i] if i < len(plan) else extra.pop()
        i += 1
        anchor, delay = kill
        data = tmp_path / f"kill-{i}"
        run = run_child(legacy, data, kill, tmp_path / f"kill-{i}.stderr")
        reached = run.reached()
        context = (f"{name} kill {i}: {delay * 1000:.1f} ms after {anchor or 'the start'} "
                   f"(measured: run {total * 1000:.0f} ms, migration {migrating * 1000:.1f} "
                   f"ms; child reached {reached!r}, exit {run.code}; seed {SEED})")
        if run.code not in (0, -signal.SIGKILL):
            raise AssertionError(f"{context}: child failed: {run.stderr}")
        found, again, status = bounded(
            partial(migrate_in_process, legacy, data), CHECK_TIMEOUT, context)
        if found.marker is None:
            assert_empty(found, context)
            assert status == "migrated", context
            state = "no marker"
        else:
            assert found.content == ref, f"{context}: marker, but content differs from reference"
            assert found.other_tables == 0, context
            assert status == "already_migrated", context
            state = "marker"
        assert again.marker is not None, f"{context}: no marker after migrating again"
        assert again.content == ref, f"{context}: re-migrated content differs from reference"
        assert again.other_tables == 0, context
        assert again.msg_counter == reference.msg_counter, context
        if reached == "opened":
            inside += 1
        if run.code == -signal.SIGKILL:
            killed += 1
        outcomes[f"{reached}/{state}"] += 1
        log.append(context + f": {state}")
        shutil.rmtree(data)

    kills = sum(outcomes.values())
    summary = (f"{name}: {kills} kill moments, {killed} children killed, outcomes "
               f"{dict(outcomes)}\n" + "\n".join(log))
    print(summary)
    assert killed >= MIN_KILLS, summary
    assert inside >= 1, f"no kill landed inside migrate_legacy: {summary}"
    # a child that printed "migrated" had committed: its dir must have held the marker
    assert not any(k.startswith(("migrated/no", "closed/no")) for k in outcomes), summary
    assert sha(legacy) == before, "the legacy file was changed"
