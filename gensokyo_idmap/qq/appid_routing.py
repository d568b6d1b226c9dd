"""Which bot a webhook callback is for, when one listener serves several (pure).

The platform names the bot a callback is meant for in ``X-Bot-Appid`` (reference
qq-platform.md §3.1). One listener serves every bot of the daemon:

1. **One bot: as it always was.** The callback goes to that bot, whose receiver checks the
   header itself (absent: fine; another AppID: 403).
2. **Several: the header picks.** A callback naming one of them goes to it (verified with
   that bot's own key); one naming none of them, or none at all, is refused 403 naming the
   AppIDs served: nothing of it is read further, and no key is tried on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from gensokyo_idmap.errors import BadInputError

__all__ = ["APPID_HEADER", "callback_bot"]

APPID_HEADER: Final = "X-Bot-Appid"


def callback_bot(app_ids: Sequence[str], header: str | None) -> str | BadInputError:
    """The AppID (one of ``app_ids``) a callback with ``X-Bot-Appid: header`` goes to, or
    why it is refused (403)."""
    if len(app_ids) == 1:
        return app_ids[0]
    if header is not None and header in app_ids:
        return header
    served = ", ".join(app_ids)
    if header is None:
        return BadInputError(APPID_HEADER, None, f"missing: this webhook serves several bots "
                             f"({served}) and the header names the one a callback is for")
    return BadInputError(APPID_HEADER, header, f"is no bot of this daemon (it serves {served}):"
                         " the callback is meant for another bot")
