"""Migration progress: what ``migrate_legacy`` reports, the log lines, the terminal bar."""

from __future__ import annotations

import io
import os
import pty
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from structlog.testing import capture_logs

from gensokyo_idmap.cli import main
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore
from migrate.legacy import migrate_legacy
from migrate.progress import BarProgress, LogProgress, progress_reporter

from ..conftest import FakeClock
from ..test_app import make_config, run_until_ready_then_stop

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "legacy"
APP = "102076543"
SCRIPT = Path(sys.executable).parent / "gensokyo-idmap"
#: small-counter.db: 1150 ids entries; a non-UTF-8 key after its row- keys makes the forward
#: and the reverse work take a pass each, its pro keys one more, the verification one: 4.
IDS = 1150
TOTAL = 4 * IDS


def legacy_in(folder: Path, name: str = "small-counter.db") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copyfile(FIXTURES / name, folder / "idmap.db"))


def progress_lines(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["event"] == "[migrate] progress"]


# --- what migrate_legacy reports ------------------------------------------------------------


def migrate_recording(legacy: Path, identity_store: LmdbIdentityStore,
                      msgid_store: LmdbMsgIdStore | None) -> list[tuple[str, int, int]]:
    calls: list[tuple[str, int, int]] = []
    migrate_legacy(legacy, identity_store, msgid_store, APP,
                   progress=lambda stage, done, total: calls.append((stage, done, total)))
    done = [d for _, d, _ in calls]
    assert done == sorted(done) and done[0] == 0
    assert all(d <= total for _, d, total in calls)
    return calls


def test_migration_reports_entries_done_over_the_total_of_all_passes(
    tmp_path: Path, identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore
) -> None:
    calls = migrate_recording(legacy_in(tmp_path / "old"), identity_store, msgid_store)
    stages = list(dict.fromkeys(stage for stage, _, _ in calls))
    assert stages == ["ids forward", "ids reverse keys", "ids pro keys", "verifying", "verified"]
    assert ("ids reverse keys", IDS, 3 * IDS) in calls  # the second pass starts
    # the pro keys are found in the first pass: the total grows once, by one pass
    assert sorted({total for _, _, total in calls}) == [3 * IDS, TOTAL]
    assert calls[-1] == ("verified", TOTAL, TOTAL)


def test_migration_in_one_fused_pass_counts_fewer_passes(
    tmp_path: Path, identity_store: LmdbIdentityStore
) -> None:
    from .test_legacy import _rebuilt_fixture

    # small-counter's content in the usual key order: one pass converts, pro keys, verify
    calls = migrate_recording(_rebuilt_fixture(tmp_path, "fused.db", {}), identity_store, None)
    entries = calls[-1][2] // 3
    reverse = next(done for stage, done, _ in calls if stage == "ids reverse keys")
    assert 0 < reverse < entries  # the row- keys start half-way through the one pass
    assert sorted({total for _, _, total in calls}) == [2 * entries, 3 * entries]
    assert calls[-1] == ("verified", 3 * entries, 3 * entries)


def test_an_empty_legacy_file_ends_complete(
    tmp_path: Path, identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore
) -> None:
    calls: list[tuple[str, int, int]] = []
    migrate_legacy(legacy_in(tmp_path / "old", "empty.db"), identity_store, msgid_store, APP,
                   progress=lambda stage, done, total: calls.append((stage, done, total)))
    assert calls[-1] == ("verified", 0, 0)


# --- log lines ------------------------------------------------------------------------------


def test_log_lines_at_each_stage_then_every_interval_with_the_rate() -> None:
    clock = FakeClock(100.0)
    report = LogProgress(every=5.0, clock=clock)
    with capture_logs() as logs:
        report("ids forward", 0, 1000)  # a new stage: a line
        clock.advance(1.0)
        report("ids forward", 100, 1000)  # 1 s later: none
        clock.advance(4.0)
        report("ids forward", 500, 1000)  # 5 s after the last line: a line
        clock.advance(1.0)
        report("verifying", 600, 1000)  # a new stage: a line at once
        clock.advance(4.0)
        report("verifying", 1000, 1000)  # 4 s after the last line: none
    lines = progress_lines(logs)
    assert [(e["stage"], e["done"], e["total"]) for e in lines] == [
        ("ids forward", 0, 1000), ("ids forward", 500, 1000), ("verifying", 600, 1000)]
    assert [e["per_second"] for e in lines] == [0, 100, 100]  # done / seconds since the start
    assert [e["percent"] for e in lines] == [0.0, 50.0, 60.0]
    assert all(e["log_level"] == "info" for e in lines)


def test_daemon_start_up_migration_logs_progress_lines(tmp_path: Path) -> None:
    config = make_config(tmp_path / "data")
    legacy_in(tmp_path / "data")
    logs = run_until_ready_then_stop(config)
    lines = progress_lines(logs)
    assert lines, [e["event"] for e in logs]
    assert {e["total"] for e in lines} <= {3 * IDS, TOTAL}
    assert lines[-1]["stage"] == "verified" and lines[-1]["done"] == lines[-1]["total"] == TOTAL
    assert lines[-1]["percent"] == 100.0 and lines[-1]["per_second"] > 0
    events = [e["event"] for e in logs]
    assert events.index("[migrate] done") > events.index("[migrate] progress")


def test_cli_migrate_without_a_terminal_writes_progress_lines(tmp_path: Path) -> None:
    legacy_in(tmp_path)
    runner = CliRunner(env={"GSK_IDMAP__DATA_DIR": None, "GSK_BOT__APP_ID": None})
    result = runner.invoke(main, ["--data-dir", str(tmp_path), "--app-id", APP, "--json",
                                  "migrate"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "[migrate] progress" in line]
    assert lines, result.stderr
    assert f"done={TOTAL}" in lines[-1] and f"total={TOTAL}" in lines[-1]
    assert re.search(r"per_second=[1-9]", lines[-1]), lines[-1]
    assert result.stdout.startswith("{")  # the report, as JSON, on stdout alone


# --- the bar --------------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_reporter_is_a_bar_on_a_terminal_and_log_lines_elsewhere() -> None:
    with progress_reporter(io.StringIO()) as lines:
        assert isinstance(lines, LogProgress)
    terminal = _Terminal()
    with progress_reporter(terminal) as bar:
        assert isinstance(bar, BarProgress)
        bar("ids forward", 0, 200)
        bar("ids forward", 50, 200)
        bar("verifying", 200, 200)
    shown = terminal.getvalue()
    assert "[migrate] ids forward" in shown and "50/200" in shown and "25%" in shown
    assert "[migrate] verifying" in shown and "200/200" in shown and "100%" in shown
    assert "entries/s" in shown


@pytest.mark.skipif(not SCRIPT.exists(), reason="the console script is not installed")
def test_cli_migrate_on_a_terminal_draws_a_bar(tmp_path: Path) -> None:
    """The real command with stderr on a pseudo-terminal: a bar, not log lines."""
    legacy_in(tmp_path)
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GSK_")}
    try:
        child = subprocess.Popen(
            [str(SCRIPT), "--data-dir", str(tmp_path), "--app-id", APP, "migrate"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower, env=env)
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            shown += chunk
        stdout, _ = child.communicate(timeout=60)
    finally:
        os.close(leader)
    text = shown.decode("utf-8", "replace")
    assert child.returncode == 0, text
    assert f"{TOTAL}/{TOTAL}" in text and "100%" in text and "entries/s" in text, text
    assert "[migrate] progress" not in text  # no log lines on a terminal
    assert b"status        migrated" in stdout
