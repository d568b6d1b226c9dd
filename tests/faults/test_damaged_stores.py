"""Every command that opens a store, and ``serve``, on each store file after each damage.

The data dir has held all three stores (stores.json records the two precious ones). Each
case copies it, damages one file, and runs one command in a process of its own (the
commands run in forked children of one runner process, ``command_runner.py``, so a case
costs a fork, not an interpreter start). The rules (issue 15):

* no death by a signal (a return code > 0, never negative), no traceback;
* openid-map.db and outbox.db: a clear error naming the file and how to recover, exit 1,
  and no file changed (hash, size and mtime of every file; lock files of the other stores,
  which any open touches, aside) and none added;
* msgid-map.db: ``serve`` heals it as documented: the damaged file is moved aside byte for
  byte (``msgid-map.db.corrupt-<time>``, logged loudly) and the daemon starts with an empty
  one (a missing one is simply created). The read-only commands report the damage (exit 1,
  the file named) and change nothing; a missing one is "none yet" for ``stats`` and an
  error for the ``msgid`` commands.

The same damage is also run through the installed ``gensokyo-idmap`` executable for the
cases the issue names (a truncated store under ``serve``, ``verify`` and ``stats``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lmdb
import pytest

from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.runtime.msgid import MsgContext, MsgIdMap
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore
from gensokyo_idmap.store.lmdb.outbox import LmdbOutboxStore
from gensokyo_idmap.store.serve_lock import LOCK_NAME

from ..lmdb_pages import walk_pages

APP = "102000001"
RUNNER = Path(__file__).with_name("command_runner.py")
SCRIPT = Path(sys.executable).parent / "gensokyo-idmap"
PAGE = 4096
KNOWN_KEY = f"openid:QQ:{APP}:{7:032X}"
STORES = ("openid-map.db", "outbox.db", "msgid-map.db")
#: The table a store's own commands read (its root page is damaged in one case).
SIGNATURE_TABLE = {"openid-map.db": b"identity_to_vuin", "outbox.db": b"outbox",
                   "msgid-map.db": b"msg_to_virtual"}


# --- the used data dir --------------------------------------------------------------------


def _fill(data_dir: Path) -> None:
    """Three stores that have served: a few hundred identities (several pages, a branch
    level), message ids, events owed to a framework."""
    identity = LmdbIdentityStore(data_dir / "openid-map.db")
    msgid = LmdbMsgIdStore(data_dir / "msgid-map.db")
    outbox = LmdbOutboxStore(data_dir / "outbox.db")
    try:
        graph = IdentityGraph(identity)
        msgids = MsgIdMap(msgid)

        async def serve_a_while() -> None:
            for start in range(0, 400, 100):
                await asyncio.gather(*(graph.resolve([OpenId(APP, f"{n:032X}")],
                                                     scene=f"group:{n % 5}")
                                       for n in range(start, start + 100)))
            for n in range(50):
                await msgids.store_real(f"msg-{n}", MsgContext(APP, "group", "G", "in"))

        asyncio.run(serve_a_while())
        outbox.write_sync(lambda view: [view.add("ws://framework/", b'{"post_type":"x"}')
                                        for _ in range(20)])
    finally:
        outbox.close()
        msgid.close()
        identity.close()


@pytest.fixture(scope="module")
def used_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("used") / "data"
    data_dir.mkdir()
    _fill(data_dir)
    return data_dir


def test_the_used_data_dir_recorded_its_precious_stores(used_dir: Path) -> None:
    recorded = json.loads((used_dir / "stores.json").read_text())["stores"]
    assert set(recorded) == {"openid-map.db", "outbox.db"}


# --- damages ------------------------------------------------------------------------------


def _root_of(path: Path, table: bytes | None) -> int:
    """The root page of ``table`` (None: of the main database), read from the whole file."""
    env = lmdb.open(str(path), subdir=False, readonly=True, lock=False, max_dbs=16)
    try:
        with env.begin() as txn:
            if table is None:
                meta = max((path.read_bytes()[n * PAGE:n * PAGE + 152] for n in (0, 1)),
                           key=lambda raw: struct.unpack_from("<Q", raw, 144)[0])
                return int(struct.unpack_from("<Q", meta, 88 + 40)[0])
            record = txn.get(table)
            assert record is not None and len(record) == 48
            return int(struct.unpack_from("<Q", record, 40)[0])
    finally:
        env.close()


def _scribble(path: Path, pages: Callable[[int], list[int]], seed: int) -> None:
    """Random bytes over whole pages."""
    rng = random.Random(seed)
    count = path.stat().st_size // PAGE
    with open(path, "r+b") as handle:
        for page in pages(count):
            handle.seek(page * PAGE)
            handle.write(rng.randbytes(PAGE))


def _truncate(size: Callable[[int], int]) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        os.truncate(path, size(path.stat().st_size))
    return damage


#: A file may end before its last page (pages a commit freed again are never written), so
#: "truncated" cuts at or below the last page a tree reaches, which LMDB would read.
DAMAGES: dict[str, Callable[[Path], None]] = {
    "missing": lambda path: path.unlink(),
    "empty": _truncate(lambda size: 0),
    "truncated-100": _truncate(lambda size: 100),
    "truncated-5000": _truncate(lambda size: 5000),
    "truncated-to-metas": _truncate(lambda size: 2 * PAGE),
    "truncated-last-page-in-use": lambda path: os.truncate(path,
                                                           max(walk_pages(path)[0]) * PAGE),
    "meta0-random": lambda path: _scribble(path, lambda n: [0], 1),
    "meta1-random": lambda path: _scribble(path, lambda n: [1], 2),
    "main-root-random": lambda path: _scribble(path, lambda n: [_root_of(path, None)], 3),
    "table-root-random": lambda path: _scribble(
        path, lambda n: [_root_of(path, SIGNATURE_TABLE[path.name])], 4),
    "data-pages-random": lambda path: _scribble(path, lambda n: list(range(2, n)), 5),
}


# --- commands -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    args: tuple[str, ...]
    opens: frozenset[str]


COMMANDS: dict[str, Command] = {
    "stats": Command(("stats",), frozenset(STORES)),
    "verify": Command(("verify",), frozenset({"openid-map.db"})),
    "identity-lookup": Command(("--app-id", APP, "identity", "lookup", KNOWN_KEY),
                               frozenset({"openid-map.db"})),
    "identity-show": Command(("identity", "show", "3"), frozenset({"openid-map.db"})),
    "backup": Command(("backup", "{tmp}/backup.db"), frozenset({"openid-map.db"})),
    "msgid-lookup": Command(("msgid", "lookup", "1"), frozenset({"msgid-map.db"})),
    "msgid-stats": Command(("msgid", "stats"), frozenset({"msgid-map.db"})),
    "serve": Command(("serve", "--config", "{tmp}/config.yml"), frozenset(STORES)),
}

CASES = [(store, damage, command) for store in STORES for damage in DAMAGES
         for command, spec in COMMANDS.items() if store in spec.opens]


def _case_id(store: str, damage: str, command: str) -> str:
    return f"{store}-{damage}-{command}"


Snapshot = dict[str, tuple[str, int, int]]


def snapshot(data_dir: Path) -> Snapshot:
    """Every file: (sha256, size, mtime ns)."""
    found: Snapshot = {}
    for path in sorted(data_dir.iterdir()):
        stat = path.stat()
        found[path.name] = (hashlib.sha256(path.read_bytes()).hexdigest(), stat.st_size,
                            stat.st_mtime_ns)
    return found


@dataclass
class Outcome:
    returncode: int
    stdout: str
    stderr: str
    before: Snapshot
    after: Snapshot
    tmp: Path


def command_job(job_id: str, tmp: Path, data_dir: Path, args: tuple[str, ...],
                **fill: str) -> dict[str, Any]:
    """The runner's job of one command on ``data_dir`` (``{tmp}`` and ``fill`` filled into
    its arguments); ``tmp`` gets the config ``serve`` reads."""
    (tmp / "config.yml").write_text(
        f'bot:\n  app_id: "{APP}"\nidmap:\n  data_dir: {data_dir}\napi:\n  listen: ""\n'
        "log:\n  level: info\n", encoding="utf-8")
    return {"id": job_id, "cwd": str(tmp),
            "args": ["--data-dir", str(data_dir), *(a.format(tmp=tmp, **fill) for a in args)],
            "stop_on": "[app] ready" if "serve" in args else None}


def run_commands(jobs: list[dict[str, Any]], dirs: dict[str, Path]) -> dict[str, Outcome]:
    """Every job, run by one runner process (a fork each); ``dirs``: each job's data dir."""
    before = {job_id: snapshot(data_dir) for job_id, data_dir in dirs.items()}
    env = {k: v for k, v in os.environ.items() if not k.startswith("GSK_")}
    done = subprocess.run([sys.executable, str(RUNNER)], input=json.dumps(jobs),
                          capture_output=True, text=True, timeout=600, env=env, check=False)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    return {job_id: Outcome(r["returncode"], r["stdout"], r["stderr"], before[job_id],
                            snapshot(dirs[job_id]), dirs[job_id].parent)
            for job_id, r in results.items()}


