"""structlog set-up: console or JSON lines, level filtering, and secret redaction.

Timestamps are in local time with the UTC offset unless ``log.time: utc`` asks for UTC
(``…Z``); JSON lines carry an event's component (``[idmap]``) in a field of its own.

Debug calls on the hot path (``[idmap] identity hit``) must cost nothing when the level is
INFO, so the bound logger is a filtering one. Loggers are not cached globally (that would
blind ``structlog.testing.capture_logs``); hot objects bind their own logger once when they
are built, which gives the same speed.

Lines go to stderr through a 64 KiB buffer that a background thread flushes every
``FLUSH_SECONDS`` (and at exit): one write per line was the biggest single cost of the
inbound path at INFO. Warnings and errors are flushed at once, so what an operator most
needs is never held back; ``kill -9`` may cost the last fraction of a second of info lines.
"""

from __future__ import annotations

import atexit
import functools
import io
import logging
import sys
import threading
import time
from collections.abc import MutableMapping
from typing import Any, Final, Literal, TextIO

import structlog

from gensokyo_idmap import jsonio
from gensokyo_idmap.logrender import PlainConsoleRenderer
from gensokyo_idmap.logtail import TailingRenderer
from gensokyo_idmap.redaction import HIDDEN, is_secret_name, redact_url

__all__ = ["JsonLineRenderer", "TimeStamper", "configure_logging", "flush_logs",
           "redact_secrets"]

FLUSH_SECONDS: Final = 0.2
_secret_names: dict[str, bool] = {}  # field name → named like a secret (a pure function)


