"""HTTP POST event reporting: each event is POSTed as JSON to every configured framework URL.

Headers: ``Content-Type: application/json``, ``X-Self-ID``, and ``X-Signature:
sha1=<HMAC-SHA1 of the raw body>`` when a secret is set (reference onebot-v11.md §1.2). One
bounded queue and one sender task per URL: a slow or dead receiver delays nobody; beyond its
queue, events wait in ``outbox.db`` (:class:`~gensokyo_idmap.bridge.outbox.Backlog`; without an
outbox its oldest are dropped, logged and counted). A 2xx answer confirms an event. A failed
POST (no answer within ``timeout``, or a 5xx) is tried ``retries`` more times, ``retry_delay``
seconds apart and growing (the entry's ``max_retries`` / ``retry_interval_seconds`` /
``timeout_seconds``: the Go daemon's ``post_max_retries`` / ``post_retries_interval`` /
``http_timeout``), then dropped and logged; an event that
cannot be encoded is dropped at once (:mod:`gensokyo_idmap.onebot.encoding`). A JSON object
in the answer is a quick operation (``{"reply": …, "at_sender": …}``): it is handed to
``on_quick_operation`` with its event, in the background, so the next event is not held up by
the platform call.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from collections.abc import Awaitable, Callable
from typing import Any, Final

import aiohttp
import structlog

from gensokyo_idmap import jsonio
from gensokyo_idmap.errors import IdmapError
from gensokyo_idmap.onebot.event_queue import DEFAULT_QUEUE, EventQueue, MakeBacklog, Tracked

__all__ = ["DEFAULT_RETRIES", "HttpPostTarget", "sign_body"]

log = structlog.get_logger("gensokyo_idmap.onebot.http_post")

#: Tries after the first when none is configured (``http_post[].max_retries``).
DEFAULT_RETRIES: Final = 2
QuickOperation = Callable[[dict[str, Any], dict[str, Any]], Awaitable[Any]]


def sign_body(secret: str, body: bytes) -> str:
    """The ``X-Signature`` value: ``sha1=`` + hex HMAC-SHA1 of the raw body."""
    return "sha1=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha1).hexdigest()


class HttpPostTarget:
    """One framework URL receiving events by HTTP POST."""

    def __init__(
        self,
        url: str,
        self_id: int,
        *,
        secret: str | None = None,
        queue_size: int = DEFAULT_QUEUE,
        backlog: MakeBacklog | None = None,
        timeout: float = 10.0,
        retry_delay: float = 0.5,
        retries: int = DEFAULT_RETRIES,
        on_quick_operation: QuickOperation | None = None,
        outbox_name: str | None = None,
    ) -> None:
        """``outbox_name``: what its owed events are kept under in outbox.db (default
        ``http_post <url>``; a daemon of several bots names each bot's apart)."""
        self.url = url
        self.self_id = self_id
        self._outbox_name = outbox_name or f"http_post {url}"
        self._secret = secret or None
        self.queue = EventQueue(queue_size, self.outbox_name, kind="http_post", window=1)
        self.backlog = backlog(self.outbox_name, self.queue) if backlog is not None else None
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._retry_delay = retry_delay
        self._attempts = retries + 1
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self.delivered = 0
        self.failed = 0
        self._on_quick_operation = on_quick_operation
        self._operations: set[asyncio.Task[None]] = set()

    def publish(self, event: dict[str, Any]) -> asyncio.Future[bool]:
        return self.queue.publish(event)

    @property
    def outbox_name(self) -> str:
        return self._outbox_name

    def publish_tracked(self, event: dict[str, Any], key: str | None) -> Tracked:
        """Queue an event through the backlog; its future turns True once a POST succeeded
        (always worth a wait: a failing receiver resolves it False within the retries)."""
        assert self.backlog is not None, "publish_tracked needs a backlog"
        return self.backlog.publish(event, key, True)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"http-post {self.url}")
        if self.backlog is not None:
            self.backlog.start()

    async def close(self) -> None:
        self._stop.set()
        self.queue.end()
        if self._task is not None:
            await self._task
        if self.backlog is not None:
            await self.backlog.close()
        if self._operations:
            await asyncio.gather(*self._operations, return_exceptions=True)

    def _headers(self, body: bytes) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "X-Self-ID": str(self.self_id),
                   "User-Agent": "gensokyo-idmap/0.1 (OneBot/11)"}
        if self._secret is not None:
            headers["X-Signature"] = sign_body(self._secret, body)
        return headers

    async def _run(self) -> None:
        queue = self.queue
        async with aiohttp.ClientSession(timeout=self._timeout) as session:
            while not self._stop.is_set():
                event = queue.take()
                if event is None:
                    await queue.wait_ready()  # or close() ended it
                    continue
                body = queue.encoded(event)
                if body is None:  # cannot be sent at all: dropped (logged), the queue moves on
                    self.failed += 1
                    continue
                queue.settle(await self._post(session, event, body))

    def _quick_operation(self, event: dict[str, Any], reply: bytes) -> None:
        try:
            operation = jsonio.loads(reply)
        except (ValueError, RecursionError):
            log.warning("[onebot] http post answer is not JSON; ignored", url=self.url)
            return
        if not isinstance(operation, dict) or not operation:
            return
        if self._on_quick_operation is None:
            log.info("[onebot] quick operation ignored (no action service)", url=self.url)
            return
        task = asyncio.create_task(self._run_quick_operation(event, operation))
        self._operations.add(task)
        task.add_done_callback(self._operations.discard)

    async def _run_quick_operation(self, event: dict[str, Any],
                                   operation: dict[str, Any]) -> None:
        assert self._on_quick_operation is not None
        try:
            await self._on_quick_operation(event, operation)
        except IdmapError as err:
            log.warning("[onebot] quick operation failed", url=self.url, reason=err.message)

    async def _post(self, session: aiohttp.ClientSession, event: dict[str, Any],
                    body: bytes) -> bool:
        for attempt in range(1, self._attempts + 1):
            try:
                async with session.post(self.url, data=body, headers=self._headers(body)) as resp:
                    if resp.status < 500:
                        reply = await resp.read()
                        if resp.status >= 400:
                            log.warning("[onebot] http post refused", url=self.url,
                                        status=resp.status)
                        elif reply.strip():
                            self._quick_operation(event, reply)
                        self.delivered += resp.status < 400
                        return resp.status < 400
                    log.warning("[onebot] http post failed", url=self.url, status=resp.status,
                                attempt=attempt)
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                log.warning("[onebot] http post failed", url=self.url,
                            error=type(exc).__name__, attempt=attempt)
            if attempt < self._attempts:
                await asyncio.sleep(self._retry_delay * attempt)
        self.failed += 1
        log.error("[onebot] http post gave up on an event", url=self.url,
                  post_type=event.get("post_type"))
        return False
