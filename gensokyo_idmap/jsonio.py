"""JSON text in and out, the one way the daemon does it.

Every platform frame is parsed and every OneBot event, action response and log line is
serialised: on the inbound path that was a tenth of an event's cost with the standard
library. orjson (a well-kept C extension) does the same work several times faster. Where it
refuses what the standard library accepts (non-string keys, integers beyond 64 bits on the
way out, lone surrogates) we fall back to ``json``, so the output is what ``json`` gives.
One difference is left on the way in: an integer beyond 64 bits is read as a float, where
``json`` gives an int. No field we read may hold one (ids, vUINs and seqs are all checked as
integers in range), so such input is refused either way, only with another reason.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson

__all__ = ["dumps", "dumps_bytes", "loads"]


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def dumps(obj: Any, default: Callable[[Any], Any] | None = None, **_ignored: Any) -> str:
    """Compact JSON text, non-ASCII as is (``json.dumps(obj, ensure_ascii=False)``, minus
    the blanks after ``,`` and ``:``). ``default`` turns what JSON cannot hold into what it
    can, as in ``json.dumps`` (structlog's renderer passes one; other keywords it may pass
    are about formatting and are ignored)."""
    try:
        return orjson.dumps(obj, default=default).decode("utf-8")
    except TypeError:  # orjson.JSONEncodeError: what orjson refuses, json may still write
        return _json_text(obj, default)


def dumps_bytes(obj: Any) -> bytes:
    """:func:`dumps` as UTF-8, for what goes out as bytes (HTTP POST bodies, the outbox):
    orjson's own output, not decoded to text and encoded back."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        return _json_text(obj, None).encode("utf-8")


def _json_text(obj: Any, default: Callable[[Any], Any] | None) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=default)


def loads(data: str | bytes | bytearray) -> Any:
    """Parse JSON text; ``NaN`` / ``Infinity`` are refused (they are not JSON). Raises
    ``ValueError`` (``json.JSONDecodeError`` or ``UnicodeDecodeError``) or ``RecursionError``,
    as ``json.loads`` does."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        # orjson refuses a few things json reads (integers over 64 bits): let json decide,
        # and give its error message when it is bad indeed
        return json.loads(data, parse_constant=_reject_constant)
