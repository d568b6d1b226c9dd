"""The bot's own name, as the platform gives it: ``get_login_info``'s ``nickname``.

Frameworks show it and Koishi takes it as the bot's user name, so it should be the name
users see, the ``username`` of ``GET /users/@me``, not a made-up one. It is asked once and
kept for the process (a bot's name changes only in the platform's console). Without
platform access, or when the platform refuses or answers no name, the answer is
``QQBot <appid>`` (as before the platform was asked), logged once per refusal, and the
platform is asked again at the first call after :data:`RETRY_SECONDS`, not at every call:
a framework that asks on each connection must not turn into a request per connection.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final

import structlog

from gensokyo_idmap.bridge.guild_actions import GuildPlatform
from gensokyo_idmap.errors import IdmapError

__all__ = ["RETRY_SECONDS", "BotName"]

log = structlog.get_logger("gensokyo_idmap.actions")

#: How long after a refusal the platform is not asked again.
RETRY_SECONDS: Final = 60.0


class BotName:
    """``GET /users/@me``'s ``username`` of one bot, asked once (module doc)."""

    def __init__(self, platform: GuildPlatform | None, app_id: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._platform = platform
        self._clock = clock
        self.fallback = f"QQBot {app_id}"
        self._name: str | None = None
        self._retry_at: float | None = None
        self._asking: asyncio.Lock | None = None

    async def get(self) -> str:
        """The bot's name: the platform's, else :attr:`fallback` (module doc)."""
        if self._name is not None:
            return self._name
        if self._platform is None:
            if self._retry_at is None:
                self._retry_at = 0.0
                log.info("[onebot] bot name: no platform access, answering the fallback",
                         nickname=self.fallback)
            return self.fallback
        if self._asking is None:
            self._asking = asyncio.Lock()
        async with self._asking:  # one request at a time: the others take its answer
            if self._name is not None:
                return self._name
            if self._retry_at is not None and self._clock() < self._retry_at:
                return self.fallback
            return await self._ask(self._platform)

    async def _ask(self, platform: GuildPlatform) -> str:
        try:
            me = await platform.me()
        except IdmapError as err:
            reason = err.message
        else:
            name = me.get("username")
            if isinstance(name, str) and name.strip():
                self._name = name
                log.info("[onebot] bot name from the platform", nickname=name)
                return name
            reason = "GET /users/@me answered no username"
        self._retry_at = self._clock() + RETRY_SECONDS
        log.warning("[onebot] bot name: the platform did not give it, answering the fallback",
                    nickname=self.fallback, reason=reason, retry_seconds=RETRY_SECONDS)
        return self.fallback
