"""Gateway client against the emulated platform: identify, dispatch, resume, replay, codes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

from aiohttp import ClientSession
from structlog.testing import capture_logs

from gensokyo_idmap.qq.events import GroupMessage, QQEvent
from gensokyo_idmap.qq.gateway import GatewayClient, GatewayState

from gensokyo_idmap.testing import APP, EmulatedPlatform, group_message, until

TIMEOUT = 15


def run_with(tmp_path: Path, scenario: Callable[[EmulatedPlatform, Callable[[], GatewayClient],
                                                  list[QQEvent]], Awaitable[None]]) -> None:
    async def main() -> None:
        platform = EmulatedPlatform()
        await platform.start()
        events: list[QQEvent] = []

        async def pipeline(batch: Sequence[QQEvent]) -> None:
            events.extend(batch)

        async with ClientSession() as session:
            tokens = platform.token_manager(session)

            def client() -> GatewayClient:
                return GatewayClient(platform.ws_url(), APP, tokens, pipeline,
                                     GatewayState(tmp_path / "gateway.json"),
                                     reconnect_delay=0.01)
            try:
                await asyncio.wait_for(scenario(platform, client, events), TIMEOUT * 2)
            finally:
                await platform.close()

    asyncio.run(main())


@contextlib.asynccontextmanager
async def connected(client: GatewayClient) -> AsyncIterator[None]:
    """``client`` connected to the emulator with a session for the block, then closed and
    finished."""
    async with ClientSession() as session:
        task = asyncio.create_task(client.run(session))
        await until(lambda: client.session_id is not None, TIMEOUT)
        yield
        await client.close()
        await task


def messages(events: list[QQEvent]) -> list[str]:
    return [e.content for e in events if isinstance(e, GroupMessage)]


def test_identify_dispatch_heartbeat_and_saved_state(tmp_path: Path) -> None:
    async def scenario(platform: EmulatedPlatform, make: Callable[[], GatewayClient],
                       events: list[QQEvent]) -> None:
        client = make()
        async with connected(client):
            await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(1))
            await until(lambda: messages(events) == ["m1"], TIMEOUT)
            await until(lambda: 2 in platform.heartbeats, TIMEOUT)  # heartbeats carry the last seq
        identify = platform.identifies[0]
        assert identify["token"] == "QQBot T1" and identify["intents"] == 1 << 25
        assert identify["shard"] == [0, 1]
        assert GatewayState(tmp_path / "gateway.json").load().seq == 2

    run_with(tmp_path, scenario)


def test_drop_resumes_and_replays_what_was_missed(tmp_path: Path) -> None:
    async def scenario(platform: EmulatedPlatform, make: Callable[[], GatewayClient],
                       events: list[QQEvent]) -> None:
        client = make()
        async with connected(client):
            await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(1))
            await until(lambda: messages(events) == ["m1"], TIMEOUT)
            await platform.drop(4009)
            await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(2))  # while away
            await until(lambda: messages(events) == ["m1", "m2"], TIMEOUT)
        assert client.identifies == 1 and client.resumes == 1
        assert platform.resumes[0]["seq"] == 2  # READY=1, m1=2

    run_with(tmp_path, scenario)


def test_connected_is_true_from_ready_or_resumed_until_the_connection_ends(
        tmp_path: Path) -> None:
    """What readiness reports: a session on an open connection, not a socket alone."""

    async def scenario(platform: EmulatedPlatform, make: Callable[[], GatewayClient],
                       events: list[QQEvent]) -> None:
        client = make()
        assert not client.connected
        async with ClientSession() as session:
            task = asyncio.create_task(client.run(session))
            await until(lambda: client.connected, TIMEOUT, "READY")
            platform.hold_sessions()
            await platform.drop(4009)
            await until(lambda: len(platform.sockets) == 2, TIMEOUT, "the reconnection")
            assert not client.connected  # a socket, no session yet
            platform.release_sessions()
            await until(lambda: client.connected, TIMEOUT, "RESUMED")
            assert client.resumes == 1
            await client.close()
            await task
        assert not client.connected

    run_with(tmp_path, scenario)


def test_restart_of_the_daemon_resumes_the_saved_session(tmp_path: Path) -> None:
    async def scenario(platform: EmulatedPlatform, make: Callable[[], GatewayClient],
                       events: list[QQEvent]) -> None:
        async with ClientSession() as session:
            first = make()
            task = asyncio.create_task(first.run(session))
            await until(lambda: first.session_id is not None, TIMEOUT)
            await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(1))
            await until(lambda: messages(events) == ["m1"], TIMEOUT)
            await first.close()
            await task
            await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(2))  # daemon down
            second = make()  # a new process would read the same state file
            task = asyncio.create_task(second.run(session))
            await until(lambda: messages(events) == ["m1", "m2"], TIMEOUT)
            await second.close()
            await task
        assert second.resumes == 1 and second.identifies == 0

    run_with(tmp_path, scenario)


def test_refused_resume_falls_back_to_identify(tmp_path: Path) -> None:
    GatewayState(tmp_path / "gateway.json").save("stale-session", 41)

    async def scenario(platform: EmulatedPlatform, make: Callable[[], GatewayClient],
                       events: list[QQEvent]) -> None:
        client = make()
        async with ClientSession() as session:
            task = asyncio.create_task(client.run(session))
            await until(lambda: client.identifies == 1 and client.session_id == platform.session_id, TIMEOUT)
            await client.close()
            await task
        assert platform.resumes[0]["session_id"] == "stale-session"

    run_with(tmp_path, scenario)


def test_close_4004_fetches_a_new_token_and_fatal_codes_stop(tmp_path: Path) -> None:
    async def scenario(platform: EmulatedPlatform, make: Callable[[], GatewayClient],
                       events: list[QQEvent]) -> None:
        client = make()
        async with ClientSession() as session:
            task = asyncio.create_task(client.run(session))
            await until(lambda: client.session_id is not None, TIMEOUT)
            await platform.drop(4004)
            await until(lambda: platform.tokens_issued == 2 and len(platform.resumes) == 1, TIMEOUT)
            assert platform.resumes[0]["token"] == "QQBot T2"
            await platform.drop(4014)  # intent not permitted: fatal
            await asyncio.wait_for(task, TIMEOUT)
        assert client.fatal is not None and "4014" in client.fatal

    run_with(tmp_path, scenario)


def test_saved_seq_never_runs_ahead_and_is_flushed_when_the_connection_ends(
        tmp_path: Path) -> None:
    """The state file is written at most every save_interval, so during a burst it may lag
    behind what was processed, but never run ahead; when the client stops it is exact."""
    state = GatewayState(tmp_path / "gateway.json")
    seen_in_file: list[tuple[int | None, int]] = []

    async def scenario(platform: EmulatedPlatform, make: Callable[[], GatewayClient],
                       events: list[QQEvent]) -> None:
        client = make()
        # longer than the test: after the first save (at once) the file is not written
        # again until the connection ends, so the lag below does not hang on timing
        client.save_interval = 60.0
        original = client.pipeline

        async def pipeline(batch: Sequence[QQEvent]) -> None:
            seen_in_file.append((state.load().seq, len(events)))
            await original(batch)

        async def push_and_wait(numbers: range) -> None:
            for n in numbers:
                await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(n))
            await until(lambda: len(messages(events)) == numbers.stop, TIMEOUT)

        client.pipeline = pipeline
        async with connected(client):
            await push_and_wait(range(0, 1))  # saved at once: the throttle starts idle
            await push_and_wait(range(1, 29))  # a burst: the file keeps the first seq
            await push_and_wait(range(29, 30))  # a batch that surely sees the lag
        last = platform.sent[-1]["s"]
        assert state.load().seq == last  # flushed on the way out
        # while the burst ran, the file lagged (throttled) but never claimed an event that
        # had not finished: seq k of a message is READY's seq (1) + its position
        assert all(saved is None or saved <= 1 + done for saved, done in seen_in_file)
        assert any(saved is not None and saved < 1 + done for saved, done in seen_in_file)

    run_with(tmp_path, scenario)


def test_events_run_concurrently_but_the_saved_seq_waits_for_the_slowest(tmp_path: Path) -> None:
    """A slow batch (one chat's commit) does not hold up the batches after it, but the seq
    the client saves never passes it until it has finished."""
    release = asyncio.Event()
    started = asyncio.Event()

    async def scenario(platform: EmulatedPlatform, make: Callable[[], GatewayClient],
                       events: list[QQEvent]) -> None:
        client = make()
        original = client.pipeline

        async def pipeline(batch: Sequence[QQEvent]) -> None:
            if "m1" in messages(list(batch)):
                started.set()
                await release.wait()
            await original(batch)

        client.pipeline = pipeline
        async with connected(client):
            slow = await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(1))
            await started.wait()  # m1's batch is running: the others come in later ones
            for n in range(2, 6):
                await platform.push("GROUP_AT_MESSAGE_CREATE",
                                    group_message(n, group=f"{n:032X}"))
            await until(lambda: messages(events) == ["m2", "m3", "m4", "m5"], TIMEOUT)
            assert client.seq is not None and client.seq < slow["s"]  # held at the watermark
            release.set()
            await until(lambda: client.seq == platform.sent[-1]["s"], TIMEOUT)
        assert sorted(messages(events)) == ["m1", "m2", "m3", "m4", "m5"]

    run_with(tmp_path, scenario)


def test_no_more_than_max_in_flight_events_run_at_once_and_the_rest_follow(
        tmp_path: Path) -> None:
    """The reader stops taking frames while max_in_flight events run, and goes on as each
    one finishes: nothing is lost or left behind."""
    release = asyncio.Event()
    running: list[str] = []
    most = 0

    async def scenario(platform: EmulatedPlatform, make: Callable[[], GatewayClient],
                       events: list[QQEvent]) -> None:
        nonlocal most
        client = make()
        client.max_in_flight = 2
        original = client.pipeline

        async def pipeline(batch: Sequence[QQEvent]) -> None:
            nonlocal most
            contents = messages(list(batch))
            assert len(contents) == len(batch)
            running.extend(contents)
            most = max(most, len(running))
            await release.wait()
            for content in contents:
                running.remove(content)
            await original(batch)

        client.pipeline = pipeline
        async with connected(client):
            for n in range(1, 7):
                await platform.push("GROUP_AT_MESSAGE_CREATE",
                                    group_message(n, group=f"{n:032X}"))
            await until(lambda: len(running) == 2, TIMEOUT)
            await asyncio.sleep(0.05)  # the other four have arrived; none may start
            assert sorted(running) == ["m1", "m2"] and events == []
            release.set()
            await until(lambda: len(events) == 6, TIMEOUT)
            await until(lambda: client.seq == platform.sent[-1]["s"], TIMEOUT)
        assert most == 2
        assert sorted(messages(events)) == [f"m{n}" for n in range(1, 7)]

    run_with(tmp_path, scenario)


def test_frames_read_together_go_to_the_pipeline_as_one_batch_in_order(
        tmp_path: Path) -> None:
    """Frames that arrive in one read are handed over together (one task, one wait), in
    the platform's order; the watermark passes them once the batch finished."""
    batches: list[list[str]] = []

    async def scenario(platform: EmulatedPlatform, make: Callable[[], GatewayClient],
                       events: list[QQEvent]) -> None:
        client = make()
        original = client.pipeline

        async def pipeline(batch: Sequence[QQEvent]) -> None:
            batches.append(messages(list(batch)))
            await original(batch)

        client.pipeline = pipeline
        async with connected(client):
            # written in one turn of the loop: on the socket before the client reads
            await asyncio.gather(*(platform.push("GROUP_AT_MESSAGE_CREATE",
                                                 group_message(n, group=f"{n % 2:032X}"))
                                   for n in range(1, 9)))
            await until(lambda: len(events) == 8, TIMEOUT)
            await until(lambda: client.seq == platform.sent[-1]["s"], TIMEOUT)
        assert [m for batch in batches for m in batch] == [f"m{n}" for n in range(1, 9)]
        assert max(len(batch) for batch in batches) > 1

    run_with(tmp_path, scenario)


def test_an_event_that_fails_is_replayed_after_a_resume(tmp_path: Path) -> None:
    failures = [True]

    async def scenario(platform: EmulatedPlatform, make: Callable[[], GatewayClient],
                       events: list[QQEvent]) -> None:
        client = make()
        original = client.pipeline

        async def pipeline(batch: Sequence[QQEvent]) -> None:
            if "m2" in messages(list(batch)) and failures:
                failures.pop()
                raise RuntimeError("store unavailable")
            await original(batch)

        client.pipeline = pipeline
        async with connected(client):
            for n in (1, 2, 3):
                await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(n))
            await until(lambda: "m2" in messages(events), TIMEOUT)
        assert len(platform.resumes) == 1  # the failure restarted the connection
        assert messages(events)[:1] == ["m1"] and "m2" in messages(events)
        assert GatewayState(tmp_path / "gateway.json").load().seq == platform.sent[-1]["s"]

    run_with(tmp_path, scenario)


