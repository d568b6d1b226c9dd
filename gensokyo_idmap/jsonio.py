"""JSON text in and out, the one way the daemon does it.

Every platform frame is parsed and every OneBot event, action response and log line is
serialised: on the inbound path that was a tenth of an event's cost with the standard
library. orjson (a well-kept C extension) does the same work several times faster. Where it
refuses what the standard library accepts (non-string keys, integers beyond 64 bits on the
way out, lone surrogates) we fall back to ``json``, so the output is what ``json`` gives.
One difference is left on the way in: an integer beyond 64 bits is read as a float, where
``json`` gives an int. No field we read may hold one (ids, vUINs and seqs are all checked as
integers in range), so such input is refused either way, only with another reason.

**Platform text is made encodable.** JSON can spell a lone UTF-16 surrogate
(``"\\ud83d"``), and ``json`` reads it into a ``str`` that no UTF-8 encoder takes: a signed
platform event holding one could be sent to no framework and written to no store, and was
retried for ever. :func:`loads_repaired` (what the platform's frames are read with)
replaces every lone surrogate, in keys and values at any depth, with U+FFFD (and reads
bytes that are not UTF-8 the same way) and says how many repairs it made, for the caller
to log. :func:`loads` leaves them, as ``json``
does: a client's request holding one gets its clear 400 where a field is checked.
orjson refuses lone surrogates, so only what falls back to ``json`` is ever walked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Final

import orjson

__all__ = ["REPLACEMENT", "dumps", "dumps_bytes", "loads", "loads_repaired"]

#: What a character UTF-8 cannot encode (a lone surrogate) becomes when read.
REPLACEMENT: Final = "\ufffd"
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


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
    orjson's own output, not decoded to text and encoded back. Raises ``TypeError`` (what
    JSON cannot hold) or ``ValueError`` (text UTF-8 cannot encode, a circular reference)."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        return _json_text(obj, None).encode("utf-8")


def _json_text(obj: Any, default: Callable[[Any], Any] | None) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=default)


def loads(data: str | bytes | bytearray) -> Any:
    """Parse JSON text; ``NaN`` / ``Infinity`` are refused (they are not JSON). Raises
    ``ValueError`` (``json.JSONDecodeError`` or ``UnicodeDecodeError``) or
    ``RecursionError``, as ``json.loads`` does."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        # orjson refuses a few things json reads (integers over 64 bits, lone surrogates):
        # let json decide, and give its error message when it is bad indeed
        return json.loads(data, parse_constant=_reject_constant)


def loads_repaired(data: str | bytes | bytearray) -> tuple[Any, int]:
    """:func:`loads` with every lone surrogate replaced by U+FFFD, and bytes that are not
    UTF-8 read as U+FFFD too; and how many repairs that took (each string, keys included,
    that held a lone surrogate, plus one for bytes that were not UTF-8): 0 for all
    well-formed text."""
    try:
        return orjson.loads(data), 0  # orjson refuses lone surrogates: nothing to repair
    except orjson.JSONDecodeError:
        pass
    try:
        return _repaired(json.loads(data, parse_constant=_reject_constant))
    except UnicodeDecodeError:
        if isinstance(data, str):
            raise
    value, repaired = _repaired(json.loads(bytes(data).decode("utf-8", "replace"),
                                           parse_constant=_reject_constant))
    return value, repaired + 1


def _repaired(value: Any) -> tuple[Any, int]:
    """``value`` (as ``json`` built it) with every lone surrogate replaced, and how many
    strings that touched. Lists and dicts are fixed in place, without recursion: ``json``
    may have built something nested as deep as its own recursion allows."""
    if isinstance(value, str):
        fixed = _fixed(value)
        return fixed, int(fixed is not value)
    repaired = 0
    todo = [value]
    while todo:
        node = todo.pop()
        if isinstance(node, list):
            for index, item in enumerate(node):
                if isinstance(item, str):
                    fixed = _fixed(item)
                    if fixed is not item:
                        node[index] = fixed
                        repaired += 1
                elif isinstance(item, list | dict):
                    todo.append(item)
        elif isinstance(node, dict):
            items = list(node.items())
            node.clear()  # rebuilt in the same order: a key may change
            for key, item in items:
                fixed_key = _fixed(key)
                repaired += fixed_key is not key
                if isinstance(item, str):
                    fixed = _fixed(item)
                    repaired += fixed is not item
                    item = fixed
                elif isinstance(item, list | dict):
                    todo.append(item)
                node[fixed_key] = item
    return value, repaired


def _fixed(text: str) -> str:
    """``text`` itself when UTF-8 can encode it, else a copy with U+FFFD for each lone
    surrogate (a valid pair was already joined into one character by ``json``)."""
    if text.isascii() or not _LONE_SURROGATE.search(text):
        return text
    return _LONE_SURROGATE.sub(REPLACEMENT, text)
