"""Per-chat turns: events of one chat are processed one at a time, in arrival order.

The gateway and the webhook process events concurrently, so a quick event (a known user)
could overtake a slow one of the same chat (a new user waiting for a durable commit). Each
chat therefore has a queue of turns. An ``asyncio.Lock`` per chat did this before, but it
costs a generator-based context manager per event and its ``acquire`` scans every waiter
(``all(w.cancelled() for w in waiters)``), which under a flood of one busy group made the
lock the largest single cost of an event. A turn here is one future per event, chained to
the previous turn of its chat: O(1) whatever the queue length.

A cancelled event (its connection was lost) passes its turn on only once the turn before it
has ended, so a later event of the chat can never overtake an earlier one that is still
running.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

__all__ = ["ChatTurns", "wait_all"]


class ChatTurns:
    """The queue of turns of every chat that has events in flight.

    ``async with turns.turn(chat):`` waits for ``chat``'s turn and holds it for the block.
    """

    def __init__(self) -> None:
        # chat → the future of its newest turn (done once that turn ended)
        self._tails: dict[str, asyncio.Future[None]] = {}

    def __len__(self) -> int:
        """Chats with a turn in flight (0 once every chat is idle)."""
        return len(self._tails)

    def turn(self, chat: str | None) -> _Turn:
        """The next turn of ``chat`` (None: no chat, nothing to wait for)."""
        return _Turn(self, chat)

    def _end(self, chat: str, turn: asyncio.Future[None]) -> None:
        _resolve(turn)
        if self._tails.get(chat) is turn:
            del self._tails[chat]  # nobody queued behind it: forget the chat


class _Turn:
    """One event's turn in its chat (a plain class: cheaper than a generator-based one)."""

    __slots__ = ("_chat", "_mine", "_turns")

    def __init__(self, turns: ChatTurns, chat: str | None) -> None:
        self._turns = turns
        self._chat = chat
        self._mine: asyncio.Future[None] | None = None

    async def __aenter__(self) -> None:
        chat = self._chat
        if chat is None:
            return
        tails = self._turns._tails
        loop = asyncio.get_running_loop()
        before = tails.get(chat)
        mine: asyncio.Future[None] = loop.create_future()
        self._mine = tails[chat] = mine
        if before is not None and not before.done():
            waiter: asyncio.Future[None] = loop.create_future()
            before.add_done_callback(lambda _: _resolve(waiter))
            try:
                await waiter  # cancellation cancels this private waiter only
            except BaseException:
                # cancelled before its turn: hand the turn on once the one before ended,
                # so nothing behind this event overtakes the one still running
                before.add_done_callback(lambda _: self._turns._end(chat, mine))
                raise

    async def __aexit__(self, *exc: object) -> None:
        if self._chat is not None and self._mine is not None:
            self._turns._end(self._chat, self._mine)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def wait_all(futures: Iterable[asyncio.Future[Any]], timeout: float) -> None:
    """Return once every future is done, or after ``timeout`` seconds, whichever is first.

    ``asyncio.wait`` does the same but wraps each future and builds two sets per call; on
    the inbound path, where one event usually waits for one socket write that is already
    done, that was a measurable share of an event's cost.
    """
    pending = [f for f in futures if not f.done()]
    if not pending:
        return
    loop = asyncio.get_running_loop()
    all_done: asyncio.Future[None] = loop.create_future()
    remaining = len(pending)

    def one_done(_: asyncio.Future[Any]) -> None:
        nonlocal remaining
        remaining -= 1
        if remaining == 0:
            _resolve(all_done)

    for future in pending:
        future.add_done_callback(one_done)
    timer = loop.call_later(timeout, _resolve, all_done)
    try:
        await all_done
    finally:
        timer.cancel()
        for future in pending:
            future.remove_done_callback(one_done)
