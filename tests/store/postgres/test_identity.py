"""The identity graph on PostgreSQL beyond the shared contract: the database holds the
inverses, conflicting writers are re-run (never merged), the schema is checked at open,
and a server that does not answer is a clear error without the password."""

from __future__ import annotations

import asyncio
import getpass
import threading
from collections.abc import Iterator

import pytest

from gensokyo_idmap.errors import BadInputError, SchemaVersionError, StoreError, UnreachableError
from gensokyo_idmap.identity import RawId
from gensokyo_idmap.idmap import IdentityGraph, allocate_vuin
from gensokyo_idmap.store.base import LastSeen, LegacyCounts, LegacyTables, legacy_counts
from gensokyo_idmap.store.postgres.connect import connect
from gensokyo_idmap.store.postgres.identity import PgIdentityStore, PgView
from gensokyo_idmap.store.postgres.migrate import known_migrations, migration_status

from ...conftest import run
from ...pg_proxy import PgProxy
from ...test_backend_metrics import scraped
from ...store_backends import PG_DSN, fresh_schema, set_both


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema() as name:
        yield name


def _run(schema: str, query: str) -> None:
    with connect(PG_DSN, schema) as conn:
        conn.execute(query.encode())


def test_the_database_refuses_a_key_without_its_set(schema: str) -> None:
    with PgIdentityStore(PG_DSN, schema=schema) as store:
        with pytest.raises(StoreError, match="identity_to_vuin_in_its_set"):
            store.write_sync(lambda view: view.set_vuin("raw:half", 3))
        with pytest.raises(StoreError, match="vuin_to_identity_points_back"):
            store.write_sync(lambda view: view.add_identity(3, "raw:half"))

        def two_sets(view: PgView) -> None:
            set_both(view, "raw:k", 1)
            view.add_identity(2, "raw:k")  # the key in a second set: not an inverse

        with pytest.raises(StoreError):
            store.write_sync(two_sets)
        with store.read() as view:
            assert view.counts().identities == 0 and list(view.iter_vuin_sets()) == []


def test_a_conflicting_allocation_is_run_again_on_fresh_data(schema: str) -> None:
    """Daemon A reads the counter, daemon B allocates and commits, then A goes on: A's
    transaction is aborted by PostgreSQL and its function re-run, so A gets the next
    number instead of B's."""
    with PgIdentityStore(PG_DSN, schema=schema) as a, \
            PgIdentityStore(PG_DSN, schema=schema) as b:
        read_counter = threading.Event()
        b_committed = threading.Event()
        runs: list[int] = []

        def allocate_slowly(view: PgView) -> int:
            view.vuin_counter()
            runs.append(1)
            read_counter.set()
            assert b_committed.wait(10)
            vuin = allocate_vuin(view)
            set_both(view, "raw:from-a", vuin)
            return vuin

        got: list[int] = []
        writer = threading.Thread(target=lambda: got.append(a.write_sync(allocate_slowly)))
        writer.start()
        assert read_counter.wait(10)

        def allocate(view: PgView) -> int:
            vuin = allocate_vuin(view)
            set_both(view, "raw:from-b", vuin)
            return vuin

        assert b.write_sync(allocate) == 1
        b_committed.set()
        writer.join(10)
        assert got == [2] and len(runs) == 2 and a.retries >= 1
        with a.read() as view:
            assert dict(view.iter_identities()) == {"raw:from-a": 2, "raw:from-b": 1}
            assert view.vuin_counter() == 2


