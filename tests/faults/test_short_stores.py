"""Every command that opens a store, and ``serve``, on stores LMDB left shorter than their
last page (issue 29: after a kill -9 the daemon refused its own outbox.db as "cut short").

A commit that takes pages from the end of the file and frees them again never writes them,
yet its meta page counts them (:mod:`tests.lmdb_pages`): the file ends before
``(last page + 1) * page size`` and is whole. The data dir of the damage tests (three
stores that have served) gets such a commit on each of its three stores; each command then
runs in a process of its own (``command_runner.py``) on a copy of it, and does its ordinary
work: no refusal, no store moved aside as corrupt, the read-only ones change no store file.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..lmdb_pages import leave_unwritten_tail
from ..store_backends import PG_DSN, fresh_schema, postgres_unreachable
from .test_damaged_stores import (
    APP,
    KNOWN_KEY,
    STORES,
    Outcome,
    Snapshot,
    _fill,
    command_job,
    run_commands,
)

LEGACY = Path(__file__).parents[1] / "fixtures" / "legacy" / "empty.db"


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    returncode: int = 0
    said: str = ""  # in stdout or stderr
    read_only: bool = False


CASES: dict[str, Case] = {
    "stats": Case(("stats",), read_only=True),
    "verify": Case(("verify",), said="ok: ", read_only=True),
    "backup": Case(("backup", "{tmp}/backup.db"), said="backup ", read_only=True),
    "identity-lookup": Case(("--app-id", APP, "identity", "lookup", KNOWN_KEY),
                            read_only=True),
    "identity-show": Case(("identity", "show", "3"), said="vUIN 3", read_only=True),
    "identity-resolve": Case(("--app-id", APP, "identity", "resolve", "F" * 32),
                             said="401 (new)"),
    "identity-bind": Case(("--app-id", APP, "identity", "bind", "E" * 32, "3"), said="→ 3"),
    "msgid-store": Case(("--app-id", APP, "msgid", "store", "real-new")),
    "msgid-lookup": Case(("msgid", "lookup", "1"), said="msg-", read_only=True),
    "msgid-sweep": Case(("msgid", "sweep"), said="swept"),
    "msgid-stats": Case(("msgid", "stats"), read_only=True),
    "recover-msgid": Case(("--json", "recover", "msgid"), said='"counter": 50'),
    "recover-outbox": Case(("recover", "outbox"), returncode=1,
                           said="is whole (20 events owed): nothing to recover",
                           read_only=True),
    "migrate": Case(("--app-id", APP, "migrate", "--legacy", str(LEGACY), "--dry-run"),
                    returncode=1, said="openid-map.db already holds 400 identities",
                    read_only=True),
    "store-copy": Case(("store", "copy", "--to", "postgres", "--from",
                        "{tmp}/data/openid-map.db", "--postgres-dsn", PG_DSN,
                        "--schema", "{schema}"), said="400", read_only=True),
    "serve": Case(("serve", "--config", "{tmp}/config.yml"), said="[app] ready"),
}


@pytest.fixture(scope="module")
def short_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("short") / "data"
    data_dir.mkdir()
    _fill(data_dir)
    for name in STORES:
        (data_dir / f"{name}-lock").unlink()
        assert leave_unwritten_tail(data_dir / name) > 0, name  # the case this test names
    return data_dir


@pytest.fixture(scope="module")
def schema() -> Iterator[str | None]:
    if postgres_unreachable() is not None:
        yield None
        return
    with fresh_schema() as name:
        yield name


@pytest.fixture(scope="module")
def outcomes(short_dir: Path, schema: str | None, tmp_path_factory: pytest.TempPathFactory
             ) -> dict[str, Outcome]:
    """Every command on a copy of the data dir."""
    root = tmp_path_factory.mktemp("runs")
    jobs, dirs = [], {}
    for name, case in CASES.items():
        if name == "store-copy" and schema is None:
            continue
        dirs[name] = data_dir = root / name / "data"
        shutil.copytree(short_dir, data_dir)
        jobs.append(command_job(name, data_dir.parent, data_dir, case.args,
                                schema=schema or ""))
    return run_commands(jobs, dirs)


def _stores(files: Snapshot) -> Snapshot:
    return {name: files[name] for name in STORES if name in files}


@pytest.mark.parametrize("command", list(CASES))
def test_every_command_opens_a_store_shorter_than_its_last_page(
        outcomes: dict[str, Outcome], command: str) -> None:
    if command not in outcomes:
        pytest.skip(f"PostgreSQL at {PG_DSN} does not answer: {postgres_unreachable()}")
    case, outcome = CASES[command], outcomes[command]
    shown = (outcome.returncode, outcome.stdout[-2000:], outcome.stderr[-3000:])
    assert outcome.returncode == case.returncode, shown
    assert case.said in outcome.stdout + outcome.stderr, shown
    for refusal in ("cut short", "damaged", "unreadable", "Traceback"):
        assert refusal not in outcome.stderr, shown
    aside = [name for name in outcome.after if ".corrupt-" in name or ".before-" in name]
    assert aside == [], shown
    if command == "recover-msgid":
        assert any(".reset-" in name for name in outcome.after)  # what it does by design
    else:
        assert set(_stores(outcome.after)) == set(STORES)
    if case.read_only:
        assert _stores(outcome.after) == _stores(outcome.before)