def test_bad_frames_unknown_ops_and_events_missing_ids_are_logged_and_skipped(
        tmp_path: Path) -> None:
    async def scenario(platform: EmulatedPlatform, make: Callable[[], GatewayClient],
                       events: list[QQEvent]) -> None:
        client = make()
        async with connected(client):
            with capture_logs() as logs:
                await platform.send_raw("{not json")
                await platform.send_raw('{"op": 42, "d": null}')
                await platform.send_raw('["an", "array"]')
                broken = await platform.push("GROUP_AT_MESSAGE_CREATE",
                                             {"id": "ROBOT1.0_x", "content": "no group",
                                              "author": {"id": "U" * 32}})
                await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(1))
                await until(lambda: messages(events) == ["m1"], TIMEOUT)
        assert len(platform.identifies) == 1 and not platform.resumes  # never reconnected
        assert [e.event_type for e in events] == ["GROUP_AT_MESSAGE_CREATE"]
        ignored = [entry for entry in logs if entry["event"] == "[qq] gateway frame ignored"]
        assert len(ignored) == 2 and "JSON" in ignored[0]["reason"]
        assert [entry["op"] for entry in logs if entry["event"] == "[qq] gateway op ignored"
                ] == [42]
        [refused] = [entry for entry in logs if entry["event"] == "[qq] gateway event refused"]
        assert "group_openid" in refused["reason"]
        assert client.seq == platform.sent[-1]["s"] > broken["s"]  # skipped, not stuck

    run_with(tmp_path, scenario)


