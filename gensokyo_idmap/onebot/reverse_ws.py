"""Reverse WebSocket (Universal role): we dial the framework, push events, answer actions.

Rules (reference onebot-v11.md §1.4):

1. **Handshake**: ``X-Self-ID``, ``X-Client-Role: Universal``, ``User-Agent``, and
   ``Authorization: Bearer <token>`` when a token is set (the token is never logged). A
   framework that takes the TCP connection but never answers the upgrade (frozen) counts as
   unavailable after ``ping_timeout`` seconds.
2. **Per connection** (:func:`serve_socket`): ``lifecycle/connect`` first, then the queued
   events in order, confirmed by ping/pong, and a heartbeat meta event every
   ``heartbeat_interval`` seconds; no pong within ``ping_timeout``: the connection is closed
   (dropped if need be) and dialled again.
3. **Nothing confirmed is lost, nothing unconfirmed is forgotten**: when a connection ends,
   the events it had in flight go back to the front of the queue and are sent again on the
   next one (a framework may see an event twice after a fault, never miss one).
4. **Never blocks the platform side**: :meth:`publish_tracked` only queues. Beyond the
   bounded queue, events wait in ``outbox.db`` (the backlog the daemon hands in:
   :class:`~gensokyo_idmap.bridge.outbox.Backlog`) and come back in order; without a backlog the
   oldest is dropped (logged, counted).
5. **Reconnects forever**, every ``reconnect_interval`` seconds, until :meth:`close`; an
   outage is logged once, then retried quietly.
6. **A refused token is named.** A framework answering the handshake 401 or 403 refuses
   our access token (or wants one, when none is set): that is a warning saying so, with the
   URL (never the token), once each time the link comes to that state (connected, or out
   for another reason, and refused again logs again; refusal after refusal does not), and
   :attr:`ReverseWsClient.problem` says it for the console until a connection succeeds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Final

import aiohttp
import structlog

from gensokyo_idmap.onebot.connection import ActionHandler, serve_socket
from gensokyo_idmap.onebot.event_queue import (
    DEFAULT_QUEUE,
    DEFAULT_WINDOW,
    EventQueue,
    MakeBacklog,
    Tracked,
)
from gensokyo_idmap.onebot.status import StatusSource, unknown
from gensokyo_idmap.redaction import redact_url

__all__ = ["ActionHandler", "ReverseWsClient"]

log = structlog.get_logger("gensokyo_idmap.onebot.reverse_ws")

USER_AGENT: Final = "gensokyo-idmap/0.1 (OneBot/11)"
#: What a framework answers a handshake whose token it refuses (rule 6).
REFUSED_STATUSES: Final = frozenset({401, 403})


class ReverseWsClient:
    """One reverse-WS connection to one framework URL."""

    def __init__(
        self,
        url: str,
        self_id: int,
        *,
        access_token: str | None = None,
        reconnect_interval: float = 3.0,
        heartbeat_interval: float = 5.0,
        ping_timeout: float = 10.0,
        queue_size: int = DEFAULT_QUEUE,
        window: int = DEFAULT_WINDOW,
        backlog: MakeBacklog | None = None,
        on_action: ActionHandler | None = None,
        clock: Callable[[], float] = time.time,
        confirm_on_write: bool = False,
        outbox_name: str | None = None,
        status: StatusSource = unknown,
    ) -> None:
        """``outbox_name``: what its owed events are kept under in outbox.db (default
        ``reverse_ws <url>``; a daemon of several bots names each bot's apart); ``status``:
        its bot's, which each heartbeat says (the daemon's: :mod:`~.status`)."""
        self.url = url
        self.self_id = self_id
        self._outbox_name = outbox_name or f"reverse_ws {url}"
        self._token = access_token
        self.reconnect_interval = reconnect_interval
        self.heartbeat_interval = heartbeat_interval
        self.ping_timeout = ping_timeout
        self.queue = EventQueue(queue_size, url, window=window,
                                confirm_on_write=confirm_on_write)
        self.backlog = backlog(self.outbox_name, self.queue) if backlog is not None else None
        self._on_action = on_action
        self._clock = clock
        self._status = status
        self._closed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: what the link came to last: "connected", "refused" or "unavailable" (rule 6)
        self._state = "starting"
        #: the HTTP status of the framework's refusal while it lasts (rule 6), else None
        self.refused: int | None = None
        self.connected = asyncio.Event()
        self.connects = 0

    @property
    def dropped(self) -> int:
        return self.queue.dropped

    @property
    def outbox_name(self) -> str:
        return self._outbox_name

    @property
    def problem(self) -> str | None:
        """Why the framework refuses the connection (rule 6), for the console; else None."""
        if self.refused is None:
            return None
        return f"{self._refusal()} (HTTP {self.refused})"

    def _refusal(self) -> str:
        return ("the framework refused our access token" if self._token else
                "the framework wants an access token and none is set")

    def _worth_waiting(self) -> bool:
        """Connected and answering pings: its confirmation is worth a wait."""
        return self.connected.is_set() and not self.queue.lagging(
            asyncio.get_running_loop().time())

    def publish(self, event: dict[str, Any]) -> asyncio.Future[bool] | None:
        """Queue an event (no outbox); the future only while it is worth a wait (otherwise
        nobody should wait for it): it turns True once the framework confirmed the event."""
        future = self.queue.publish(event)
        return future if self._worth_waiting() else None

    def publish_tracked(self, event: dict[str, Any], key: str | None) -> Tracked:
        """Queue an event through the backlog (see
        :data:`~gensokyo_idmap.onebot.event_queue.Tracked`)."""
        assert self.backlog is not None, "publish_tracked needs a backlog"
        return self.backlog.publish(event, key, self._worth_waiting())

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(),
                                             name=f"reverse-ws {self.url} {self.self_id}")
        if self.backlog is not None:
            self.backlog.start()

    async def drain(self, timeout: float) -> None:
        """While connected, give queued events up to ``timeout`` seconds to be confirmed."""
        deadline = asyncio.get_running_loop().time() + timeout
        while len(self.queue) and self.connected.is_set():
            if asyncio.get_running_loop().time() >= deadline:
                return
            await asyncio.sleep(0.01)

    async def close(self) -> None:
        """Stop reconnecting and close the connection with a proper close frame.

        While not connected the task is dialling (a name lookup or a connect that may take
        minutes when the framework's host is unreachable) or waiting to retry: it is
        cancelled, so a stop never waits for the network.
        """
        self._closed.set()
        self.queue.wake()
        if self._task is not None:
            if not self.connected.is_set():
                self._task.cancel()
            await asyncio.wait([self._task])
            if not self._task.cancelled():
                self._task.result()  # a failure of the task is still the caller's to see
        if self.backlog is not None:
            await self.backlog.close()

    def _headers(self) -> dict[str, str]:
        headers = {"X-Self-ID": str(self.self_id), "X-Client-Role": "Universal",
                   "User-Agent": USER_AGENT}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        return headers

    async def _run(self) -> None:
        async with aiohttp.ClientSession() as session:
            while not self._closed.is_set():
                try:
                    ws = await asyncio.wait_for(
                        session.ws_connect(self.url, headers=self._headers(), heartbeat=None,
                                           autoping=False),
                        self.ping_timeout)
                    async with ws:
                        self.connects += 1
                        self._state, self.refused = "connected", None
                        log.info("[onebot] reverse ws connected", url=redact_url(self.url),
                                 self_id=self.self_id)
                        await serve_socket(ws, self.queue, self_id=self.self_id,
                                           heartbeat_interval=self.heartbeat_interval,
                                           ping_timeout=self.ping_timeout,
                                           on_action=self._on_action, clock=self._clock,
                                           stop=self._closed, name=self.url,
                                           on_open=self.connected.set,
                                           status=self._status)
                except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                    self._failed(exc)
                finally:
                    self.connected.clear()
                    self.queue.requeue()  # unconfirmed: sent again on the next connection
                if self._closed.is_set():
                    break
                try:
                    await asyncio.wait_for(self._closed.wait(), self.reconnect_interval)
                except TimeoutError:
                    pass

    def _failed(self, exc: BaseException) -> None:
        """Log a failed dial: loud when the link comes to this state, quiet while it stays
        (rules 5 and 6); a refused handshake says what the framework answered (401/403:
        the token, rule 6; 404: the path)."""
        status = exc.status if isinstance(exc, aiohttp.ClientResponseError) else None
        state = "refused" if status in REFUSED_STATUSES else "unavailable"
        report = log.warning if state != self._state else log.debug
        self._state = state
        if state == "refused":
            self.refused = status
            report(f"[onebot] reverse ws refused: {self._refusal()}",
                   url=redact_url(self.url), self_id=self.self_id, status=status,
                   retry_in=self.reconnect_interval)
            return
        self.refused = None
        report("[onebot] reverse ws unavailable", url=redact_url(self.url),
               self_id=self.self_id, error=type(exc).__name__, status=status,
               retry_in=self.reconnect_interval)
