"""logrender.PlainConsoleRenderer: the text of structlog's ``ConsoleRenderer(colors=False)``.

The console format is what operators read and grep; the renderer of our own exists for
speed only, so the property is that it writes exactly what structlog's would, for any
fields and values (text needing a repr or not, numbers, None, paths, missing columns).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import structlog
from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap.logrender import PlainConsoleRenderer

# tracebacks in structlog's plain format, as in a daemon's process (rich is kept out of it)
STOCK = structlog.dev.ConsoleRenderer(colors=False,
                                      exception_formatter=structlog.dev.plain_traceback)
OURS = PlainConsoleRenderer()

texts = st.text(alphabet=st.sampled_from(list("ab=Z9:/ \t\r\n\"'群_.-")), max_size=40)
values = st.one_of(texts, st.integers(), st.none(), st.booleans(), st.floats(allow_nan=False),
                   st.lists(st.one_of(texts, st.integers()), max_size=3),
                   st.builds(Path, texts))
names = st.text(alphabet=st.sampled_from(list("abkvuin_")), min_size=1, max_size=8)
columns = st.fixed_dictionaries({}, optional={
    "timestamp": st.one_of(st.just("2026-11-30T17:57:09.098353Z"), st.just("")),
    "level": st.sampled_from(["debug", "info", "warning", "error", "critical", "exception"]),
    "event": st.one_of(texts, st.just("[idmap] identity create"), st.just("x" * 45)),
    "logger": texts, "logger_name": texts,
})


def both(event: dict[str, Any]) -> tuple[str, str]:
    return OURS(None, "info", dict(event)), STOCK(None, "info", dict(event))


@given(columns, st.dictionaries(names, values, max_size=6))
def test_writes_what_structlogs_plain_console_renderer_writes(
        fixed: dict[str, Any], fields: dict[str, Any]) -> None:
    ours, stock = both({**fields, **fixed})
    assert ours == stock


def test_the_identity_create_line() -> None:
    line, _ = both({"key": "openid:QQ:1:ABC", "vuin": 7, "event": "[idmap] identity create",
                    "level": "info", "timestamp": "2026-11-30T17:57:09.098353Z"})
    assert line == ("2026-11-30T17:57:09.098353Z [info     ] [idmap] identity create"
                    "        key=openid:QQ:1:ABC vuin=7")


def test_a_traceback_is_written_as_structlog_writes_it() -> None:
    try:
        raise ValueError("boom")
    except ValueError as err:
        error = err
    event = {"event": "[x] failed", "level": "error", "exc_info": error, "n": 1}
    ours, stock = both(event)
    assert ours == stock
    assert "ValueError: boom" in ours
    assert both({"event": "[x] where", "stack": "a stack"})[0].endswith("\na stack")
