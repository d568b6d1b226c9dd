"""Round trips to Redis shared by the calls made while one is out (runtime/redis/trips.py):
scripts of several kinds in one pipeline, each caller with its own answer or error, and
scripts Redis lost (a restart, SCRIPT FLUSH) loaded again."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from gensokyo_idmap.runtime.redis.connection import RedisRuntime
from gensokyo_idmap.runtime.redis.trips import ScriptTrips

from ...conftest import REDIS_URL, run, test_prefix
from ...test_backend_metrics import scraped
from ... import redis_server
from ...redis_server import PrivateRedis

private_redis = redis_server.private_redis  # the fixture, for this module's tests

ECHO = "return ARGV[1]"
TWICE = "return tonumber(ARGV[1]) * 2"
FAILS = "return redis.error_reply('refused: ' .. ARGV[1])"


@pytest.fixture
def runtime() -> Iterator[RedisRuntime]:
    found = RedisRuntime(REDIS_URL, test_prefix())
    yield found
    found.sync.close()


def test_scripts_asked_at_once_share_one_round_trip_each_with_its_own_answer(
        runtime: RedisRuntime) -> None:
    trips = ScriptTrips(runtime)

    async def main() -> list[Any]:
        await asyncio.gather(trips.run(ECHO, ["warm"]), trips.run(TWICE, [0]),
                             trips.run(FAILS, ["warm"]), return_exceptions=True)  # loaded
        before = scraped("gensokyo_backend_round_trips", "redis")
        answers = await asyncio.gather(trips.run(ECHO, ["a"]), trips.run(TWICE, [21]),
                                       trips.run(ECHO, ["b"]), trips.run(FAILS, ["c"]),
                                       return_exceptions=True)
        assert scraped("gensokyo_backend_round_trips", "redis") == before + 1
        return list(answers)

    echo_a, twice, echo_b, failed = run(main())
    assert (echo_a, twice, echo_b) == (b"a", 42, b"b")
    assert isinstance(failed, redis.ResponseError) and "refused: c" in str(failed)


def test_scripts_redis_lost_are_loaded_again_and_run_once(
        private_redis: PrivateRedis) -> None:
    runtime = RedisRuntime(private_redis.url, test_prefix())
    trips = ScriptTrips(runtime)
    counter = "return redis.call('INCR', ARGV[1])"

    async def main() -> list[Any]:
        await trips.run(counter, ["n"])
        runtime.sync.script_flush()
        return list(await asyncio.gather(trips.run(counter, ["n"]), trips.run(ECHO, ["x"])))

    try:
        assert run(main()) == [2, b"x"]
        assert runtime.sync.get("n") == b"2"  # the lost script ran once, not twice
    finally:
        runtime.sync.close()


def test_a_connection_that_fails_fails_every_caller_of_the_trip(
        private_redis: PrivateRedis) -> None:
    runtime = RedisRuntime(private_redis.url, test_prefix())
    trips = ScriptTrips(runtime)

    async def main() -> list[Any]:
        await trips.run(ECHO, ["warm"])
        private_redis.stop()
        return list(await asyncio.gather(trips.run(ECHO, ["a"]), trips.run(TWICE, [1]),
                                         return_exceptions=True))

    try:
        answers = run(main())
        assert all(isinstance(answer, redis.ConnectionError) for answer in answers), answers
    finally:
        runtime.sync.close()