def test_a_state_that_cannot_be_saved_keeps_the_old_one(tmp_path: Path) -> None:
    """A write that fails (a full disk; here a folder where the scratch file goes) is no
    exception: the saved seq stays where it was, so after a restart the platform sends the
    rest again (a repeat, never a loss)."""
    state = GatewayState(tmp_path / "gateway.json")
    assert state.save("session", 5) is True
    (tmp_path / "gateway.json.tmp").mkdir()
    assert state.save("session", 6) is False
    assert state.load().seq == 5


PAUSED = "[qq] gateway paused: reading stops until the events can be processed"


def fail_when(client: GatewayClient, fails: Callable[[Sequence[QQEvent]], bool]) -> None:
    """``client``'s pipeline raises (a store that cannot take them) for the batches
    ``fails`` names, and processes the others."""
    original = client.pipeline

    async def pipeline(batch: Sequence[QQEvent]) -> None:
        if fails(batch):
            raise RuntimeError("store unavailable")
        await original(batch)

    client.pipeline = pipeline


def test_a_failed_batch_pauses_reading_until_the_backends_answer(tmp_path: Path) -> None:
    """While the probe names a problem the client reads nothing more and does not reconnect
    (heartbeats go on); once it answers, one Resume and the replay."""
    down = [True]
    probes: list[bool] = []

    async def probe() -> list[str]:
        probes.append(down[0])
        return ["postgresql at test: down"] if down[0] else []

    async def scenario(platform: EmulatedPlatform, make: Callable[[], GatewayClient],
                       events: list[QQEvent]) -> None:
        client = make()
        client._backends = probe  # noqa: SLF001 - as the daemon passes it (backends=)
        fail_when(client, lambda batch: down[0])
        with capture_logs() as logs:
            async with connected(client):
                await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(1))
                await until(lambda: len(probes) >= 5, TIMEOUT, "the paused client asking")
                assert client.paused  # what /readyz reports meanwhile
                beats = len(platform.heartbeats)
                await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(2))
                await until(lambda: len(platform.heartbeats) > beats, TIMEOUT, "a heartbeat")
                assert platform.resumes == [] and len(platform.identifies) == 1
                assert events == []
                down[0] = False
                await until(lambda: len(messages(events)) == 2, TIMEOUT, "the replay")
        assert messages(events) == ["m1", "m2"]
        assert len(platform.resumes) == 1 and len(platform.identifies) == 1
        assert client.pauses == 1 and not client.paused
        names = [e["event"] for e in logs]
        assert names.count(PAUSED) == 1 and names.count("[qq] gateway resumes reading") == 1

    run_with(tmp_path, scenario)


