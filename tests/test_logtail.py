from __future__ import annotations

import io

import structlog

from gensokyo_idmap.logging import configure_logging
from gensokyo_idmap.logtail import TAIL, LogTail, level_rank


def test_since_filters_by_level_and_sequence() -> None:
    tail = LogTail(size=3)
    for level in ("debug", "info", "warning", "error"):
        tail.record(level, f"[x] {level}", f"line {level}")
    assert [line.level for line in tail.since(0)] == ["info", "warning", "error"]  # size 3
    assert [line.level for line in tail.since(0, "warning")] == ["warning", "error"]
    assert tail.since(tail.last_seq) == []
    assert level_rank("warn") == level_rank("warning") and level_rank("odd") == 1


def test_problems_and_binds_are_kept_apart_from_the_tail() -> None:
    now = [100.0]
    tail = LogTail(size=2, clock=lambda: now[0])
    tail.record("warning", "[x] old", "old")
    now[0] = 200.0
    tail.record("info", "[idmap] bind moved", "bind line")
    for _ in range(5):
        tail.record("info", "[x] noise", "noise")
    assert [line.text for line in tail.problems_since(150)] == []
    assert [line.text for line in tail.problems_since(0)] == ["old"]
    assert [line.text for line in tail.binds()] == ["bind line"]


def test_the_tail_holds_the_log_files_text_with_secrets_hidden() -> None:
    out = io.StringIO()
    configure_logging("info", "json", stream=out)
    structlog.get_logger("t").info("[test] tail", secret="s3cret", url="ws://u:pw@h/?access_token=t0k")
    written = out.getvalue().strip()
    assert TAIL.since(TAIL.last_seq - 1)[-1].text == written
    assert "s3cret" not in written and "pw" not in written and "t0k" not in written