def redact_secrets(
    _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """Replace the value of any field named like a secret, and the credentials of any URL
    in any other text field (``ws://user:password@host``, ``?access_token=``): a log line
    never carries one, whichever code logged it.

    Matching is by name part (``clientSecret``, ``refresh_token``, ``Authorization``), so a
    new field cannot leak because nobody added it to a list; the rules are those of
    :mod:`gensokyo_idmap.redaction`.
    """
    # Runs on every line: values are replaced in place (the keys never change, so the dict
    # can be walked as it is), and text without "://" is left without a call (redact_url
    # returns such text as it is).
    secret_names = _secret_names
    for name, value in event_dict.items():
        secret = secret_names.get(name)
        if secret is None:
            secret = is_secret_name(name)
            if len(secret_names) < 4096:
                secret_names[name] = secret
        if secret:
            if value:
                event_dict[name] = HIDDEN
        elif isinstance(value, str):
            if "://" in value:
                event_dict[name] = redact_url(value)
        elif isinstance(value, (list, tuple)) and any(isinstance(v, str) for v in value):
            event_dict[name] = [redact_url(v) if isinstance(v, str) else v for v in value]
    return event_dict


class TimeStamper:
    """``timestamp`` as ISO 8601 with microseconds, as structlog's ``TimeStamper(fmt="iso")``
    writes it, at a fraction of the cost: the date and time part is formatted once per
    second. In local time with its UTC offset (``2026-11-30T18:57:09.098353+01:00``: what
    an operator reads beside the other logs of the machine), or with ``utc`` in UTC
    (``2026-11-30T17:57:09.098353Z``)."""

    def __init__(self, *, utc: bool = False) -> None:
        self._utc = utc
        self._second: tuple[int, str, str] = (-1, "", "")  # one attribute: swapped atomically

    def _format(self, whole: int) -> tuple[str, str]:
        """The date and time of second ``whole``, and what follows the microseconds."""
        if self._utc:
            return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)), "Z"
        local = time.localtime(whole)
        offset = local.tm_gmtoff or 0
        sign = "-" if offset < 0 else "+"
        hours, minutes = divmod(abs(offset) // 60, 60)
        return time.strftime("%Y-%m-%dT%H:%M:%S", local), f"{sign}{hours:02d}:{minutes:02d}"

    def __call__(self, _logger: Any, _method: str,
                 event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        whole, nanos = divmod(time.time_ns(), 1_000_000_000)
        second, text, zone = self._second
        if second != whole:
            text, zone = self._format(whole)
            self._second = (whole, text, zone)
        event_dict["timestamp"] = f"{text}.{nanos // 1000:06d}{zone}"
        return event_dict


class JsonLineRenderer:
    """A JSON line, the component of the event in its own field: ``[idmap] identity
    create`` is written ``"component": "idmap", "event": "identity create"``, so a log
    shipper filters on a field instead of parsing the message. The console format keeps the
    name whole (``[idmap] identity create`` is what operators grep for); so does the
    console's live tail, which takes the name before the line is rendered. A line that
    carries a ``component`` of its own keeps its event whole.

    Event names are a few hundred constant texts: each is split once (:func:`_split` is
    cached), so a line costs a cache look-up more than structlog's ``JSONRenderer``, not a
    parse."""

    def __call__(self, _logger: Any, _method: str, event_dict: MutableMapping[str, Any]
                 ) -> str:
        event = event_dict.get("event")
        if event.__class__ is str and "component" not in event_dict:
            split = _split(event)
            if split:
                event_dict["component"], event_dict["event"] = split
        return jsonio.dumps(event_dict, default=_json_fallback)


@functools.lru_cache(maxsize=4096)
def _split(event: str) -> tuple[str, str] | tuple[()]:
    """``[idmap] identity create`` → ``("idmap", "identity create")``; () for a name
    without a component. Cached: the names are a few hundred constant texts."""
    end = event.find("] ", 2)
    if event[:1] != "[" or end < 0:
        return ()
    return event[1:end], event[end + 2:]


def _json_fallback(value: Any) -> Any:
    """What JSON cannot hold, as structlog's ``JSONRenderer`` writes it: its
    ``__structlog__()``, else its ``repr``."""
    try:
        return value.__structlog__()
    except AttributeError:
        return repr(value)


class _BufferedStderr:
    """stderr's file descriptor behind one shared buffer, flushed by a daemon thread."""

    _shared: _BufferedStderr | None = None

    def __init__(self) -> None:
        self.out = io.BufferedWriter(io.FileIO(sys.stderr.fileno(), "wb", closefd=False),
                                     buffer_size=1 << 16)
        threading.Thread(target=self._flush_often, name="log-flush", daemon=True).start()
        atexit.register(self.flush)

    @classmethod
    def shared(cls) -> _BufferedStderr:
        if cls._shared is None:
            cls._shared = cls()
        return cls._shared

    def flush(self) -> None:
        try:
            self.out.flush()
        except (OSError, ValueError):
            pass  # stderr closed: nothing left to tell

    def _flush_often(self) -> None:
        while True:
            time.sleep(FLUSH_SECONDS)
            self.flush()


class BufferedLineLogger:
    """What structlog writes rendered lines to (see the module docstring)."""

    def __init__(self, sink: _BufferedStderr) -> None:
        self._sink = sink

    def msg(self, message: str) -> None:
        try:
            self._sink.out.write(message.encode("utf-8", "replace") + b"\n")
        except (OSError, ValueError):
            pass

    def msg_now(self, message: str) -> None:
        self.msg(message)
        self._sink.flush()

    debug = info = msg
    warning = warn = error = err = critical = exception = fatal = failure = msg_now


def flush_logs() -> None:
    """Write out the lines the stderr buffer holds now (before fd 2 is pointed elsewhere,
    as the log-line benchmark does; exit does it by itself)."""
    if _BufferedStderr._shared is not None:
        _BufferedStderr._shared.flush()


def _buffered_logger(*_args: Any) -> BufferedLineLogger:
    return BufferedLineLogger(_BufferedStderr.shared())


def configure_logging(
    level: str = "info",
    fmt: Literal["console", "json"] = "console",
    stream: TextIO | None = None,
    zone: Literal["local", "utc"] = "local",
) -> None:
    """``level``, ``fmt`` and ``zone`` are ``log.level``, ``log.format`` and ``log.time``
    (the timestamps' time zone); lines go to ``stream``, else to stderr."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"log.level: unknown level {level!r}")
    renderer: Any = (
        JsonLineRenderer()
        if fmt == "json"
        else PlainConsoleRenderer()  # ConsoleRenderer(colors=False)'s text, faster
    )
    factory: Any = _buffered_logger
    if stream is not None or sys.stderr is not sys.__stderr__:
        # an explicit stream, or stderr replaced (tests capturing it): write straight there
        factory = structlog.PrintLoggerFactory(file=stream or sys.stderr)
    structlog.configure(
        processors=[
            redact_secrets,  # first: the level and timestamp added next need no look
            structlog.processors.add_log_level,
            TimeStamper(utc=zone == "utc"),
            TailingRenderer(renderer),  # the console's live tail: the same redacted text
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=factory,
        cache_logger_on_first_use=False,
    )
