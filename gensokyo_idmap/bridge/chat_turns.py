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
from collections.abc import Callable, Iterable
from typing import Any

from gensokyo_idmap.tables import Named, compacted, estimate

__all__ = ["ChatTurns", "wait_all"]


class ChatTurns:
    """The queue of turns of every chat that has events in flight.

    ``async with turns.turn(chat):`` waits for ``chat``'s turn and holds it for the block;
    ``turns.turn(a, b, ...)`` does so for several chats at once (a batch of events of
    several chats), queueing on all of them in one step, so two batches can never wait on
    each other in a cycle.
    """

    def __init__(self) -> None:
        # chat → the future of its newest turn (done once that turn ended)
        self._tails: dict[str, asyncio.Future[None]] = {}

    def __len__(self) -> int:
        """Chats with a turn in flight (0 once every chat is idle)."""
        return len(self._tails)

    def memory_tables(self) -> list[Named]:
        return [("chat_turns", self)]

    def forget(self) -> None:
        """Nothing to forget: a chat leaves the table as its last turn ends
        (:mod:`gensokyo_idmap.tables`); its hash table is shrunk after a flood of chats."""
        self._tails = compacted(self._tails)

    def footprint(self) -> int:
        return estimate(len(self._tails), (self._tails,), self._tails.items())

    def turn(self, *chats: str | None) -> _Turn:
        """The next turn of each of ``chats`` (None: no chat, nothing to wait for)."""
        return _Turn(self, tuple(dict.fromkeys(c for c in chats if c is not None)))

    def _end(self, chats: tuple[str, ...], turn: asyncio.Future[None]) -> None:
        _resolve(turn)
        tails = self._tails
        for chat in chats:
            if tails.get(chat) is turn:
                del tails[chat]  # nobody queued behind it: forget the chat


class _Turn:
    """One turn (of one event, or of a batch) in its chats: one future for all of them, so
    whoever queued behind it in any of them goes on once the whole block ended (a plain
    class: cheaper than a generator-based one)."""

    __slots__ = ("_chats", "_mine", "_turns")

    def __init__(self, turns: ChatTurns, chats: tuple[str, ...]) -> None:
        self._turns = turns
        self._chats = chats
        self._mine: asyncio.Future[None] | None = None

    async def __aenter__(self) -> None:
        chats = self._chats
        if not chats:
            return
        tails = self._turns._tails
        loop = asyncio.get_running_loop()
        mine: asyncio.Future[None] = loop.create_future()
        self._mine = mine
        before: list[asyncio.Future[None]] = []
        for chat in chats:
            tail = tails.get(chat)
            tails[chat] = mine
            if tail is not None and not tail.done():
                before.append(tail)
        if not before:
            return
        waiter: asyncio.Future[None] = loop.create_future()
        _when_all_done(before, lambda: _resolve(waiter))
        try:
            await waiter  # cancellation cancels this private waiter only
        except BaseException:
            # cancelled before its turn: hand the turn on once the ones before ended, so
            # nothing behind this event overtakes one still running
            _when_all_done(before, lambda: self._turns._end(chats, mine))
            raise

    async def __aexit__(self, *exc: object) -> None:
        if self._mine is not None:
            self._turns._end(self._chats, self._mine)


def _when_all_done(futures: list[asyncio.Future[None]], then: Callable[[], None]) -> None:
    """Call ``then`` once every one of ``futures`` is done."""
    remaining = len(futures)

    def one_done(_: asyncio.Future[None]) -> None:
        nonlocal remaining
        remaining -= 1
        if remaining == 0:
            then()

    for future in futures:
        future.add_done_callback(one_done)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def wait_all(futures: Iterable[asyncio.Future[Any]], timeout: float) -> None:
    """Return once every future is done, or after ``timeout`` seconds, whichever is first.

    ``asyncio.wait`` does the same but wraps each future and builds two sets per call. Here
    the newest pending future is waited for first, then whatever is still pending: the
    futures of a batch are a queue's writes, done in order, so once the newest is done the
    rest are too, and a batch costs one callback instead of one per event.
    """
    pending = [f for f in futures if not f.done()]
    if not pending:
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while pending:
        newest = pending[-1]
        woken: asyncio.Future[None] = loop.create_future()

        def wake(_: asyncio.Future[Any], woken: asyncio.Future[None] = woken) -> None:
            _resolve(woken)

        newest.add_done_callback(wake)
        timer = loop.call_at(deadline, _resolve, woken)
        try:
            await woken
        finally:
            timer.cancel()
            newest.remove_done_callback(wake)
        if not newest.done():
            return  # the deadline passed
        pending = [f for f in pending if not f.done()]