def test_two_stores_allocating_at_once_never_share_a_vuin(schema: str) -> None:
    stores = [PgIdentityStore(PG_DSN, schema=schema) for _ in range(3)]
    try:
        def allocate(key: str):  # type: ignore[no-untyped-def]
            def apply(view: PgView) -> int:
                found = view.vuin_of(key)
                if found is not None:
                    return found
                vuin = allocate_vuin(view)
                set_both(view, key, vuin)
                return vuin
            return apply

        results: dict[tuple[int, str], int] = {}

        def worker(n: int) -> None:
            for i in range(40):
                key = f"raw:{(i * (n + 1)) % 50}"  # overlapping sets of keys
                results[(n, key)] = stores[n].write_sync(allocate(key))

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        with stores[0].read() as view:
            forward = dict(view.iter_identities())
            counter = view.vuin_counter()
        for (_, key), vuin in results.items():
            assert forward[key] == vuin  # every answer given survived
        assert len(set(forward.values())) == len(forward)  # one vUIN per person
        assert counter == len(forward)  # no number was taken twice or lost
    finally:
        for store in stores:
            store.close()


def test_opening_applies_the_migrations_once(schema: str) -> None:
    PgIdentityStore(PG_DSN, schema=schema).close()
    PgIdentityStore(PG_DSN, schema=schema).close()
    with connect(PG_DSN, schema) as conn:
        status = migration_status(conn)
    assert status.current == known_migrations()[-1].version and status.pending == ()


def test_a_store_refuses_a_database_with_a_changed_migration(schema: str) -> None:
    PgIdentityStore(PG_DSN, schema=schema).close()
    _run(schema, "UPDATE schema_migrations SET sha256 = repeat('a', 64) WHERE version = 1")
    with pytest.raises(StoreError, match="migration 0001 identity_graph was applied with "
                                         "SHA-256 aaaaaaaaaaaa"):
        PgIdentityStore(PG_DSN, schema=schema)


def test_a_store_refuses_a_database_from_a_newer_version(schema: str) -> None:
    PgIdentityStore(PG_DSN, schema=schema).close()
    _run(schema, "INSERT INTO schema_migrations (version, name, sha256) "
                 "VALUES (99, 'from_the_future', repeat('b', 64))")
    with pytest.raises(SchemaVersionError, match="0099 from_the_future"):
        PgIdentityStore(PG_DSN, schema=schema)


def test_readonly_applies_nothing_and_refuses_a_database_behind(schema: str) -> None:
    newest = known_migrations()[-1].version
    with pytest.raises(StoreError, match=f"needs {newest:04d}, which a read-only command does not"):
        PgIdentityStore(PG_DSN, schema=schema, readonly=True)
    with connect(PG_DSN, schema) as conn:
        assert migration_status(conn).current == 0  # nothing was created
    PgIdentityStore(PG_DSN, schema=schema).close()
    with PgIdentityStore(PG_DSN, schema=schema, readonly=True) as store:
        with pytest.raises(StoreError, match="read-only"):
            store.write_sync(lambda view: view.set_vuin_counter(5))


def test_meta_and_the_legacy_tables(schema: str) -> None:
    """The store keeps the old daemon's config and UserInfo (it is LegacyTables), apart
    from the graph's counts."""
    with PgIdentityStore(PG_DSN, schema=schema) as store:
        assert isinstance(store, LegacyTables)

        def fill(view: PgView) -> None:
            view.set_meta("migrated_from", {"file": "idmap.db", "entries": 3})
            view.put_config(b"section:key", b"\x00\xffvalue")
            view.put_user_info(b"\x01", b"\x02")

        async def through_the_legacy_protocol() -> None:
            await store.write_legacy(fill)

        run(through_the_legacy_protocol())
        with store.read_legacy() as view:
            assert view.get_config(b"section:key") == b"\x00\xffvalue"
            assert list(view.iter_config()) == [(b"section:key", b"\x00\xffvalue")]
            assert list(view.iter_user_info()) == [(b"\x01", b"\x02")]
        assert legacy_counts(store) == LegacyCounts(config=1, user_info=1)
        with store.read() as view:
            assert view.get_meta("migrated_from") == {"file": "idmap.db", "entries": 3}
            assert view.counts().identities == 0
        assert store.write_sync(lambda view: view.delete_config(b"section:key")) is True
        assert store.write_sync(lambda view: view.delete_config(b"section:key")) is False