def test_failures_in_a_row_double_the_pause_and_a_processed_replay_resets_it(
        tmp_path: Path) -> None:
    """Without a probe (a daemon on LMDB alone) the pause is the backoff: doubling with each
    failure in a row although each Resume succeeds, back to the start once the event that
    failed went through."""
    failing = [4]

    async def scenario(platform: EmulatedPlatform, make: Callable[[], GatewayClient],
                       events: list[QQEvent]) -> None:
        client = make()

        def fails(batch: Sequence[QQEvent]) -> bool:
            if failing[0] and "m1" not in messages(list(batch)):  # m1 sets the watermark
                failing[0] -= 1
                return True
            return False

        fail_when(client, fails)
        with capture_logs() as logs:
            async with connected(client):
                await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(1))
                await until(lambda: "m1" in messages(events), TIMEOUT, "m1")
                await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(2))
                await until(lambda: "m2" in messages(events), TIMEOUT, "m2 at last")
                failing[0] = 1
                await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(3))
                await until(lambda: "m3" in messages(events), TIMEOUT, "m3")
        delays = [e["retry_in"] for e in logs if e["event"] == PAUSED]
        assert delays == [0.01, 0.02, 0.04, 0.08, 0.01]
        assert len(platform.resumes) == 5

    run_with(tmp_path, scenario)
