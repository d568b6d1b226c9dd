"""What every identity store must do (store/base.py), on every backend: LMDB in a temp dir,
PostgreSQL in a schema of the test's own. Reads never wait for the writer, one broken write
does not take its batch down, concurrent writes share commits, probe is exact and never
stale, and another process's commits are seen."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from typing import Any

import pytest

from gensokyo_idmap.errors import BadInputError, StoreError
from gensokyo_idmap.store.base import IdentityWriter, LastSeen

from .. import store_backends
from ..store_backends import PG_DSN, StoreFactory, set_both


# the fixtures, one run per backend
open_store = store_backends.open_store
identity_store = store_backends.identity_store

@pytest.fixture
def backend(open_store: StoreFactory, request: pytest.FixtureRequest) -> str:
    return str(request.node.callspec.params["open_store"])


def test_reads_do_not_wait_for_the_writer(identity_store: Any) -> None:
    identity_store.write_sync(lambda w: set_both(w, "raw:before", 1))
    inside = threading.Event()
    release = threading.Event()

    def slow(w: IdentityWriter) -> None:
        set_both(w, "raw:during", 2)
        w.vuin_of("raw:during")  # (PostgreSQL: the pipeline has sent the writes)
        inside.set()
        assert release.wait(10)

    writer = threading.Thread(target=identity_store.write_sync, args=(slow,))
    writer.start()
    try:
        assert inside.wait(10)
        with identity_store.read() as view:  # the write transaction is open right now
            assert view.vuin_of("raw:before") == 1
            assert view.vuin_of("raw:during") is None
    finally:
        release.set()
        writer.join(10)
    with identity_store.read() as view:
        assert view.vuin_of("raw:during") == 2


def test_one_broken_write_does_not_take_its_batch_down(identity_store: Any) -> None:
    def good(i: int):  # type: ignore[no-untyped-def]
        return lambda w: set_both(w, f"raw:good{i}", i)

    def broken(w: IdentityWriter) -> None:
        set_both(w, "raw:partial", 99)
        raise RuntimeError("boom")

    def refused(w: IdentityWriter) -> None:
        raise BadInputError("field", "value", "refused before writing")

    async def submit() -> list[object]:
        calls = [identity_store.write(good(i)) for i in range(1, 6)]
        calls.insert(2, identity_store.write(broken))
        calls.insert(4, identity_store.write(refused))
        return await asyncio.gather(*calls, return_exceptions=True)

    results = asyncio.run(submit())
    assert isinstance(results[2], RuntimeError)
    assert isinstance(results[4], BadInputError)
    with identity_store.read() as view:
        assert [view.vuin_of(f"raw:good{i}") for i in range(1, 6)] == [1, 2, 3, 4, 5]
        assert view.vuin_of("raw:partial") is None


def test_group_commit_batches_concurrent_writes(identity_store: Any) -> None:
    async def many() -> None:
        await asyncio.gather(*(identity_store.write(
            lambda w, i=i: set_both(w, f"raw:k{i}", i + 1)) for i in range(200)))

    asyncio.run(many())
    batches, writes = identity_store.commit_stats
    assert writes == 200
    assert batches < 200  # several writes shared one commit
    with identity_store.read() as view:
        assert view.counts().identities == 200


def test_closed_store_refuses_writes(open_store: StoreFactory) -> None:
    store = open_store()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.write_sync(lambda w: set_both(w, "raw:x", 1))


@pytest.mark.parametrize("size", [1, 23, 24, 255, 256, 480])
def test_probe_compares_last_seen_exactly(identity_store: Any, size: int) -> None:
    key = "raw:" + "k" * (size - 4) if size > 4 else "raw:k"
    longer = key + "x"  # same prefix, another identity
    identity_store.write_sync(lambda w: (set_both(w, key, 3), set_both(w, longer, 3),
                                         w.set_last_seen(3, "s1", LastSeen(key, 1.5)),
                                         w.set_last_seen(3, "s2", LastSeen(longer, 2.5))))
    assert identity_store.probe(key, "s1") == (3, True)
    assert identity_store.probe(key, "s2") == (3, False)
    assert identity_store.probe(longer, "s2") == (3, True)
    assert identity_store.probe(key, "s3") == (3, False)
    assert identity_store.probe(key, None) == (3, False)
    assert identity_store.probe("raw:unknown", "s1") == (None, False)


def test_probe_never_answers_from_before_a_commit(identity_store: Any) -> None:
    """A commit (here, re-pointing the key) must be seen at once, never an answer from
    before it (LMDB remembers answers per snapshot)."""
    identity_store.write_sync(lambda view: set_both(view, "raw:A", 7))
    assert identity_store.probe("raw:A", None) == (7, False)
    assert identity_store.probe("raw:A", None) == (7, False)  # (LMDB: from memory)

    def move(view: IdentityWriter) -> None:
        view.remove_identity(7, "raw:A")
        set_both(view, "raw:A", 8)

    identity_store.write_sync(move)
    assert identity_store.probe("raw:A", None) == (8, False)
    identity_store.write_sync(lambda view: view.set_last_seen(
        8, "QQ:1:group:G", LastSeen("raw:A", 1.0)))
    assert identity_store.probe("raw:A", "QQ:1:group:G") == (8, True)


CHILD_WRITER = """
import sys
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.store.postgres.identity import PgIdentityStore
backend, where, vuin = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = (LmdbIdentityStore(where) if backend == "lmdb"
         else PgIdentityStore(sys.argv[4], schema=where))
def move(view):
    view.remove_identity(view.vuin_of("raw:A"), "raw:A")
    view.set_vuin("raw:A", vuin)
    view.add_identity(vuin, "raw:A")
with store:
    store.write_sync(move)
"""


def test_probe_sees_what_another_process_committed(
        backend: str, open_store: StoreFactory) -> None:
    with open_store() as store:
        store.write_sync(lambda view: set_both(view, "raw:A", 7))
        assert store.probe("raw:A", None) == (7, False)
        where = str(store.path) if backend == "lmdb" else store.schema
        subprocess.run([sys.executable, "-c", CHILD_WRITER, backend, where, "9", PG_DSN],
                       check=True, timeout=60)
        assert store.probe("raw:A", None) == (9, False)