def test_a_long_walk_may_read_while_it_walks(schema: str) -> None:
    """Reads walk with server-side cursors: other reads run in the middle of a walk (the
    graph's seen_in_scenes does) and keys come in byte order, as on LMDB."""
    keys = [f"raw:{i:05d}" for i in range(5000)] + ["raw:\u00e9", "raw:Z"]
    with PgIdentityStore(PG_DSN, schema=schema) as store:
        store.write_sync(lambda view: [set_both(view, k, n + 1) for n, k in enumerate(keys)])
        with store.read() as view:
            walked = [(key, view.vuin_of(key)) for key, _ in view.iter_identities("raw:")]
        assert [k for k, _ in walked] == sorted(keys, key=lambda k: k.encode())
        assert all(v is not None for _, v in walked)


def test_a_bad_schema_name_is_bad_input() -> None:
    with pytest.raises(BadInputError, match="schema"):
        PgIdentityStore(PG_DSN, schema="Robert'); DROP TABLE x;--")


def test_an_unreachable_server_is_a_store_error_without_the_password() -> None:
    with pytest.raises(StoreError, match="cannot be reached") as err:
        PgIdentityStore("postgresql://gsk:s3cretpw@127.0.0.1:1/gsk")
    assert "s3cretpw" not in err.value.message


def test_a_store_waiting_for_its_server_refuses_every_call_until_it_is_reached() -> None:
    """A daemon's start with the server down: the store begins in an outage (each call an
    UnreachableError at once, health naming it), and opens, schema upgraded, once
    :meth:`reach` finds the server answering."""
    with fresh_schema(create=True) as schema, PgProxy(PG_DSN) as proxy:
        proxy.cut()
        dsn = proxy.dsn(schema)
        with pytest.raises(UnreachableError):
            PgIdentityStore(dsn)  # without waiting: the error at once
        with PgIdentityStore(dsn, wait_for_server=True) as store:
            assert store.waiting_for_server
            with pytest.raises(UnreachableError, match="cannot be reached"):
                store.probe("raw:A", None)
            with pytest.raises(UnreachableError, match="cannot be reached"):
                store.write_sync(lambda view: set_both(view, "raw:A", 1))
            assert (store.health() or "").startswith("not open yet: PostgreSQL at")
            assert not store.reach()
            proxy.restore()
            assert store.reach() and not store.waiting_for_server
            assert store.health() is None
            store.write_sync(lambda view: set_both(view, "raw:A", 1))
            assert store.probe("raw:A", None) == (1, False)
        with connect(PG_DSN, schema) as conn:
            assert migration_status(conn).pending == ()


def test_a_store_reaching_a_refused_schema_raises_naming_the_dsn(schema: str) -> None:
    PgIdentityStore(PG_DSN, schema=schema).close()
    _run(schema, "UPDATE schema_migrations SET sha256 = repeat('a', 64) WHERE version = 1")
    with PgProxy(PG_DSN) as proxy:
        proxy.cut()
        # a password in the URL (the test server trusts loopback and ignores it)
        dsn = proxy.dsn(schema).replace("://", f"://{getpass.getuser()}:s3cretpw@")
        with PgIdentityStore(dsn, wait_for_server=True) as store:
            proxy.restore()
            with pytest.raises(StoreError, match="SHA-256 aaaaaaaaaaaa") as err:
                store.reach()
    assert not isinstance(err.value, UnreachableError)
    assert err.value.message.startswith(
        f"the identity graph at postgresql://***@127.0.0.1:{proxy.port}/")


def test_a_schema_that_cannot_be_read_is_a_store_error_naming_the_dsn(schema: str) -> None:
    PgIdentityStore(PG_DSN, schema=schema).close()
    _run(schema, "ALTER TABLE schema_migrations RENAME COLUMN sha256 TO checksum")
    with pytest.raises(StoreError, match='cannot be read: column "sha256" does not exist'):
        PgIdentityStore(PG_DSN, schema=schema)


