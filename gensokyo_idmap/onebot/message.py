"""OneBot v11 messages: segments, CQ-code strings and their escaping (pure, no I/O).

Rules (reference onebot-v11.md §3):

- A message is a list of segments ``{"type": …, "data": {…}}`` whose values are strings.
- In the string form, text escapes ``&`` → ``&amp;``, ``[`` → ``&#91;``, ``]`` → ``&#93;``;
  a CQ parameter value additionally escapes ``,`` → ``&#44;``. Unescaping reverses them in
  the order ``&#44;``, ``&#91;``, ``&#93;`` and ``&amp;`` last.
- A message parameter may be a string, an array of segments or one segment object;
  ``auto_escape`` makes a string plain text.
- ``segments_to_cq(parse_cq(s))`` need not equal ``s`` (adjacent text merges), but
  ``parse_cq(segments_to_cq(m)) == m`` for every normalised message ``m``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gensokyo_idmap.errors import BadInputError

__all__ = [
    "Segment",
    "escape_param",
    "escape_text",
    "normalize_message",
    "parse_cq",
    "segments_to_cq",
    "segments_to_cq_within",
    "segments_to_json",
    "unescape",
]

_TYPE_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


@dataclass(frozen=True, slots=True)
class Segment:
    """One message segment; ``data`` is a tuple of (key, value) pairs in a stable order."""

    type: str
    data: tuple[tuple[str, str], ...] = ()

    @classmethod
    def text(cls, text: str) -> Segment:
        return cls("text", (("text", text),))

    def get(self, key: str, default: str | None = None) -> str | None:
        for name, value in self.data:
            if name == key:
                return value
        return default

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "data": dict(self.data)}


def escape_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("[", "&#91;").replace("]", "&#93;")


def escape_param(value: str) -> str:
    return escape_text(value).replace(",", "&#44;")


def unescape(text: str) -> str:
    if "&" not in text:  # nothing escaped, as in most values and texts: no four passes
        return text
    return (text.replace("&#44;", ",").replace("&#91;", "[").replace("&#93;", "]")
            .replace("&amp;", "&"))


def _check_type(kind: str, field: str, value: object) -> str:
    if not kind or not set(kind) <= _TYPE_CHARS:
        raise BadInputError(field, value, "segment type must be letters, digits, '_', '.' or '-'")
    return kind


def parse_cq(message: str, field: str = "message") -> list[Segment]:
    """A CQ-code string as segments. Text between codes becomes ``text`` segments."""
    if "[CQ:" not in message and "&" not in message:  # plain text, as most replies are
        return [Segment.text(message)] if message else []
    segments: list[Segment] = []
    pending: list[str] = []
    i = 0
    while i < len(message):
        start = message.find("[CQ:", i)
        if start < 0:
            pending.append(message[i:])
            break
        pending.append(message[i:start])
        end = message.find("]", start)
        if end < 0:
            raise BadInputError(field, message, f"CQ code at offset {start} has no closing ']'")
        body = message[start + 4 : end]
        if "[" in body:
            raise BadInputError(field, message, f"CQ code at offset {start} is not closed")
        kind, _, params = body.partition(",")
        _check_type(kind, field, message)
        data: list[tuple[str, str]] = []
        if params:
            for part in params.split(","):
                key, eq, value = part.partition("=")
                if not eq or not key:
                    raise BadInputError(
                        field, message, f"CQ parameter {part!r} at offset {start} is not key=value"
                    )
                data.append((key, unescape(value)))
        text = unescape("".join(pending))
        if text:
            segments.append(Segment.text(text))
        pending.clear()
        segments.append(Segment(kind, tuple(data)))
        i = end + 1
    text = unescape("".join(pending))
    if text:
        segments.append(Segment.text(text))
    return segments


def segments_to_cq(segments: Sequence[Segment]) -> str:
    """Segments as a CQ-code string (text escaped, parameter values escaped)."""
    out: list[str] = []
    for segment in segments:
        if segment.type == "text":
            out.append(escape_text(segment.get("text", "") or ""))
            continue
        params = "".join(f",{key}={escape_param(value)}" for key, value in segment.data)
        out.append(f"[CQ:{segment.type}{params}]")
    return "".join(out)


def segments_to_cq_within(segments: Sequence[Segment], max_bytes: int) -> str:
    """:func:`segments_to_cq` of at most ``max_bytes`` UTF-8 bytes: the segments that fit
    whole, then as much of a text segment as fits (never half a code, so the result parses
    back); characters UTF-8 cannot hold (lone surrogates) become ``?``."""
    whole = segments_to_cq(segments)
    try:  # most messages fit whole: one encoding of the whole, not one per segment
        if len(whole.encode("utf-8")) <= max_bytes:
            return whole
    except UnicodeEncodeError:  # a lone surrogate: each segment repaired below
        pass
    pieces: list[str] = []
    room = max_bytes
    for segment in segments:
        piece = _utf8(segments_to_cq([segment]))
        size = len(piece.encode("utf-8"))
        if size <= room:
            pieces.append(piece)
            room -= size
            continue
        if segment.type == "text":
            pieces.append(_text_within(_utf8(segment.get("text") or ""), room))
        break
    return "".join(pieces)


def _utf8(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8")


def _text_within(text: str, max_bytes: int) -> str:
    """The longest escaped start of ``text`` within ``max_bytes`` (binary search: the
    escaped length only grows with the characters taken)."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if len(escape_text(text[:middle]).encode("utf-8")) <= max_bytes:
            low = middle
        else:
            high = middle - 1
    return escape_text(text[:low])


def segments_to_json(segments: Sequence[Segment]) -> list[dict[str, Any]]:
    return [segment.to_json() for segment in segments]


def _segment_from_json(item: object, field: str) -> Segment:
    if not isinstance(item, Mapping):
        raise BadInputError(field, item, "a segment must be an object with 'type' and 'data'")
    kind = item.get("type")
    if not isinstance(kind, str):
        raise BadInputError(f"{field}.type", kind, "must be a string")
    _check_type(kind, f"{field}.type", kind)
    raw = item.get("data")
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise BadInputError(f"{field}.data", raw, "must be an object or null")
    data: list[tuple[str, str]] = []
    for key, value in raw.items():
        if not isinstance(key, str) or not key:
            raise BadInputError(f"{field}.data", key, "keys must be non-empty strings")
        if isinstance(value, bool):
            value = "1" if value else "0"
        elif isinstance(value, int | float):
            value = str(value)
        elif value is None:
            continue
        elif not isinstance(value, str):
            raise BadInputError(f"{field}.data.{key}", value, "must be a string")
        data.append((key, value))
    if kind == "text" and not any(key == "text" for key, _ in data):
        raise BadInputError(f"{field}.data.text", None, "a text segment needs 'text'")
    return Segment(kind, tuple(data))


def normalize_message(
    message: object, *, auto_escape: bool = False, field: str = "message"
) -> list[Segment]:
    """A OneBot message parameter (string, array or one segment) as segments.

    Clients send numbers where strings belong (``"qq": 12345``); they become strings. A
    ``null`` value is dropped. Anything else wrong raises BadInputError naming the path.
    """
    if isinstance(message, str):
        return [Segment.text(message)] if auto_escape and message else (
            [] if auto_escape else parse_cq(message, field))
    if isinstance(message, Mapping):
        return [_segment_from_json(message, field)]
    if isinstance(message, Sequence) and not isinstance(message, bytes | bytearray):
        return [_segment_from_json(item, f"{field}[{i}]") for i, item in enumerate(message)]
    raise BadInputError(field, message, "must be a string, an array of segments or a segment")
