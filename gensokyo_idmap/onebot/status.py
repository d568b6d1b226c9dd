"""What a bot says of itself to its frameworks: ``get_status``'s data and every heartbeat's
``status`` (the same object, OneBot v11).

``online``: the bot is online on its platform (None: this side cannot know); ``good``:
everything works as expected, which implies ``online``. Frameworks and their monitoring
plugins read both, so they must not say more than is known: the OneBot side holds no view
of the platform link or the stores, and is handed a :data:`StatusSource` by the daemon,
which answers from what its parts already know (asked at every heartbeat: it does no I/O).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["UNKNOWN", "BotStatus", "StatusSource", "unknown"]


@dataclass(frozen=True, slots=True)
class BotStatus:
    """One bot's state as the OneBot wire says it."""

    online: bool | None
    good: bool

    def data(self) -> dict[str, Any]:
        """``{"online", "good"}``: ``good`` is never true of a bot not known to be online."""
        return {"online": self.online, "good": bool(self.good and self.online)}


StatusSource = Callable[[], BotStatus]

#: What a connection or action service made without a source says: not known, so not good
#: (a daemon always hands one: :meth:`gensokyo_idmap.link_status.BotWatch.onebot_status`).
UNKNOWN: Final = BotStatus(online=None, good=False)


def unknown() -> BotStatus:
    return UNKNOWN
