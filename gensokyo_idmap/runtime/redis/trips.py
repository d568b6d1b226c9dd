"""Round trips to Redis shared by the calls made while one is out (runtime state on Redis).

A daemon under a flood of one-event webhook calls asks Redis the same few things for each
event: is it claimed (and mark it in flight), store its message id, record its claim. Each
ask is a round trip, and a round trip's Python cost in redis-py (~120 us of CPU here) was
most of an event's. Two layers share them:

- :class:`Together`: calls of one kind made while one is on the wire go out together in
  the next, as one request (the message ids of many events in one script);
- :class:`ScriptTrips`: the scripts of every kind asked for while a round trip is out go
  in the next one, as one pipeline (marks, stores and claims together).

The sending is a task of its own, so no caller waits for later calls after its own answer
came, and batches go out one at a time in the order their calls came (what each chat's
order rests on).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

import redis
from redis.commands.core import AsyncScript

from gensokyo_idmap.runtime.redis.connection import RedisRuntime

__all__ = ["ScriptTrips", "Together", "concatenated", "distinct", "own", "whole"]

A = TypeVar("A")
R = TypeVar("R")
P = TypeVar("P")

Call = tuple[str, list[str | int]]  # a script's Lua source and its arguments


class Together(Generic[A, R, P]):
    """Calls made while one is on the wire go out together in the next.

    ``send`` takes what every caller of a batch asked for at once (``combine``); each
    caller gets ``part(answer, where its request starts in the combined one, its
    request)``, or the exception ``part`` raised for it. A batch whose ``send`` fails fails
    each of its callers with the same exception."""

    def __init__(self, send: Callable[[list[A]], Awaitable[R]],
                 combine: Callable[[list[list[A]]], list[A]],
                 part: Callable[[R, int, list[A]], P]) -> None:
        self._send = send
        self._combine = combine
        self._part = part
        self._queue: list[tuple[list[A], asyncio.Future[P]]] = []
        self._sender: asyncio.Task[None] | None = None

    async def __call__(self, request: list[A]) -> P:
        loop = asyncio.get_running_loop()
        if self._sender is not None and self._sender.get_loop() is not loop:
            self._sender, self._queue = None, []  # a loop that ended uncleanly (tests)
        answer: asyncio.Future[P] = loop.create_future()
        self._queue.append((request, answer))
        if self._sender is None:
            self._sender = asyncio.create_task(self._send_all())
        return await answer

    async def _send_all(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                try:
                    result = await self._send(self._combine([request for request, _ in batch]))
                except Exception as exc:  # noqa: BLE001 - each caller decides (softly)
                    for _, answer in batch:
                        if not answer.done():
                            answer.set_exception(exc)
                    continue
                start = 0
                for request, answer in batch:
                    try:
                        outcome = self._part(result, start, request)
                    except Exception as exc:  # noqa: BLE001 - this caller's own failure
                        if not answer.done():
                            answer.set_exception(exc)
                    else:
                        if not answer.done():
                            answer.set_result(outcome)
                    start += len(request)
        finally:
            self._sender = None
            for _, answer in self._queue:  # cancelled (the loop ends): nobody hangs
                answer.cancel()
            self._queue = []


def distinct(requests: list[list[str]]) -> list[str]:
    """Every key asked for, once (claims: each caller reads its own from the answer)."""
    return list(dict.fromkeys(key for keys in requests for key in keys))


def whole(result: R, start: int, request: list[str]) -> R:
    return result


def concatenated(requests: list[list[A]]) -> list[A]:
    return [item for request in requests for item in request]


def own(result: list[R], start: int, request: list[A]) -> list[R]:
    """The answers to one caller's items (the combined answer is in item order)."""
    return result[start:start + len(request)]


def _answer(results: list[Any], start: int, request: list[Call]) -> Any:
    """One script's result, or the error Redis gave for it (that caller's alone)."""
    result = results[start]
    if isinstance(result, Exception):
        raise result
    return result


class ScriptTrips:
    """Scripts (``EVALSHA``) on the asyncio client of the running loop; those asked for
    while one round trip is out go together in the next, as one pipeline. A script whose
    call failed in Redis (an error it raised) fails its caller only; a connection that
    failed fails every caller of that trip."""

    def __init__(self, runtime: RedisRuntime) -> None:
        self._runtime = runtime
        # made with the first asyncio client (each call names its client)
        self._scripts: dict[str, AsyncScript] = {}
        self._trips: Together[Call, list[Any], Any] = Together(self._send, concatenated,
                                                               _answer)

    async def run(self, lua: str, args: list[str | int]) -> Any:
        return await self._trips([(lua, args)])

    def _script(self, client: redis.asyncio.Redis, lua: str) -> AsyncScript:
        script = self._scripts.get(lua)
        if script is None:
            script = self._scripts[lua] = client.register_script(lua)
        return script

    async def _send(self, calls: list[Call]) -> list[Any]:
        client = await self._runtime.aio()
        if len(calls) == 1:  # no pipeline: it costs more than the one command
            return [await self._alone(client, *calls[0])]
        async with client.pipeline(transaction=False) as pipe:
            for lua, args in calls:
                pipe.evalsha(self._script(client, lua).sha, 0, *args)
            results: list[Any] = await pipe.execute(raise_on_error=False)
        for i, result in enumerate(results):
            if isinstance(result, redis.exceptions.NoScriptError):
                # Redis lost its scripts (restarted, SCRIPT FLUSH): this one did not run
                results[i] = await self._alone(client, *calls[i])
        return results

    async def _alone(self, client: redis.asyncio.Redis, lua: str,
                     args: list[str | int]) -> Any:
        """One script by itself (loaded again if Redis lost it); its own error returned."""
        try:
            return await self._script(client, lua)(args=args, client=client)
        except redis.ResponseError as exc:
            return exc
