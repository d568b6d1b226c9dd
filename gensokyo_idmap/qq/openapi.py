"""The platform's OpenAPI over HTTP (``QQBot <token>`` authorised).

- Every call retries once after a 401 with a fresh token (the token may have been replaced
  early).
- No answer, a 5xx or a 429 is retried a bounded number of times with backoff, sending the
  very same body: for message sends that keeps the same ``msg_id`` + ``msg_seq``, which the
  platform refuses to deliver twice, so a retry after a lost answer cannot double a message.
- Errors come back as :class:`PlatformError` carrying the HTTP status and the platform's
  code and message, never the token.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final
from urllib.parse import quote

import aiohttp
import structlog

from gensokyo_idmap import jsonio
from gensokyo_idmap.errors import BadInputError, PlatformError
from gensokyo_idmap.qq.path_ids import IdForm, path_segment
from gensokyo_idmap.qq.token import AccessTokenManager

__all__ = ["CHAT_PATHS", "OpenApiClient"]

log = structlog.get_logger("gensokyo_idmap.qq.openapi")

#: Path prefix of each chat kind's endpoints.
CHAT_PATHS: Final = {"group": "/v2/groups/", "c2c": "/v2/users/", "channel": "/channels/",
                     "dms": "/dms/"}
_ERROR_STATUSES: Final = range(400, 600)


#: The form of each chat kind's target and the OneBot parameter that names it.
_TARGET_FORMS: Final = {"group": (IdForm.OPENID, "group_id"), "c2c": (IdForm.OPENID, "user_id"),
                        "channel": (IdForm.GUILD_SIDE, "channel_id"),
                        "dms": (IdForm.GUILD_SIDE, "guild_id")}


def _chat_path(chat_kind: str, target: str) -> str:
    """The path of a chat's endpoints; its target checked (:mod:`.path_ids`) and quoted."""
    try:
        form, field = _TARGET_FORMS[chat_kind]
    except KeyError:
        raise BadInputError("chat_kind", chat_kind, "must be group, c2c, channel or dms") from None
    return CHAT_PATHS[chat_kind] + path_segment(form, field, target)