def test_a_read_the_server_fails_is_a_store_error(schema: str) -> None:
    """A connection killed by the server mid-read surfaces as a StoreError (retcode 102,
    HTTP 503), not as a driver exception; the next read gets a fresh connection."""
    with PgIdentityStore(PG_DSN, schema=schema, pool_size=1) as store:
        with pytest.raises(StoreError, match="PostgreSQL at"):
            with store.read() as view:
                backend = view._conn.info.backend_pid  # this read's own connection only
                _run(schema, f"SELECT pg_terminate_backend({int(backend)})")
                view.vuin_of("raw:A")
        with store.read() as view:
            assert view.vuin_of("raw:A") is None


def test_a_write_the_server_fails_is_told_by_health_until_one_goes_through(
        schema: str) -> None:
    with PgIdentityStore(PG_DSN, schema=schema, pool_size=1) as store:
        with store.read() as view:  # the pool's one connection, which the writer uses next
            backend = view._conn.info.backend_pid
        _run(schema, f"SELECT pg_terminate_backend({int(backend)})")
        with pytest.raises(StoreError, match="PostgreSQL at"):
            store.write_sync(lambda view: set_both(view, "raw:A", 1))
        assert "its last write failed" in (store.health() or "")
        store.write_sync(lambda view: set_both(view, "raw:A", 1))  # a fresh connection
        assert store.health() is None
        with store.read() as view:
            assert view.vuin_of("raw:A") == 1


def test_probes_asked_in_one_turn_go_as_one_statement_with_each_callers_answer(
        schema: str) -> None:
    """probe_soon: what probe answers, for every caller of the turn, in one round trip."""
    with PgIdentityStore(PG_DSN, schema=schema) as store:
        store.write_sync(lambda view: set_both(view, "raw:A", 1))
        store.write_sync(lambda view: view.set_last_seen(1, "S1", LastSeen("raw:A", 0.0)))
        wanted = [("raw:A", "S1"), ("raw:A", "S2"), ("raw:A", None), ("raw:new", "S1"),
                  ("raw:A", "S1")]

        async def together() -> list[tuple[int | None, bool]]:
            return list(await asyncio.gather(*(store.probe_soon(key, scene)
                                               for key, scene in wanted)))

        trips = scraped("gensokyo_backend_round_trips", "postgres")
        answers = run(together())
        assert scraped("gensokyo_backend_round_trips", "postgres") == trips + 1
        assert answers == [store.probe(key, scene) for key, scene in wanted]
        assert answers[:4] == [(1, True), (1, False), (1, False), (None, False)]


def test_new_identities_resolved_at_once_are_looked_up_in_one_round_trip(
        schema: str) -> None:
    """64 callers resolving new keys: one lookup for all, then their batch (one more),
    instead of a lookup each before it."""
    with PgIdentityStore(PG_DSN, schema=schema) as store:
        graph = IdentityGraph(store)
        keys = [RawId(f"new{n}") for n in range(64)]

        async def together() -> list[int]:
            return [r.vuin for r in await asyncio.gather(
                *(graph.resolve([key], scene="S") for key in keys))]

        trips = scraped("gensokyo_backend_round_trips", "postgres")
        assert sorted(run(together())) == list(range(1, 65))
        assert scraped("gensokyo_backend_round_trips", "postgres") == trips + 2
        assert store.commit_stats[0] == 1


def test_a_lookup_the_server_fails_fails_every_caller_of_the_turn(schema: str) -> None:
    with PgIdentityStore(PG_DSN, schema=schema) as store:
        _run(schema, "DROP TABLE last_seen")

        async def together() -> list[object]:
            return list(await asyncio.gather(*(store.probe_soon(f"raw:{n}", "S")
                                               for n in range(3)), return_exceptions=True))

        answers = run(together())
        assert all(isinstance(answer, StoreError) for answer in answers), answers
