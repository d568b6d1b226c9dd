"""DaemonThreadExecutor: the daemon's default executor runs jobs like a thread pool but never
waits for one at shutdown."""

from __future__ import annotations

import asyncio
import threading

import pytest

from gensokyo_idmap.executor import DaemonThreadExecutor

WAIT = 30.0


def test_jobs_run_on_a_bounded_number_of_daemon_threads() -> None:
    executor = DaemonThreadExecutor(max_workers=2)
    release = threading.Event()
    names: list[str] = []

    def job(n: int) -> int:
        names.append(threading.current_thread().name)
        assert threading.current_thread().daemon
        release.wait(WAIT)
        return n * n

    futures = [executor.submit(job, n) for n in range(5)]
    release.set()
    assert [f.result(WAIT) for f in futures] == [0, 1, 4, 9, 16]
    assert len(set(names)) <= 2
    failing = executor.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failing.result(WAIT)
    executor.shutdown()
    with pytest.raises(RuntimeError):
        executor.submit(job, 1)


def test_shutdown_does_not_wait_for_a_job_still_running() -> None:
    executor = DaemonThreadExecutor()
    release = threading.Event()
    running = executor.submit(release.wait, WAIT)
    executor.shutdown(wait=True)  # returns although the job still runs
    assert not running.done()
    release.set()
    assert running.result(WAIT) is True


def test_an_event_loop_takes_it_as_its_default_executor() -> None:
    async def scenario() -> str:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(DaemonThreadExecutor())
        return await asyncio.to_thread(lambda: threading.current_thread().name)

    assert asyncio.run(scenario()).startswith("gsk-worker")
