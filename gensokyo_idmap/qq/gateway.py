"""WebSocket gateway client of the QQ bot platform (reference qq-platform.md §2).

Rules:

1. **Session flow**: Hello (op 10) → Identify (op 2, token ``QQBot <access token>``,
   intents, the daemon's shard ``[index, count]``, default ``[0, 1]``) → READY;
   heartbeats (op 1 with the last seq) every ``heartbeat_interval``; op 7 Reconnect →
   reconnect and Resume; op 9 Invalid Session → forget the session and Identify afresh.
2. **Nothing processed is lost to a crash, nothing is skipped**: the session id and the seq
   of the last dispatch *whose processing finished* are saved (atomically, to a small file,
   or to PostgreSQL: a :class:`SessionStore`, one session per shard),
   at most every ``save_interval`` seconds (the file write is a quarter of the loop's time
   when done per event) and always when the connection ends. The saved seq is never ahead
   of what was processed; after a crash it may lag by that interval, and the platform then
   replays those few events again (never lost; the pipeline knows them from their durable
   claims and skips them, see ``runtime.claims``). After a drop or a restart
   the client Resumes from there; if the platform refuses the Resume (op 9, close 4006 /
   4007 / 49xx) it Identifies afresh.
3. **Close codes**: 4004 drops the access token before retrying; 4009 keeps the session;
   4001/4002/4010–4014/4914/4915 are fatal: the client stops and says why.
4. **Backoff**: reconnects wait ``reconnect_delay``, doubling up to ``max_delay`` while it
   keeps failing; a READY or RESUMED resets it.
5. **Dispatches are processed in batches, concurrently, acknowledged in order**: the
   events read in one turn of the event loop (all the frames one socket read brought) go
   to the pipeline as one batch, in one task: a task, an identity wait and a socket wait
   per event were most of an event's cost. Batches run concurrently (at most
   ``max_in_flight`` events in all, 64: more only queue behind their chat's turn), so one
   batch's durable commit (its new people) holds up only its own events and those of its
   chats after it (the pipeline keeps each chat's events in arrival order); the saved seq
   is the *watermark*, the highest seq whose event and every earlier one finished. A
   batch whose processing failed stops the watermark and restarts the connection, so the
   platform replays it.
6. **A failed batch pauses reading, it does not churn the platform**: a batch fails when a
   store cannot take it (PostgreSQL or Redis down, a full disk), and replaying it at once
   fails again. So the reader stops (heartbeats go on: the session stays alive), waits
   ``reconnect_delay``, doubling with each failure in a row up to ``max_delay`` (a batch
   processed resets it; a READY or RESUMED does not), and then, if it was given the
   ``backends`` probe, until every server answers (asked every ``reconnect_delay``, doubling
   up to :data:`PROBE_MAX_INTERVAL`). Only then does it Resume and take the replay: one
   Resume per outage, the pause and the end of it logged once each.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Final, Literal, NamedTuple, Protocol, TypeAlias

import aiohttp
import structlog

from gensokyo_idmap import counters, jsonio
from gensokyo_idmap.errors import BadInputError, PlatformError
from gensokyo_idmap.qq.events import QQEvent, Ready, Resumed, parse_dispatch, parse_envelope
from gensokyo_idmap.qq.token import AccessTokenManager

__all__ = ["DEFAULT_INTENTS", "FATAL_CLOSE_CODES", "PROBE_MAX_INTERVAL", "BackendProbe",
           "GatewayClient", "GatewayState", "SessionStore", "discover_gateway",
           "discover_gateway_retrying"]

log = structlog.get_logger("gensokyo_idmap.qq.gateway")

DEFAULT_INTENTS: Final = 1 << 25  # GROUP_AND_C2C_EVENT
FATAL_CLOSE_CODES: Final = frozenset({4001, 4002, 4010, 4011, 4012, 4013, 4014, 4914, 4915})
_FORGET_SESSION_CODES: Final = frozenset({4006, 4007, *range(4900, 4914)})
#: The gateway connection: text frames handed over as bytes (``decode_text=False``).
_Socket: TypeAlias = "aiohttp.ClientWebSocketResponse[Literal[False]]"


#: ``gensokyo_events_in`` of this transport, counted as each batch goes to the pipeline.


#: While reading is paused for the backends, they are asked again after ``reconnect_delay``,
#: twice as long each time up to this: a local ``select 1`` / ``PING`` is cheap, and the
#: replay starts at most this long after the servers answer again.
PROBE_MAX_INTERVAL: Final = 5.0

#: What stands in the way of processing events now: one line per server that does not
#: answer (``health.server_problems``), empty when every one does.
BackendProbe: TypeAlias = Callable[[], Awaitable[list[str]]]


class _Saved(NamedTuple):
    session_id: str | None
    seq: int | None


class SessionStore(Protocol):
    """Where a shard's session id and watermark seq are kept between connections and
    restarts: :class:`GatewayState` (a file), or PostgreSQL
    (:class:`~gensokyo_idmap.store.postgres.gateway_session.PgGatewaySession`)."""

    def load(self) -> tuple[str | None, int | None]:
        """(session id, seq) saved last, (None, None) if none was."""
        ...

    def save(self, session_id: str | None, seq: int | None) -> bool:
        """Keep this state (called from the event loop: must not wait for I/O long)."""
        ...


async def discover_gateway(
    session: aiohttp.ClientSession, api_base: str, tokens: AccessTokenManager
) -> str:
    """``GET {api_base}/gateway/bot`` → the WebSocket URL to dial."""
    headers = {"Authorization": await tokens.authorization(), "X-Union-Appid": tokens.app_id}
    try:
        async with session.get(f"{api_base}/gateway/bot", headers=headers) as resp:
            if resp.status == 401:
                tokens.invalidate()
            data = await resp.json(content_type=None)
    except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as exc:
        raise PlatformError(
            f"gateway discovery at {api_base} failed: {type(exc).__name__}") from None
    url = data.get("url") if isinstance(data, dict) else None
    if not isinstance(url, str) or not url.startswith(("ws://", "wss://")):
        raise PlatformError(f"gateway discovery at {api_base} gave no ws URL (HTTP {resp.status})")
    return url


#: Gateway discovery that failed is retried after 1 s, then twice as long each time up to a
#: minute: the platform's API may be down for a while, and the daemon waits it out.
DISCOVERY_FIRST_DELAY: Final = 1.0
DISCOVERY_MAX_DELAY: Final = 60.0


async def discover_gateway_retrying(
    session: aiohttp.ClientSession, api_base: str, tokens: AccessTokenManager
) -> str:
    """:func:`discover_gateway` until it answers, each failure logged, with a growing
    delay between tries."""
    delay = DISCOVERY_FIRST_DELAY
    while True:
        try:
            return await discover_gateway(session, api_base, tokens)
        except PlatformError as err:
            log.warning("[qq] gateway discovery failed", app_id=tokens.app_id,
                        reason=err.message, retry_in=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, DISCOVERY_MAX_DELAY)


class GatewayState:
    """Session id and last processed seq, in one small JSON file replaced atomically.

    The file names its shard: a session saved for another shard (the daemon's ``qq.shard``
    was changed) is not resumed. A file without one (older versions) is shard ``[0, 1]``.
    """

    def __init__(self, path: str | os.PathLike[str], shard: tuple[int, int] = (0, 1)) -> None:
        self.path = Path(path)
        self.shard = shard
        self._scratch = self.path.with_name(self.path.name + ".tmp")
        self._folder_made = False  # saved up to 20 times a second: mkdir once, not each time

    def load(self) -> _Saved:
        try:
            data = jsonio.loads(self.path.read_text(encoding="utf-8"))
            session, seq = data.get("session_id"), data.get("seq")
            if (isinstance(session, str) or session is None) and (
                    isinstance(seq, int) or seq is None) and (
                    data.get("shard", [0, 1]) == list(self.shard)):
                return _Saved(session, seq)
        except (OSError, ValueError, AttributeError):
            pass
        return _Saved(None, None)

    def save(self, session_id: str | None, seq: int | None) -> bool:
        """Written then renamed: a crash leaves the old state or the new one, never half.

        A file that cannot be written (a full disk) keeps the old state: the platform then
        sends again what came after it, which is a repeat, never a loss. Whether it was saved.
        """
        try:
            if not self._folder_made:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._folder_made = True
            self._scratch.write_text(jsonio.dumps({"session_id": session_id, "seq": seq,
                                                   "shard": list(self.shard)}),
                                     encoding="utf-8")
            os.replace(self._scratch, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                self._scratch.unlink(missing_ok=True)
            log.warning("[qq] gateway state not saved: events after the saved seq may come "
                        "again", path=str(self.path), seq=seq, reason=exc.strerror)
            return False
        return True


class _Restart(Exception):
    """Leave this connection and connect again (resuming unless the session was dropped)."""


class _Fatal(Exception):
    pass


class GatewayClient:
    def __init__(
        self,
        url: str,
        app_id: str,
        tokens: AccessTokenManager,
        pipeline: Callable[[Sequence[QQEvent]], Awaitable[None]],
        state: SessionStore,
        *,
        intents: int = DEFAULT_INTENTS,
        shard: tuple[int, int] = (0, 1),
        reconnect_delay: float = 1.0,
        max_delay: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        save_interval: float = 0.05,
        max_in_flight: int = 64,
        backends: BackendProbe | None = None,
    ) -> None:
        self.url = url
        self.app_id = app_id
        self.tokens = tokens
        self.pipeline = pipeline
        self.state = state
        self.intents = intents
        self.shard = shard
        self._delay = reconnect_delay
        self._base_delay = reconnect_delay
        self._max_delay = max_delay
        self.session_id, self.seq = state.load()
        self._stop = asyncio.Event()
        self._clock = clock
        self.save_interval = save_interval
        self._saved_at = float("-inf")
        self._save_later: asyncio.TimerHandle | None = None
        self.max_in_flight = max_in_flight
        # seq → finished?, in arrival order: the front finished ones make the watermark
        self._pending: OrderedDict[int, bool] = OrderedDict()
        # batch task → how many events it carries
        self._tasks: dict[asyncio.Task[None], int] = {}
        # events read in this turn of the loop, and the call that hands them over after it
        self._batch: list[tuple[QQEvent, int | None]] = []
        self._batch_start: asyncio.Handle | None = None
        self._in_flight = 0  # events batched or in a batch task, not finished yet
        # set while the reader waits for a free slot; the next task to finish resolves it
        # (asyncio.wait over all tasks in flight would cost O(in flight) per event)
        self._slot_freed: asyncio.Future[None] | None = None
        self._failed: BaseException | None = None
        # resolved by the first batch of a connection that fails: reading pauses
        self._failing: asyncio.Future[None] | None = None
        self._backends = backends
        self._failures = 0  # batches failed in a row (each one a pause)
        # the first seq that failed: once the watermark passes it, the failures are over
        # (events of other batches that went through meanwhile do not say so)
        self._blocked_at: int | None = None
        self._resume_at_once = False  # the pause waited already: no reconnect delay
        self.pauses = 0
        self.identifies = 0
        self.resumes = 0
        self.fatal: str | None = None
        #: a session is established (READY or RESUMED) on the open connection; reading
        #: is paused (rule 6): what readiness reports
        self.connected = False
        self.paused = False
        #: every line names the bot (and its shard, when the bot has several)
        self._log = log.bind(app_id=app_id, **({"shard": list(shard)} if shard[1] > 1 else {}))
        #: ``gensokyo_events_in`` of this bot's gateway
        self._received = counters.EVENTS_IN.labels("gateway", app_id)

    async def close(self) -> None:
        self._stop.set()

    async def run(self, session: aiohttp.ClientSession) -> None:
        """Connect, and reconnect, until closed or a fatal close code."""
        while not self._stop.is_set():
            try:
                # frames as bytes: aiohttp's own UTF-8 check closes the connection on a frame
                # that is not UTF-8 (1007), and the Resume replays it for ever; parsing
                # repairs such text instead (qq/events), and skips a decode per frame
                async with session.ws_connect(self.url, heartbeat=None,
                                              decode_text=False) as ws:
                    await self._serve(ws)
            except _Fatal as fatal:
                self.fatal = str(fatal)
                self._log.error("[qq] gateway stopped", reason=self.fatal)
                return
            except _Restart:
                pass
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                self._log.warning("[qq] gateway unavailable", error=type(exc).__name__,
                                  retry_in=self._delay)
            if self._stop.is_set():
                return
            if self._resume_at_once:
                self._resume_at_once = False
                continue
            await self._stopped_within(self._delay)
            self._delay = min(self._delay * 2, self._max_delay)

    async def _send(self, ws: _Socket, op: int, d: Any) -> None:
        await ws.send_str(jsonio.dumps({"op": op, "d": d}))

    async def _serve(self, ws: _Socket) -> None:
        hello = await self._frame(ws)
        if hello.op != 10 or not isinstance(hello.d, dict):
            raise _Restart()
        interval = float(hello.d.get("heartbeat_interval", 45000)) / 1000.0
        token = await self.tokens.authorization()
        if self.session_id is not None:
            self.resumes += 1
            await self._send(ws, 6, {"token": token, "session_id": self.session_id,
                                     "seq": self.seq or 0})
        else:
            self.identifies += 1
            await self._send(ws, 2, {"token": token, "intents": self.intents,
                                     "shard": list(self.shard),
                                     "properties": {"$os": "linux", "$browser": "gensokyo-idmap",
                                                    "$device": "gensokyo-idmap"}})
        beats = asyncio.create_task(self._heartbeats(ws, interval))
        stopping = asyncio.create_task(self._stop.wait())
        reading = asyncio.create_task(self._read_frames(ws))
        self._failing = failing = asyncio.get_running_loop().create_future()
        try:
            done, _ = await asyncio.wait({reading, stopping, failing},
                                         return_when=asyncio.FIRST_COMPLETED)
            if failing in done and not self._stop.is_set():
                reading.cancel()  # read nothing more: the platform replays it all
                await asyncio.gather(reading, return_exceptions=True)
                if not reading.cancelled() and isinstance(reading.exception(), _Fatal):
                    reading.result()
                await self._pause()
                if not self._stop.is_set():
                    self._resume_at_once = True
                    await ws.close()
                    raise _Restart()  # resume from the watermark: the platform replays
            if reading in done:
                reading.result()  # how the connection ended (_Restart, _Fatal, an error)
                return
            reading.cancel()  # stop intake; what is in flight finishes below
            await asyncio.gather(reading, return_exceptions=True)
            await self._finish_in_flight()
            await ws.close()
        finally:
            self.connected = False
            if not reading.done():
                reading.cancel()  # cancelled from outside: the reads must not outlive us
            await asyncio.gather(reading, return_exceptions=True)
            await self._finish_in_flight(cancel=True)
            if self._save_later is not None:
                self._save()  # the connection ends: the file holds the watermark
            beats.cancel()
            stopping.cancel()
            failing.cancel()
            self._failing = None
            await asyncio.gather(beats, stopping, return_exceptions=True)

    async def _pause(self) -> None:
        """A batch failed: read nothing more until it can be replayed (rule 6), or a stop."""
        self._failures += 1
        self.pauses += 1
        self.paused = True
        try:
            await self._paused_until_processable()
        finally:
            self.paused = False

    async def _paused_until_processable(self) -> None:
        delay = min(self._base_delay * 2 ** (self._failures - 1), self._max_delay)
        began = self._clock()
        problems = await self._backends() if self._backends is not None else []
        self._log.warning("[qq] gateway paused: reading stops until the events can be "
                          "processed", failures_in_a_row=self._failures, retry_in=delay,
                          problems=problems or None)
        if await self._stopped_within(delay):
            return
        interval = self._base_delay
        while self._backends is not None and await self._backends():
            if await self._stopped_within(interval):
                return
            interval = min(interval * 2, max(PROBE_MAX_INTERVAL, self._base_delay))
        self._log.info("[qq] gateway resumes reading",
                       paused_seconds=round(self._clock() - began, 1))

    async def _stopped_within(self, seconds: float) -> bool:
        """Wait ``seconds``; whether the client was closed meanwhile."""
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
        except TimeoutError:
            return False
        return True

    async def _read_frames(self, ws: _Socket) -> None:
        """Read and handle frames until the connection ends (one task for the connection,
        not one per frame; cancelled when a batch fails)."""
        while True:
            while self._in_flight >= self.max_in_flight:
                self._slot_freed = asyncio.get_running_loop().create_future()
                try:
                    await self._slot_freed
                finally:
                    self._slot_freed = None
            frame = await self._frame(ws)
            if frame.op in (7, 9):
                await self._reconnect(ws, frame.op)
            self._handle(frame)

    async def _frame(self, ws: _Socket) -> Any:
        message = await ws.receive()
        if message.type == aiohttp.WSMsgType.TEXT:
            try:
                return parse_envelope(message.data)
            except BadInputError as err:
                self._log.warning("[qq] gateway frame ignored", reason=err.message)
                return parse_envelope({"op": -1})
        if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED,
                            aiohttp.WSMsgType.CLOSING):
            self._on_close(ws.close_code)
        raise _Restart()

    def _on_close(self, code: int | None) -> None:
        self._log.info("[qq] gateway closed", code=code)
        if code in FATAL_CLOSE_CODES:
            raise _Fatal(f"the platform closed the gateway with code {code}")
        if code == 4004:
            self.tokens.invalidate()
        if code in _FORGET_SESSION_CODES:
            self._forget_session()

    def _forget_session(self) -> None:
        self.session_id = None
        self.seq = None
        self._blocked_at = None  # a new session: the seqs start again
        self._save()

    async def _heartbeats(self, ws: _Socket, interval: float) -> None:
        while not ws.closed:
            await asyncio.sleep(interval)
            await self._send(ws, 1, self.seq)

    async def _reconnect(self, ws: _Socket, op: int) -> None:
        """Op 7 (reconnect and resume) or op 9 (session invalid: identify afresh)."""
        if op == 7:
            self._log.info("[qq] gateway asks to reconnect")
        else:
            self._log.warning("[qq] gateway session invalid: identifying afresh")
            self._forget_session()
        await ws.close()
        raise _Restart()

    def _handle(self, frame: Any) -> None:
        """Any other frame: a plain function, as it runs for every event."""
        if frame.op != 0:
            if frame.op not in (11, -1):  # 11 heartbeat ACK; -1 a frame already reported
                self._log.info("[qq] gateway op ignored", op=frame.op)
            return
        try:
            event = parse_dispatch(frame, self.app_id)
        except BadInputError as err:
            self._log.warning("[qq] gateway event refused", type=frame.t, reason=err.message)
            self._processed(frame.s)
            return
        if isinstance(event, Ready):
            self.session_id = event.session_id
            self.connected = True
            self._delay = self._base_delay
            self._log.info("[qq] gateway ready", session_id=event.session_id)
        elif isinstance(event, Resumed):
            self.connected = True
            self._delay = self._base_delay
            self._log.info("[qq] gateway resumed", seq=self.seq)
        else:
            self._start(event, frame.s)
            return
        self._processed(frame.s)

    def _start(self, event: QQEvent, seq: int | None) -> None:
        """Batch ``event``: the batch goes to the pipeline once this turn of the loop ends;
        the watermark passes it once that finished."""
        if seq:
            self._pending[seq] = False
        self._batch.append((event, seq))
        self._in_flight += 1
        if self._batch_start is None:
            self._batch_start = asyncio.get_running_loop().call_soon(self._start_batch)

    def _start_batch(self) -> None:
        self._batch_start = None
        batch, self._batch = self._batch, []
        if batch:
            task = asyncio.create_task(self._process(batch))
            self._tasks[task] = len(batch)
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._in_flight -= self._tasks.pop(task, 0)
        if self._slot_freed is not None and not self._slot_freed.done():
            self._slot_freed.set_result(None)

    async def _process(self, batch: list[tuple[QQEvent, int | None]]) -> None:
        try:
            self._received.inc(len(batch))
            await self.pipeline([event for event, _ in batch])  # durable before the seq moves
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - recorded; the connection restarts
            self._log.error("[qq] gateway events not processed (will be replayed)",
                            types=sorted({event.event_type for event, _ in batch}),
                            seqs=[seq for _, seq in batch if seq][:10], events=len(batch),
                            error=type(exc).__name__, reason=str(exc)[:200])
            seqs = [seq for _, seq in batch if seq]
            if seqs:
                self._blocked_at = min(seqs if self._blocked_at is None
                                       else [self._blocked_at, *seqs])
            if self._failed is None:
                self._failed = exc
                if self._failing is not None and not self._failing.done():
                    self._failing.set_result(None)
            return
        if self._blocked_at is None:
            self._failures = 0
        self._processed(*(seq for _, seq in batch))

    async def _finish_in_flight(self, cancel: bool = False) -> None:
        """Let the events in flight finish (on a stop), or cancel them (connection lost:
        they are replayed after the Resume, as the watermark did not pass them)."""
        if self._batch_start is not None:
            self._batch_start.cancel()
            self._batch_start = None
        if cancel:
            self._batch = []  # never handed over: replayed like the cancelled ones
            for task in self._tasks:
                task.cancel()
        else:
            self._start_batch()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        self._in_flight = 0
        self._pending.clear()
        self._failed = None

    def _processed(self, *seqs: int | None) -> None:
        """The dispatches of ``seqs`` finished: move the watermark, save it (throttled)."""
        for seq in seqs:
            if not seq:
                continue
            if self._pending:  # its own entry, or e.g. RESUMED behind events in flight
                self._pending[seq] = True
            else:
                self.seq = seq
            while self._pending:
                front, finished = next(iter(self._pending.items()))
                if not finished:
                    break
                del self._pending[front]
                self.seq = front
        if self._blocked_at is not None and self.seq is not None and self.seq >= self._blocked_at:
            self._blocked_at = None  # the event that failed went through: the stores work
            self._failures = 0
        since = self._clock() - self._saved_at
        if since >= self.save_interval:
            self._save()
        elif self._save_later is None:
            self._save_later = asyncio.get_running_loop().call_later(
                self.save_interval - since, self._save)

    def _save(self) -> None:
        if self._save_later is not None:
            self._save_later.cancel()
            self._save_later = None
        self._saved_at = self._clock()
        self.state.save(self.session_id, self.seq)
