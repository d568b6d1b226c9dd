"""The platform's OpenAPI over HTTP (``QQBot <token>`` authorised); only what is used so far.

Every call retries once after a 401 with a fresh token (the token may have been replaced
early); errors come back as :class:`PlatformError` carrying the platform's code and message,
never the token.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import structlog

from gensokyo_idmap.errors import PlatformError
from gensokyo_idmap.qq.token import AccessTokenManager

__all__ = ["OpenApiClient"]

log = structlog.get_logger("gensokyo_idmap.qq.openapi")


class OpenApiClient:
    def __init__(self, api_base: str, tokens: AccessTokenManager,
                 session: aiohttp.ClientSession) -> None:
        self.api_base = api_base.rstrip("/")
        self.tokens = tokens
        self.session = session

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        for attempt in (1, 2):
            headers = {"Authorization": await self.tokens.authorization(),
                       "X-Union-Appid": self.tokens.app_id}
            try:
                async with self.session.request(method, self.api_base + path, json=body,
                                                headers=headers) as resp:
                    raw = await resp.read()
                    status = resp.status
            except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
                raise PlatformError(f"{method} {path} failed: {type(exc).__name__}") from None
            if status == 401 and attempt == 1:
                self.tokens.invalidate()
                continue
            try:
                data = json.loads(raw) if raw.strip() else None
            except ValueError:
                data = None
            if status >= 400:
                code = data.get("code") if isinstance(data, dict) else None
                message = data.get("message") if isinstance(data, dict) else None
                raise PlatformError(f"{method} {path}: HTTP {status}, code {code}, "
                                    f"message {message!r}")
            return data
        raise PlatformError(f"{method} {path}: still unauthorised with a fresh token")

    async def ack_interaction(self, interaction_id: str, code: int = 0) -> None:
        """``PUT /interactions/{id}`` (0 ok): the platform expects it for every button press."""
        await self.request("PUT", f"/interactions/{interaction_id}", {"code": code})
