"""Events handed over one at a time (webhook callbacks), processed a turn of the loop at a time.

:meth:`~gensokyo_idmap.bridge.inbound.InboundPipeline.process_batch` costs per batch what a
known user's event mostly costs: a task, one look at the claims, one wait for identities and
message ids, one wait for the frameworks' confirmation, one claims commit. The gateway hands
it every frame of one read; a webhook hands over one event per callback, and under a flood
(the platform keeps many callbacks in flight) paid all of it per event.

Rules:

1. **A batch is what arrived during one turn of the event loop**, started once that turn
   ends: nobody waits for a later callback, and a lone one goes alone, as before. Batches
   run concurrently (the pipeline keeps each chat's order across them).
2. **Each caller hears its batch's outcome**: its await returns once every event of the
   batch was processed (delivered or durably owed, claims committed: the webhook then
   acknowledges), and raises what the batch raised (the webhook answers 5xx, the platform
   sends the event again; those of the batch that were processed are known repeats then).
3. **A caller that stops waiting** (its HTTP request went away) stops nothing: its batch
   goes on for the others, and an event processed without its acknowledgement is a known
   repeat when the platform sends it again.
4. **Nothing started is abandoned on a stop**: :meth:`TurnBatches.drain` waits for the
   batches under way (the daemon calls it after the webhook server stopped taking callbacks,
   before the stores close).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

__all__ = ["TurnBatches"]

E = TypeVar("E")


class TurnBatches(Generic[E]):
    """``await batches(event)``: ``event`` processed with those of the same loop turn."""

    def __init__(self, process_batch: Callable[[Sequence[E]], Awaitable[None]]) -> None:
        self._process_batch = process_batch
        self._events: list[E] = []
        self._waiting: list[asyncio.Future[None]] = []
        self._under_way: set[asyncio.Task[None]] = set()  # held: the loop keeps tasks weakly

    def __call__(self, event: E) -> asyncio.Future[None]:
        """A future (the caller's own: cancelling it cancels nothing else) done once the
        batch holding ``event`` was processed."""
        loop = asyncio.get_running_loop()
        if not self._events:
            loop.call_soon(self._start)
        self._events.append(event)
        done: asyncio.Future[None] = loop.create_future()
        self._waiting.append(done)
        return done

    def add_all(self, events: Sequence[E]) -> asyncio.Future[None]:
        """As a call for each of ``events`` (all in one batch), with one future for them."""
        loop = asyncio.get_running_loop()
        if not self._events:
            loop.call_soon(self._start)
        self._events.extend(events)
        done: asyncio.Future[None] = loop.create_future()
        self._waiting.append(done)
        return done

    def _start(self) -> None:
        events, waiting = self._events, self._waiting
        self._events, self._waiting = [], []
        if events:
            task = asyncio.get_running_loop().create_task(self._process(events, waiting))
            self._under_way.add(task)
            task.add_done_callback(self._under_way.discard)

    async def _process(self, events: list[E], waiting: list[asyncio.Future[None]]) -> None:
        try:
            await self._process_batch(events)
        except asyncio.CancelledError:  # the loop is ending: so is every wait for it
            for done in waiting:
                done.cancel()
            raise
        except Exception as exc:  # noqa: BLE001 - every caller hears it (rule 2)
            for done in waiting:
                if not done.done():
                    done.set_exception(exc)
                    done.exception()  # retrieved here: a caller that left cannot
            return
        for done in waiting:
            if not done.done():
                done.set_result(None)

    async def drain(self) -> None:
        """Start what this turn handed over, then wait for every batch under way (rule 4)."""
        self._start()
        while self._under_way:
            await asyncio.gather(*self._under_way, return_exceptions=True)