@pytest.fixture(scope="module")
def outcomes(used_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Every case on a copy of the used data dir with its damage."""
    root = tmp_path_factory.mktemp("cases")
    jobs, dirs = [], {}
    for store, damage, command in CASES:
        case = _case_id(store, damage, command)
        dirs[case] = data_dir = root / case / "data"
        shutil.copytree(used_dir, data_dir)
        DAMAGES[damage](data_dir / store)
        jobs.append(command_job(case, data_dir.parent, data_dir, COMMANDS[command].args))
    return run_commands(jobs, dirs)


def _unchanged_except_other_locks(outcome: Outcome, store: str) -> None:
    """Every file as it was, but the lock files any open touches: the other stores' LMDB
    lock files and serve.lock (serve's own lock, taken before any store is opened)."""
    others = {f"{name}-lock" for name in STORES if name != store} | {LOCK_NAME}
    before = {k: v for k, v in outcome.before.items() if k not in others}
    after = {k: v for k, v in outcome.after.items() if k not in others}
    assert after == before, f"files changed: {set(after.items()) ^ set(before.items())}"
    assert set(outcome.after) - {LOCK_NAME} <= set(outcome.before), "files were added"


@pytest.mark.parametrize(("store", "damage", "command"),
                         [c for c in CASES if c[0] != "msgid-map.db"],
                         ids=[_case_id(*c) for c in CASES if c[0] != "msgid-map.db"])
def test_a_damaged_precious_store_is_refused(outcomes: dict[str, Outcome], store: str,
                                             damage: str, command: str) -> None:
    outcome = outcomes[_case_id(store, damage, command)]
    assert outcome.returncode == 1, (outcome.returncode, outcome.stderr[-3000:])
    assert "Traceback" not in outcome.stderr
    error = outcome.stderr.strip().splitlines()[-1]
    assert error.startswith("error: "), outcome.stderr
    assert str(Path("data") / store) in error, error
    assert "To recover:" in error, error
    assert ("recover identities" if store == "openid-map.db" else "recover outbox") in error
    _unchanged_except_other_locks(outcome, store)
    assert not (outcome.tmp / "backup.db").exists()


MSGID_SERVE = [c for c in CASES if c[0] == "msgid-map.db" and c[2] == "serve"]
MSGID_READ = [c for c in CASES if c[0] == "msgid-map.db" and c[2] != "serve"]


@pytest.mark.parametrize(("store", "damage", "command"), MSGID_SERVE,
                         ids=[_case_id(*c) for c in MSGID_SERVE])
def test_serve_moves_a_damaged_msgid_store_aside(outcomes: dict[str, Outcome], store: str,
                                                 damage: str, command: str) -> None:
    outcome = outcomes[_case_id(store, damage, command)]
    assert outcome.returncode == 0, (outcome.returncode, outcome.stderr[-3000:])
    assert "Traceback" not in outcome.stderr
    for precious in ("openid-map.db", "outbox.db"):
        assert outcome.after[precious] == outcome.before[precious]
    aside = [name for name in outcome.after if name.startswith("msgid-map.db.corrupt-")]
    if damage == "missing":
        assert aside == []
    else:
        assert len(aside) == 1, sorted(outcome.after)
        assert outcome.after[aside[0]][0] == outcome.before["msgid-map.db"][0]
        assert "msgid-map.db unreadable, moved aside" in outcome.stderr
    assert "msgid-map.db" in outcome.after  # an empty one took its place


@pytest.mark.parametrize(("store", "damage", "command"), MSGID_READ,
                         ids=[_case_id(*c) for c in MSGID_READ])
def test_read_only_commands_report_a_damaged_msgid_store(outcomes: dict[str, Outcome],
                                                         store: str, damage: str,
                                                         command: str) -> None:
    outcome = outcomes[_case_id(store, damage, command)]
    assert "Traceback" not in outcome.stderr
    if damage == "missing" and command == "stats":
        assert outcome.returncode == 0, outcome.stderr  # "none yet": the daemon makes it
        assert "msgid-map.db   none yet" in outcome.stdout
    else:
        assert outcome.returncode == 1, (outcome.returncode, outcome.stderr[-3000:])
        error = outcome.stderr.strip().splitlines()[-1]
        assert error.startswith("error: ") and str(Path("data") / store) in error, error
    _unchanged_except_other_locks(outcome, store)


@pytest.fixture
def truncated_dir(used_dir: Path, tmp_path: Path, request: pytest.FixtureRequest
                  ) -> Iterator[tuple[Path, str]]:
    data_dir = tmp_path / "data"
    shutil.copytree(used_dir, data_dir)
    os.truncate(data_dir / request.param, 5000)
    (tmp_path / "config.yml").write_text(
        f'bot:\n  app_id: "{APP}"\nidmap:\n  data_dir: {data_dir}\napi:\n  listen: ""\n',
        encoding="utf-8")
    yield data_dir, request.param


@pytest.mark.slow
@pytest.mark.parametrize("truncated_dir", ["openid-map.db", "outbox.db"], indirect=True)
def test_the_executable_on_a_truncated_store(truncated_dir: tuple[Path, str]) -> None:
    """The issue's own report: ``serve``, ``verify`` and ``stats`` died of SIGBUS."""
    data_dir, store = truncated_dir
    before = snapshot(data_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GSK_")}
    commands = [["stats"], ["serve", "--config", str(data_dir.parent / "config.yml")]]
    if store == "openid-map.db":
        commands.append(["verify"])
    for args in commands:
        done = subprocess.run([str(SCRIPT), "--data-dir", str(data_dir), *args],
                              capture_output=True, text=True, timeout=60, env=env, check=False)
        assert done.returncode == 1, (args, done.returncode, done.stderr)
        assert f"{data_dir / store} is cut short" in done.stderr, done.stderr
    after = snapshot(data_dir)
    assert after[store] == before[store]
    assert set(after) - {LOCK_NAME} == set(before)
