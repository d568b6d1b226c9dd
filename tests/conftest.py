"""Shared fixtures: real LMDB files in a temp dir, never a mock of our store."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import uuid
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
import redis
import structlog
from hypothesis import settings
from hypothesis import strategies as st

from gensokyo_idmap import metrics
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.msgid import MessageIds, MsgIdMap
from gensokyo_idmap.runtime.redis.state import RedisMsgIdMap
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore
from gensokyo_idmap.runtime.redis.scripts import RedisMsgIds
from gensokyo_idmap.runtime.redis.connection import RedisRuntime

# CI runs the property tests derandomized, so a build is red only for a reason that is
# there every time; local runs keep searching freshly (HYPOTHESIS_PROFILE=ci to reproduce).
settings.register_profile("ci", derandomize=True, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

APP_ID = "102000001"
T = TypeVar("T")

#: Any text, lone surrogates (U+D800–U+DFFF) well represented: what JSON's \uXXXX
#: escapes can spell, and what a UTF-8 encoder refuses.
ANY_TEXT = st.lists(
    st.characters() | st.sampled_from(["\ud83d", "\ude00", "\udbff", "\udc00", "😀"])
    | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=8).map("".join)
#: Any JSON value, its strings (keys too) from :data:`ANY_TEXT` (integers within 64 bits:
#: beyond, jsonio reads a float where json reads an int, as jsonio's docstring says).
ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ANY_TEXT, inner, max_size=3),
    max_leaves=12)


#: The folders of tests/ that are a tier of their own, each with the marker of its name
#: (registered in pyproject.toml): the rest is the quick tier of unit and property tests.
TIERS = ("e2e", "crash", "faults")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its tier, from its folder, so ``-m "not e2e"`` selects by tier
    and a test moved between folders changes tier with no edit."""
    here = Path(__file__).resolve().parent
    for item in items:
        parts = item.path.resolve().relative_to(here).parts
        if len(parts) > 1 and parts[0] in TIERS:
            item.add_marker(getattr(pytest.mark, parts[0]))


@pytest.fixture(autouse=True)
def _cwd_in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs in its own temp dir: a default that is a relative path (the data dir
    ``./data``, ``./data-demo``) lands there, never in the checkout, so a test neither reads
    what ``make run`` left behind nor leaves anything for the next one. A test that needs a
    file of the checkout names it from ``__file__``."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(autouse=True)
def _structlog_isolated() -> Iterator[None]:
    """Each test starts from structlog's defaults: a CLI or daemon run in-process configures
    logging (e.g. warning level), which must not filter what a later test captures."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


def unencodable(sink: str) -> float:
    """``gensokyo_events_unencodable`` of ``sink``, as ``/metrics`` shows it."""
    value = metrics.REGISTRY.get_sample_value("gensokyo_events_unencodable_total",
                                              {"sink": sink})
    return value or 0.0


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine to completion: the tests are plain functions on a fresh loop."""
    return asyncio.run(coro)


@contextmanager
def time_limit(seconds: float, what: str = "the body") -> Iterator[None]:
    """Fail (instead of hanging) when the body runs longer than ``seconds`` (SIGALRM; a
    no-op off the main thread)."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not (
            threading.main_thread()):
        yield
        return

    def on_alarm(signum: int, frame: object) -> None:
        raise TimeoutError(f"{what} still running after {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def identity_db_path(tmp_path: Path) -> Path:
    return tmp_path / "openid-map.db"


@pytest.fixture
def identity_store(identity_db_path: Path) -> Iterator[LmdbIdentityStore]:
    store = LmdbIdentityStore(identity_db_path)
    yield store
    store.close()


@pytest.fixture
def msgid_db_path(tmp_path: Path) -> Path:
    return tmp_path / "msgid-map.db"


@pytest.fixture
def msgid_store(msgid_db_path: Path) -> Iterator[LmdbMsgIdStore]:
    store = LmdbMsgIdStore(msgid_db_path)
    yield store
    store.close()


@pytest.fixture
def pg_schema() -> Iterator[str]:
    """A PostgreSQL schema of the test's own, created empty and dropped after (the test is
    skipped, saying why, when PostgreSQL does not answer)."""
    from .store_backends import fresh_schema

    with fresh_schema(create=True) as name:
        yield name


#: The shared Redis of this machine: each test writes under a prefix of its own and deletes
#: only that (never FLUSHALL: other people's tests use the same server).
REDIS_URL = os.environ.get("GSK_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
#: The runtime backends the message-id contract tests run against.
MSGID_BACKENDS = ("lmdb", "redis")


def test_prefix() -> str:
    return f"gsk-test-{uuid.uuid4()}:"


test_prefix.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


@pytest.fixture
def redis_runtime() -> Iterator[RedisRuntime]:
    """A Redis runtime under a prefix of this test's own, whose keys go when it ends."""
    runtime = RedisRuntime(REDIS_URL, test_prefix())
    try:
        runtime.sync.ping()
    except redis.RedisError as exc:
        pytest.fail(f"the Redis tests need a Redis at {REDIS_URL} (GSK_TEST_REDIS_URL): {exc}")
    yield runtime
    runtime.delete_all()
    runtime.sync.close()


@pytest.fixture
def msgid_backend(request: pytest.FixtureRequest) -> str:
    """Which runtime backend a contract test runs on (parametrised indirectly)."""
    return str(getattr(request, "param", "lmdb"))


def msgid_map(backend: str, request: pytest.FixtureRequest, clock: Any,
              ttl_seconds: float, *, keep_content: bool = True) -> MessageIds:
    """A message-id map on ``backend``: msgid-map.db in tmp, or a Redis prefix of its own."""
    if backend == "redis":
        runtime = request.getfixturevalue("redis_runtime")
        return RedisMsgIdMap(RedisMsgIds(runtime), clock=clock, ttl_seconds=ttl_seconds,
                             keep_content=keep_content)
    return MsgIdMap(request.getfixturevalue("msgid_store"), clock=clock,
                    ttl_seconds=ttl_seconds, keep_content=keep_content)


class FakeClock:
    """A clock tests move by hand, so nothing ever sleeps."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def graph(identity_store: LmdbIdentityStore, clock: FakeClock) -> IdentityGraph:
    return IdentityGraph(identity_store, clock=clock)
