"""Several processes, one graph: four daemons' worth of processes resolve overlapping sets of
new identities at once on one PostgreSQL schema while two of them are killed with kill -9.

``tests/crash/durability_child.py`` plays the daemon (``--postgres-dsn``): it prints ``key vuin``
only after ``await graph.resolve(...)`` returned, so a printed line is a promise. After the
kills, and again after the killed ones were restarted and ran to the end:

- every printed (key, vUIN) is stored with exactly that vUIN (nothing lost, nothing moved);
- every key has one vUIN, the same in every process that printed it;
- no vUIN names two people (each resolve names one new OpenID), and the tables are exact
  inverses, the counter above every vUIN in use.

The four also race to create the schema (migrations under an advisory lock). Every wait is
bounded; nothing asserts how long anything took.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gensokyo_idmap.store.postgres.identity import PgIdentityStore

from ..store_backends import PG_DSN, fresh_schema
from .test_durability import (
    BATCH,
    RUN_TIMEOUT,
    STARTUP_TIMEOUT,
    Child,
    StoreState,
    add_printed,
    check_invariants,
    check_printed,
    child_args,
)

PROCESSES = 4
ROUNDS = 30  # rounds of BATCH new keys per process
OFFSET = 10  # process n starts at round n * OFFSET: each shares half its keys with the next
KILLED = {1: 1, 3: 3 * BATCH}  # process → lines it prints before it is killed


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema() as name:
        yield name


def read_graph(schema: str) -> StoreState:
    """Open the graph in this process (as another daemon would) and read all of it."""
    with PgIdentityStore(PG_DSN, schema=schema, pool_size=1) as store, store.read() as view:
        return StoreState(dict(view.iter_identities()), set(view.iter_vuin_sets()),
                          view.vuin_counter())


def take(child: Child, code: int, expected: int, what: str, printed: dict[str, int],
         shown: dict[int, str]) -> None:
    """Check how ``child`` ended and add what it printed (a key printed twice must carry
    one vUIN, a vUIN be shown for one key)."""
    assert code == expected, f"{what} exited with {code}, not {expected}: {child.stderr()}"
    if expected == 0:
        assert len(child.lines) == ROUNDS * BATCH, f"{what} printed {len(child.lines)} lines"
    add_printed(printed, shown, child.pairs(), what)


def check_graph(schema: str, printed: dict[str, int], context: str) -> StoreState:
    state = read_graph(schema)
    check_invariants(state, context)
    check_printed(state, printed, context)
    return state


def start(tmp_path: Path, schema: str, n: int, tag: str, extra: list[str]) -> Child:
    args = child_args(tmp_path / "unused.db", n * OFFSET, ROUNDS, prefix="shared", extra=[
        *extra, "--postgres-dsn", PG_DSN, "--schema", schema])
    return Child.start(args, tmp_path / f"{tag}-{n}.stderr")


def kill_once_printed(children: list[Child], counts: dict[int, int]) -> None:
    """Kill each of ``children`` named in ``counts`` once it printed that many lines,
    watching all of them at once: waiting for one first let another run to its end before
    its kill came (process 3 exited 0 on a fast run while process 1 was still starting)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    waiting = dict(counts)
    while waiting:
        for n, count in list(waiting.items()):
            child = children[n]
            if len(child.lines) >= count:
                child.kill()  # mid-run: its next batch is in flight
                del waiting[n]
                continue
            assert child.proc.poll() is None, (
                f"process {n} exited before printing {count} lines: {child.stderr()}")
        assert time.monotonic() < deadline, f"fewer lines than {waiting} in time"
        time.sleep(0.002)


def test_four_processes_one_graph_while_two_are_killed(tmp_path: Path, schema: str) -> None:
    go = tmp_path / "go"
    ready = [tmp_path / f"{n}.ready" for n in range(PROCESSES)]
    children: list[Child] = []
    try:
        for n in range(PROCESSES):
            children.append(start(tmp_path, schema, n, "first",
                                  ["--ready-file", str(ready[n]), "--go-file", str(go)]))
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not all(r.exists() for r in ready):
            dead = [c for c in children if c.proc.poll() is not None]
            assert not dead, f"a child exited before it was ready: {dead[0].stderr()}"
            assert time.monotonic() < deadline, "children not ready in time"
            time.sleep(0.005)
        go.touch()
        kill_once_printed(children, KILLED)
        codes = [c.reap(RUN_TIMEOUT) for c in children]
    finally:
        for c in children:
            c.cleanup()
    printed: dict[str, int] = {}
    shown: dict[int, str] = {}
    for n, (child, code) in enumerate(zip(children, codes, strict=True)):
        take(child, code, -9 if n in KILLED else 0, f"process {n}", printed, shown)
    check_graph(schema, printed, "after the kills")

    # the killed ones restart (a daemon coming back) and finish their keys
    again: list[Child] = []
    try:
        for n in KILLED:
            again.append(start(tmp_path, schema, n, "restarted", []))
        codes = [c.reap(RUN_TIMEOUT) for c in again]
    finally:
        for c in again:
            c.cleanup()
    for n, child, code in zip(KILLED, again, codes, strict=True):
        take(child, code, 0, f"restarted process {n}", printed, shown)
    state = check_graph(schema, printed, "after the restarts")
    every_key = (PROCESSES - 1) * OFFSET + ROUNDS  # rounds spanned by all four ranges
    assert len(state.forward) == every_key * BATCH == len(printed)
    assert len(shown) == len(printed)  # one vUIN per key, one key per vUIN
