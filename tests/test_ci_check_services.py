""".ci/check_services.py tells a PostgreSQL and a Redis from nothing and from each other."""

from __future__ import annotations

import importlib.util
import socket
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_services",
                                                  ROOT / ".ci" / "check_services.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_servers_every_machine_runs_answer() -> None:
    check = load()
    assert check.postgres_answers("127.0.0.1", 5432) is None
    assert check.redis_answers("127.0.0.1", 6379) is None


def test_nothing_listening_and_the_wrong_server_are_told() -> None:
    check = load()
    port = closed_port()
    assert "no answer" in check.postgres_answers("127.0.0.1", port)
    assert "no answer" in check.redis_answers("127.0.0.1", port)
    assert "not a Redis PONG" in check.redis_answers("127.0.0.1", 5432)
