"""Which bot a framework's request is for, on a listener every bot shares (pure).

On reverse WS and HTTP POST the daemon names the bot itself (one connection, one POST per
bot, each with its ``X-Self-ID``). The forward WebSocket and the OneBot HTTP API are one
listener each for every bot, so a client says which bot it means, as OneBot frameworks do:

1. **The path prefix** ``/<self_id>/``: ``/<self_id>/`` (or ``/<self_id>``),
   ``/<self_id>/api``, ``/<self_id>/event`` on the forward WebSocket, ``/<self_id>/send_msg``
   (or ``POST /<self_id>/``) on the HTTP API. A path whose first segment is digits is such
   a prefix (no action and no WebSocket path is a number); one naming no bot of the daemon
   is 404, naming the ``self_id`` s served.
2. **The** ``X-Self-ID`` **header**, decimal, as a framework sends it on its own
   connections. With several bots one naming none of them is 400; one that contradicts the
   path's prefix is 400.
3. **One bot: nothing changes.** Without a choice the request is that bot's, and a header
   is not read (a client that sent another value before was served all the same).
4. **Several and no choice: 400**, naming the ``self_id`` s and how to choose.

What is left of the path after the prefix (``/`` at least) is what the listener serves as
before: the forward WebSocket's role, the HTTP API's action.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

__all__ = ["SELF_ID_HEADER", "Chosen", "Refused", "choose_bot"]

SELF_ID_HEADER: Final = "X-Self-ID"


@dataclass(frozen=True, slots=True)
class Chosen:
    """The bot a request is for, and its path without the ``/<self_id>`` prefix."""

    self_id: int
    path: str


@dataclass(frozen=True, slots=True)
class Refused:
    """No bot can be chosen: the HTTP status to answer, and why."""

    status: int
    reason: str


def _prefix(path: str) -> tuple[str, str] | None:
    """(the digits, the rest of the path) of a path starting ``/<digits>``, else None."""
    first, slash, rest = path[1:].partition("/")
    if not (path.startswith("/") and first.isascii() and first.isdigit()):
        return None
    return first, slash + rest if slash else "/"


def choose_bot(self_ids: Sequence[int], header: str | None, path: str) -> Chosen | Refused:
    """The bot (of ``self_ids``, the daemon's, in order) a request to ``path`` with
    ``X-Self-ID: header`` (None: absent) is for, or why there is none."""
    served = ", ".join(str(self_id) for self_id in self_ids)
    prefix = _prefix(path)
    chosen: int | None = None
    if prefix is not None:
        digits, path = prefix
        if int(digits) not in self_ids:
            return Refused(404, f"no bot with self_id {digits} here (self_ids: {served})")
        chosen = int(digits)
    if header is not None and len(self_ids) > 1:
        named = header.strip()
        if not (named.isascii() and named.isdigit() and int(named) in self_ids):
            return Refused(400, f"{SELF_ID_HEADER} {header!r} is no bot of this daemon "
                                f"(self_ids: {served})")
        if chosen is not None and chosen != int(named):
            return Refused(400, f"{SELF_ID_HEADER} {named} and the path's /{chosen}/ name "
                                "different bots")
        chosen = int(named)
    if chosen is not None:
        return Chosen(chosen, path)
    if len(self_ids) == 1:
        return Chosen(self_ids[0], path)
    return Refused(400, f"this daemon serves several bots (self_ids: {served}): choose one "
                        f"with the {SELF_ID_HEADER} header or the path prefix /<self_id>/ "
                        f"(e.g. /{self_ids[0]}/)")