class OpenApiClient:
    def __init__(self, api_base: str, tokens: AccessTokenManager,
                 session: aiohttp.ClientSession, *, attempts: int = 3,
                 backoff_seconds: float = 0.5, timeout_seconds: float = 10.0) -> None:
        self.api_base = api_base.rstrip("/")
        self.tokens = tokens
        self.session = session
        self.attempts = attempts
        self.backoff_seconds = backoff_seconds
        self.timeout = aiohttp.ClientTimeout(total=timeout_seconds)

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        """One call, retried as the module says; the decoded JSON answer (None if empty)."""
        delay = self.backoff_seconds
        for attempt in range(1, self.attempts + 1):
            try:
                return await self._authorised(method, path, body)
            except PlatformError as err:
                if not err.retryable or attempt == self.attempts:
                    raise
                log.warning("[qq] openapi retry", method=method, path=path, attempt=attempt,
                            reason=err.message, retry_in=delay)
            await asyncio.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    async def _authorised(self, method: str, path: str, body: Any) -> Any:
        for attempt in (1, 2):
            headers = {"Authorization": await self.tokens.authorization(),
                       "X-Union-Appid": self.tokens.app_id}
            try:
                async with self.session.request(method, self.api_base + path, json=body,
                                                headers=headers, timeout=self.timeout) as resp:
                    raw = await resp.read()
                    status = resp.status
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                raise PlatformError(f"{method} {path} failed: {type(exc).__name__}") from None
            if status == 401 and attempt == 1:
                self.tokens.invalidate()
                continue
            try:
                data = jsonio.loads(raw) if raw.strip() else None
            except (ValueError, RecursionError):
                data = None
            if status in _ERROR_STATUSES or status in (201, 202):
                # 201/202 are "accepted, not sent" (e.g. pending audit): a failure to report.
                code = data.get("code") if isinstance(data, dict) else None
                message = data.get("message") if isinstance(data, dict) else None
                raise PlatformError(f"{method} {path}: HTTP {status}, code {code}, "
                                    f"message {message!r}", status=status,
                                    platform_code=code if isinstance(code, int) else None,
                                    platform_message=message if isinstance(message, str)
                                    else None)
            return data
        raise PlatformError(f"{method} {path}: still unauthorised with a fresh token",
                            status=401)

    async def ack_interaction(self, interaction_id: str, code: int = 0) -> None:
        """``PUT /interactions/{id}`` (0 ok): the platform expects it for every button press."""
        segment = path_segment(IdForm.MESSAGE_ID, "interaction_id", interaction_id)
        await self.request("PUT", f"/interactions/{segment}", {"code": code})

    async def send_message(self, chat_kind: str, target: str,
                           body: dict[str, Any]) -> dict[str, Any]:
        """``POST /v2/{groups|users}/{openid}/messages``; the answer holds the new ``id``."""
        answer = await self.request("POST", _chat_path(chat_kind, target) + "/messages", body)
        if not isinstance(answer, dict) or not isinstance(answer.get("id"), str):
            raise PlatformError(f"send to {chat_kind} answered without a message id "
                                f"({str(answer)[:120]!r})")
        return answer

    async def upload_media(self, chat_kind: str, target: str, body: dict[str, Any]) -> str:
        """``POST …/files`` with ``srv_send_msg`` false; the ``file_info`` to send it with."""
        answer = await self.request("POST", _chat_path(chat_kind, target) + "/files", body)
        info = answer.get("file_info") if isinstance(answer, dict) else None
        if not isinstance(info, str) or not info:
            raise PlatformError(f"upload to {chat_kind} answered without file_info")
        return info

    async def recall(self, chat_kind: str, target: str, message_id: str) -> None:
        """``DELETE …/messages/{id}`` (only the bot's own, within 2 minutes)."""
        segment = path_segment(IdForm.MESSAGE_ID, "message_id", message_id)
        path = f"{_chat_path(chat_kind, target)}/messages/{segment}"
        await self.request("DELETE", path)

    # --- guilds (channels): what the go-cqhttp guild actions answer with ---------------

    async def me(self) -> dict[str, Any]:
        """``GET /users/@me``: the bot's own guild user (``id``, ``username``, ``avatar``)."""
        answer = await self.request("GET", "/users/@me")
        if not isinstance(answer, dict):
            raise PlatformError(f"GET /users/@me answered {str(answer)[:120]!r}")
        return answer

    async def me_guilds(self, limit: int = 100) -> list[dict[str, Any]]:
        """``GET /users/@me/guilds``: the guilds the bot is in, every page (``after`` the
        last id of the page before, ``limit`` per page)."""
        guilds: list[dict[str, Any]] = []
        after = ""
        while True:
            query = f"?limit={limit}" + (f"&after={quote(after, safe='')}" if after else "")
            page = await self.request("GET", "/users/@me/guilds" + query)
            if not isinstance(page, list):
                raise PlatformError(f"GET /users/@me/guilds answered {str(page)[:120]!r}")
            items = [g for g in page if isinstance(g, dict) and isinstance(g.get("id"), str)]
            guilds.extend(items)
            if len(page) < limit or not items or len(guilds) >= 10_000:
                return guilds
            after = items[-1]["id"]

    async def guild_channels(self, guild_id: str) -> list[dict[str, Any]]:
        """``GET /guilds/{guild_id}/channels``: the guild's channels."""
        segment = path_segment(IdForm.GUILD_SIDE, "guild_id", guild_id)
        answer = await self.request("GET", f"/guilds/{segment}/channels")
        if not isinstance(answer, list):
            raise PlatformError(f"GET /guilds/{guild_id}/channels answered "
                                f"{str(answer)[:120]!r}")
        return [c for c in answer if isinstance(c, dict) and isinstance(c.get("id"), str)]
