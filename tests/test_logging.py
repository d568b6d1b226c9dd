"""logging.py: secret redaction, JSON / console rendering to a given stream, level checks."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from gensokyo_idmap.logging import configure_logging, redact_secrets

SECRET = "Zq9-DISTINCT-log-secret-7Hx2"


@pytest.fixture(autouse=True)
def _structlog_defaults() -> Iterator[None]:
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


def lines_of(stream: io.StringIO) -> list[str]:
    return [line for line in stream.getvalue().splitlines() if line]


# --------------------------------------------------------------------------- redact_secrets


@pytest.mark.parametrize(
    "name",
    ["secret", "bot_secret", "token", "access_token", "api_token", "authorization", "password"],
)
def test_redact_replaces_secret_named_fields(name: str) -> None:
    event = {"event": "x", name: SECRET, "vuin": 5}
    out = redact_secrets(None, "info", event)
    assert out == {"event": "x", name: "***", "vuin": 5}


def test_redact_leaves_other_fields_untouched() -> None:
    event = {"event": "[idmap] identity create", "key": "openid:QQ:1:ABC", "vuin": 7,
             "app_id": "102000001", "path": "/data/openid-map.db", "secrets_dir": None}
    assert redact_secrets(None, "info", dict(event)) == event


def test_redact_all_secret_fields_at_once() -> None:
    event = {"event": "e", "secret": "a", "token": "b", "password": "c", "user": "d"}
    assert redact_secrets(None, "warning", event) == {
        "event": "e", "secret": "***", "token": "***", "password": "***", "user": "d"
    }


def test_redact_keeps_empty_values() -> None:
    # an empty secret carries nothing; showing it as "" tells the operator it is unset
    event = {"event": "e", "secret": "", "token": None}
    assert redact_secrets(None, "info", event) == {"event": "e", "secret": "", "token": None}


@pytest.mark.parametrize("name", ["client_secret", "clientSecret", "refresh_token",
                                  "Authorization"])
def test_redact_fields_named_like_a_secret(name: str) -> None:
    # logging.py: "Replace the value of any field named like a secret". The QQ platform's
    # token request names the bot secret clientSecret; HTTP headers spell Authorization.
    out = redact_secrets(None, "info", {"event": "e", name: SECRET})
    assert out[name] != SECRET
    assert SECRET not in repr(out)


def test_redact_hides_url_credentials_in_any_text_field() -> None:
    # a reverse-WS URL written with user:password@ (or ?access_token=) reaches log lines as
    # url=, in the listeners list and in sink names; the field names say nothing
    event = {"event": "[app] ready", "url": f"ws://user:{SECRET}@h:8080/ws",
             "listeners": [f"reverse ws ws://u:{SECRET}@h/ws", "webhook http://0.0.0.0:1/q", 3],
             "sink": f"reverse_ws ws://h/ws?access_token={SECRET}", "vuin": 5}
    out = redact_secrets(None, "info", event)
    assert SECRET not in repr(out)
    assert out == {"event": "[app] ready", "url": "ws://***@h:8080/ws",
                   "listeners": ["reverse ws ws://***@h/ws", "webhook http://0.0.0.0:1/q", 3],
                   "sink": "reverse_ws ws://h/ws?access_token=***", "vuin": 5}


def test_redact_reaches_text_subclasses_and_tuples_and_leaves_plain_text_alone() -> None:
    # the processor skips text without "://" without calling redact_url: a str subclass and
    # the text items of a tuple are still looked at; text that is no URL is never rewritten
    class Text(str):
        pass

    event = {"event": "e", "url": Text(f"wss://u:{SECRET}@h/ws"),
             "peers": (f"http://h/p?token={SECRET}", 5), "note": f"token={SECRET} as words"}
    out = redact_secrets(None, "info", event)
    assert out["url"] == "wss://***@h/ws"
    assert out["peers"] == ["http://h/p?token=***", 5]
    assert out["note"] == f"token={SECRET} as words"  # no URL, no secret-named field


# --------------------------------------------------------------------------- configure_logging


def test_json_lines_carry_event_and_level() -> None:
    stream = io.StringIO()
    configure_logging("info", "json", stream=stream)
    log = structlog.get_logger("test")
    log.info("[idmap] identity create", key="openid:QQ:1:ABC", vuin=3)
    log.warning("[idmap] bind failed", vuin=4, reason="why")
    lines = lines_of(stream)
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert (first["component"], first["event"]) == ("idmap", "identity create")
    assert first["level"] == "info"
    assert first["key"] == "openid:QQ:1:ABC"
    assert first["vuin"] == 3
    assert (second["component"], second["event"]) == ("idmap", "bind failed")
    assert second["level"] == "warning"
    assert second["reason"] == "why"


def test_json_lines_hold_any_value_non_ascii_as_is_and_secrets_hidden() -> None:
    stream = io.StringIO()
    configure_logging("info", "json", stream=stream)
    log = structlog.get_logger("test")
    log.info("[x] values", path=Path("/tmp/a"), error=ValueError("bad"), big=2**70,
             text="群消息", access_token="s3cret")
    [line] = lines_of(stream)
    assert "群消息" in line and "s3cret" not in line  # written as is, not \u-escaped
    values = json.loads(line)
    assert values["path"] == repr(Path("/tmp/a"))  # what JSON cannot hold: its repr
    assert values["error"] == repr(ValueError("bad"))
    assert values["big"] == 2**70  # beyond orjson's 64 bits: written exactly all the same
    assert values["access_token"] == "***"


def named(line: str) -> str:
    """The event name of a JSON line as the code logs it (``[component] event``)."""
    entry = json.loads(line)
    return f"[{entry['component']}] {entry['event']}" if "component" in entry else entry["event"]


@pytest.mark.parametrize(("event", "fields", "component", "written"), [
    ("[api] healthz failed", {}, "api", "healthz failed"),
    ("[qq] gateway op ignored", {"op": 7}, "qq", "gateway op ignored"),
    ("[redis] unreachable, running degraded", {}, "redis", "unreachable, running degraded"),
    ("first", {}, None, "first"),  # no component: the event as it is
    ("[] odd", {}, None, "[] odd"),
    ("[idmap]", {}, None, "[idmap]"),
    ("[idmap]identity", {}, None, "[idmap]identity"),
    ("[x] mine", {"component": "other"}, "other", "[x] mine"),  # the caller's own field wins
])
def test_json_lines_put_the_component_in_its_own_field(
        event: str, fields: dict[str, Any], component: str | None, written: str) -> None:
    stream = io.StringIO()
    configure_logging("info", "json", stream=stream)
    structlog.get_logger("test").info(event, **fields)
    [line] = lines_of(stream)
    entry = json.loads(line)
    assert entry.get("component") == component
    assert entry["event"] == written


def test_console_lines_and_the_tail_keep_the_event_name_whole() -> None:
    """Operators grep for ``[idmap] identity create`` (DESIGN §7): only JSON splits it."""
    from gensokyo_idmap.logtail import TAIL

    for fmt in ("console", "json"):
        stream = io.StringIO()
        configure_logging("info", fmt, stream=stream)  # type: ignore[arg-type]
        structlog.get_logger("test").info("[idmap] identity create", vuin=3)
        [line] = lines_of(stream)
        assert TAIL.since(TAIL.last_seq - 1)[-1].event == "[idmap] identity create"
        if fmt == "console":
            assert " [info     ] [idmap] identity create " in line
            assert "component" not in line


def test_level_filters_lower_events() -> None:
    stream = io.StringIO()
    configure_logging("info", "json", stream=stream)
    log = structlog.get_logger("test")
    log.debug("[idmap] identity hit", vuin=1)
    log.info("[app] ready")
    events = [named(line) for line in lines_of(stream)]
    assert events == ["[app] ready"]


def test_warning_level_drops_info() -> None:
    stream = io.StringIO()
    configure_logging("warning", "json", stream=stream)
    log = structlog.get_logger("test")
    log.info("[app] ready")
    log.error("[app] broken")
    events = [named(line) for line in lines_of(stream)]
    assert events == ["[app] broken"]


def test_debug_level_keeps_debug() -> None:
    stream = io.StringIO()
    configure_logging("DEBUG", "json", stream=stream)
    structlog.get_logger("test").debug("[idmap] identity hit", vuin=9)
    (line,) = lines_of(stream)
    assert json.loads(line) == {**json.loads(line), "component": "idmap",
                                "event": "identity hit", "vuin": 9, "level": "debug"}


def test_json_output_redacts_secrets() -> None:
    stream = io.StringIO()
    configure_logging("info", "json", stream=stream)
    structlog.get_logger("test").info("[qq] token", secret=SECRET, access_token=SECRET, app="1")
    (line,) = lines_of(stream)
    assert SECRET not in line
    data = json.loads(line)
    assert data["secret"] == "***"
    assert data["access_token"] == "***"
    assert data["app"] == "1"


def test_console_format_names_the_event() -> None:
    stream = io.StringIO()
    configure_logging("info", "console", stream=stream)
    structlog.get_logger("test").info("[app] ready", token=SECRET, vuin=12)
    (line,) = lines_of(stream)
    assert "[app] ready" in line
    assert "vuin=12" in line
    assert "token=***" in line
    assert SECRET not in line
    assert "\x1b[" not in line  # no colour codes


def test_default_format_is_console() -> None:
    stream = io.StringIO()
    configure_logging("info", stream=stream)
    structlog.get_logger("test").info("[app] ready")
    (line,) = lines_of(stream)
    assert "[app] ready" in line
    with pytest.raises(json.JSONDecodeError):
        json.loads(line)


@pytest.mark.parametrize("level", ["verbose", "", "10", "trace"])
def test_unknown_level_raises_and_configures_nothing(level: str) -> None:
    with pytest.raises(ValueError, match="log.level"):
        configure_logging(level, "json")
    assert structlog.is_configured() is False


CHILD = """
import sys, time, structlog
from gensokyo_idmap.logging import configure_logging
configure_logging("info", "json")
log = structlog.get_logger("t")
log.info("first", n=1)
print("logged", flush=True)
time.sleep(float(sys.argv[1]))
log.warning("second", token="hunter2")
time.sleep(float(sys.argv[1]))
"""


def _read_line(stream: Any, deadline: float) -> str:
    import select
    import time

    while time.monotonic() < deadline:
        ready, _, _ = select.select([stream], [], [], 0.05)
        if ready:
            return str(stream.readline())
    raise AssertionError("no line in time")


def test_stderr_lines_are_buffered_but_arrive_within_the_flush_interval() -> None:
    """The daemon's stderr is written through a buffer (one write per line was its biggest
    cost): info lines still show up within a fraction of a second, warnings at once."""
    import subprocess
    import sys
    import time

    with subprocess.Popen([sys.executable, "-c", CHILD, "3"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as child:
        try:
            assert child.stdout is not None and child.stderr is not None
            assert _read_line(child.stdout, time.monotonic() + 20) == "logged\n"
            first = json.loads(_read_line(child.stderr, time.monotonic() + 2))  # mid-sleep
            assert (first["event"], first["n"]) == ("first", 1)
            second = json.loads(_read_line(child.stderr, time.monotonic() + 5))
            assert (second["event"], second["token"]) == ("second", "***")
        finally:
            child.kill()


def test_utc_stamper_writes_what_structlogs_iso_stamper_writes() -> None:
    import re
    from datetime import datetime, timezone

    from gensokyo_idmap.logging import TimeStamper

    stamp = TimeStamper(utc=True)
    before = datetime.now(timezone.utc)
    first = stamp(None, "info", {})["timestamp"]
    second = stamp(None, "info", {})["timestamp"]
    after = datetime.now(timezone.utc)
    for text in (first, second):
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", text), text
        when = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
        assert before.replace(microsecond=0) <= when <= after
    assert first <= second


LOCAL_CHILD = """
import io, json, sys, structlog
from gensokyo_idmap.logging import configure_logging
out = io.StringIO()
configure_logging("info", "json", stream=out, **({"zone": sys.argv[1]} if sys.argv[1] else {}))
structlog.get_logger("t").info("[app] ready")
print(json.loads(out.getvalue())["timestamp"])
"""


@pytest.mark.parametrize(("tz", "zone", "suffix", "hours"), [
    ("Asia/Shanghai", "", "+08:00", 8),  # local is the default
    ("Asia/Shanghai", "local", "+08:00", 8),
    ("America/St_Johns", "local", None, None),  # -03:30 or -02:30 (summer): minutes too
    ("UTC", "local", "+00:00", 0),  # a machine on UTC still says its offset
    ("Asia/Shanghai", "utc", "Z", 0),
])
def test_timestamps_are_local_with_their_offset_unless_utc_is_asked_for(
        tz: str, zone: str, suffix: str | None, hours: int | None) -> None:
    """``log.time``: local time with its UTC offset by default, UTC ending in ``Z`` when
    asked; either way the instant is now (run in a child whose ``TZ`` is set)."""
    import os
    import subprocess
    import sys
    from datetime import datetime, timedelta, timezone

    before = datetime.now(timezone.utc)
    text = subprocess.run([sys.executable, "-c", LOCAL_CHILD, zone], capture_output=True,
                          text=True, check=True, env={**os.environ, "TZ": tz},
                          timeout=60).stdout.strip()
    after = datetime.now(timezone.utc)
    when = datetime.fromisoformat(text)  # Python 3.11 reads both the offset and Z
    assert before.replace(microsecond=0) <= when <= after, text
    if suffix is None:
        assert text[-6:] in ("-03:30", "-02:30"), text
    else:
        assert text.endswith(suffix), text
        assert when.utcoffset() == timedelta(hours=hours or 0), text


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_every_format_hides_secrets_in_names_urls_and_lists(fmt: Any) -> None:
    from gensokyo_idmap.logtail import TAIL

    stream = io.StringIO()
    configure_logging("info", fmt, stream=stream)
    structlog.get_logger("t").info(
        "[app] ready", url=f"ws://user:{SECRET}@h:8080/ws", clientSecret=SECRET,
        listeners=[f"reverse ws ws://h/ws?access_token={SECRET}", 3], level_of="x")
    (line,) = lines_of(stream)
    assert SECRET not in line
    assert "ws://***@h:8080/ws" in line and "access_token=***" in line
    assert TAIL.since(TAIL.last_seq - 1)[-1].text == line
