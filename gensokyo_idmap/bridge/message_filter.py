"""Which messages reach the frameworks, and without the leading @bot (pure).

The Go daemon's switches, for bots that must pass the platform's review or whose plugins
do not expect a mention first (``onebot.white_prefixes`` / ``black_prefixes`` /
``remove_at``). Rules:

1. **What is compared** is the message's text: its text segments joined, after a leading
   mention of the bot (an ``at`` segment naming ``self_id``) and the spaces around it, in
   every case (``remove_at`` or not). A prefix matches that text as it is, or with one
   leading ``/`` removed: ``help`` matches ``help me`` and ``/help me`` (QQ's command menu
   sends the slash; the Go daemon removed it only with ``remove_prefix``), while ``/help``
   matches only ``/help me``.
2. **White prefixes** (when any are set): a message whose text starts with none of them is
   not forwarded (a message without text, e.g. a lone picture, neither). **Black
   prefixes**: a message whose text starts with one of them is not forwarded. Both may be
   set; a message must pass both.
3. **remove_at** drops a leading @bot and the spaces after it from what is forwarded (a
   mention elsewhere in the message stays).
4. A message not forwarded is still a message of its chat: its id was kept, so the bot's
   sends may still answer it; only the frameworks do not see it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from gensokyo_idmap.onebot.message import Segment, parse_cq, segments_to_cq, segments_to_json

__all__ = ["MessageFilter"]

log = structlog.get_logger("gensokyo_idmap.bridge")


@dataclass(frozen=True, slots=True)
class MessageFilter:
    self_id: int
    white_prefixes: tuple[str, ...] = ()
    black_prefixes: tuple[str, ...] = ()
    remove_at: bool = False

    @property
    def active(self) -> bool:
        """Whether it can change or hold back anything (else nothing is looked at)."""
        return bool(self.white_prefixes or self.black_prefixes or self.remove_at)

    def _leading_at(self, segments: Sequence[Segment]) -> int:
        """How many segments a leading @bot takes (0 or 1)."""
        if segments and segments[0].type == "at" and segments[0].get("qq") == str(self.self_id):
            return 1
        return 0

    def text(self, segments: Sequence[Segment]) -> str:
        """The text the prefixes are compared with (rule 1)."""
        return "".join(segment.get("text") or "" for segment in
                       segments[self._leading_at(segments):] if segment.type == "text").lstrip()

    @staticmethod
    def _starts(text: str, prefixes: tuple[str, ...]) -> bool:
        unslashed = text[1:] if text.startswith("/") else None
        return any(text.startswith(prefix)
                   or (unslashed is not None and unslashed.startswith(prefix))
                   for prefix in prefixes)

    def forwards(self, segments: Sequence[Segment]) -> bool:
        """Whether a message passes the prefixes (rule 2)."""
        if not (self.white_prefixes or self.black_prefixes):
            return True
        text = self.text(segments)
        if self.white_prefixes and not self._starts(text, self.white_prefixes):
            return False
        return not self._starts(text, self.black_prefixes)

    def without_at(self, segments: Sequence[Segment]) -> list[Segment]:
        """``segments`` without a leading @bot and the spaces after it (rule 3); the
        ``reply`` segment of a quote, which comes before it, stays first."""
        quote = segments[:1] if segments and segments[0].type == "reply" else []
        body = segments[len(quote):]
        rest = list(body[self._leading_at(body):])
        if len(rest) < len(body):
            while rest and rest[0].type == "text":
                stripped = (rest[0].get("text") or "").lstrip()
                if stripped:
                    rest[0] = Segment.text(stripped)
                    break
                rest.pop(0)
        return [*quote, *rest]

    def apply(self, segments: Sequence[Segment]) -> list[Segment] | None:
        """What is forwarded of a message: None when it is held back, else its segments
        (without the leading @bot with ``remove_at``)."""
        if not self.forwards(segments):
            return None
        return self.without_at(segments) if self.remove_at else list(segments)

    def events(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """OneBot ``events`` as they are forwarded: message events held back (logged) or
        without their leading @bot, read from and written back to their ``raw_message`` /
        ``message`` in the format they have; other events as they are."""
        kept = []
        for event in events:
            if event.get("post_type") != "message":
                kept.append(event)
                continue
            segments = parse_cq(event["raw_message"])
            shown = self.apply(segments)
            if shown is None:
                log.info("[message] not forwarded: prefix filter",
                         message_id=event.get("message_id"))
                continue
            if shown != segments:
                raw = segments_to_cq(shown)
                array = isinstance(event["message"], list)
                event = {**event, "raw_message": raw,
                         "message": segments_to_json(shown) if array else raw}
            kept.append(event)
        return kept
