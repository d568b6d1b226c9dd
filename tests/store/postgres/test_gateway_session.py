"""The gateway session in PostgreSQL: one row per bot and shard, saved by a writer thread
(the newest state written last), a server that does not answer retried and logged once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from structlog.testing import capture_logs

from gensokyo_idmap.errors import StoreError
from gensokyo_idmap.store.postgres.connect import connect
from gensokyo_idmap.store.postgres.gateway_session import PgGatewaySession
from gensokyo_idmap.store.postgres.migrate import upgrade

from ...store_backends import PG_DSN, fresh_schema

APP = "102000001"


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema() as name:
        with connect(PG_DSN, name) as conn:
            upgrade(conn, name)  # as opening the graph does
        yield name


def rows(schema: str) -> list[tuple[object, ...]]:
    with connect(PG_DSN, schema) as conn:
        return conn.execute("SELECT app_id, shard_index, shard_count, session_id, seq "
                            "FROM gateway_session ORDER BY 1, 2, 3").fetchall()


def test_each_shard_keeps_its_own_session(schema: str) -> None:
    first = PgGatewaySession(PG_DSN, APP, (0, 2), schema=schema)
    second = PgGatewaySession(PG_DSN, APP, (1, 2), schema=schema)
    assert first.load() == second.load() == (None, None)
    first.save("s0", 10)
    second.save("s1", 20)
    first.save("s0", 11)  # the newest wins
    first.close()
    second.close()
    assert rows(schema) == [(APP, 0, 2, "s0", 11), (APP, 1, 2, "s1", 20)]
    assert PgGatewaySession(PG_DSN, APP, (0, 2), schema=schema).load() == ("s0", 11)
    assert PgGatewaySession(PG_DSN, APP, (1, 2), schema=schema).load() == ("s1", 20)
    assert PgGatewaySession(PG_DSN, APP, (0, 1), schema=schema).load() == (None, None)
    assert PgGatewaySession(PG_DSN, "102999999", (0, 2), schema=schema).load() == (None, None)


def test_a_forgotten_session_is_saved_as_none(schema: str) -> None:
    state = PgGatewaySession(PG_DSN, APP, (0, 1), schema=schema)
    state.save("s", 5)
    state.save(None, None)  # op 9: identify afresh
    assert state.load() == (None, None)
    state.close()
    assert rows(schema) == [(APP, 0, 1, None, None)]


def test_a_server_that_does_not_answer_is_retried_and_logged_once_without_the_password(
        ) -> None:
    with capture_logs() as logs:
        state = PgGatewaySession("postgresql://gsk:s3cretpw@127.0.0.1:1/gsk", APP, (0, 1),
                                 retry_seconds=0.01)
        with pytest.raises(StoreError, match="cannot be reached") as refused:
            state.load()
        for seq in range(100):
            assert state.save("s", seq)  # handed over; the writer keeps trying
        state.close()
    assert state.writes == 0
    assert "s3cretpw" not in str(refused.value)
    failures = [e for e in logs if e["event"] == "[qq] gateway session not saved"]
    assert len(failures) == 1 and "s3cretpw" not in str(failures)
