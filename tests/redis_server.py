"""A private redis-server for the tests that flush or stop Redis (never the shared one)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from gensokyo_idmap.testing import free_port


class PrivateRedis:
    """``redis-server`` on a free port with its files in ``workdir``, no persistence;
    ``password``: asked of every client (and in :attr:`url`)."""

    def __init__(self, workdir: Path, password: str = "") -> None:
        self.workdir = workdir
        self.port = free_port()
        self.password = password
        auth = f":{password}@" if password else ""
        self.url = f"redis://{auth}127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", str(self.workdir),
             *(["--requirepass", self.password] if self.password else [])],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url)
        try:
            for _ in range(500):
                try:
                    if client.ping():
                        return
                except redis.ConnectionError:
                    time.sleep(0.01)
            raise RuntimeError(f"redis-server on port {self.port} did not answer")
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    """A private redis-server of this test's own (a module uses it by importing it)."""
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    server.stop()
