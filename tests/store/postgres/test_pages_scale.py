"""The console's lists on a PostgreSQL graph of 100,000 identities read no more than they
read on one of 100 (issue 35.1): counted by the server itself, as the rows its scans of the
graph's tables read (and the index probes it made) within the one transaction a page reads
in (``pg_stat_xact_user_tables``). A page that scanned a table would read 100,000 rows of
it; one that reads an index a page at a time reads about a page."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import pytest

from gensokyo_idmap.api.console.browse import chat_page, identity_page
from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore
from gensokyo_idmap.runtime.msgid import MsgIdMap
from gensokyo_idmap.store.postgres.connect import connect
from gensokyo_idmap.store.postgres.identity import PgIdentityStore

from ...store_backends import PG_DSN, fresh_schema

APP: Final = "102000001"
GROUPS: Final = 20
_TABLES: Final = ("identity_to_vuin", "vuin_to_identity", "last_seen", "vuin_alias")


def fill(schema: str, people: int) -> None:
    """As tests/api/console/test_browse_scale.py: each person in its C2C chat and in one of
    :data:`GROUPS` groups, and the groups; written with COPY, then analysed."""
    forward, sets, seen = io.StringIO(), io.StringIO(), io.StringIO()
    for n in range(people + GROUPS):
        if n < people:
            key = OpenId(APP, f"{n:032X}").key
            seen.write(f"{n + 1}\tQQ:{APP}:c2c:{n:032X}\t{key}\t{1000 + n}\n")
            seen.write(f"{n + 1}\tQQ:{APP}:group:G{n % GROUPS:031X}\t{key}\t1\n")
        else:
            key = OpenId(APP, f"G{n - people:031X}").key
            seen.write(f"{n + 1}\tQQ:{APP}:group:G{n - people:031X}\t{key}\t2\n")
        forward.write(f"{key}\t{n + 1}\n")
        sets.write(f"{n + 1}\t{key}\n")
    with connect(PG_DSN, schema) as conn:
        with conn.transaction():
            for table, columns, data in (
                    ("vuin_to_identity", "vuin, key", sets),
                    ("identity_to_vuin", "key, vuin", forward),
                    ("last_seen", "vuin, scene, identity, since", seen)):
                with conn.cursor().copy(
                        f"COPY {table} ({columns}) FROM STDIN".encode()) as copy:
                    copy.write(data.getvalue())
        conn.autocommit = True
        conn.execute(b"VACUUM ANALYZE")


class OneView:
    """A store whose reads are all one transaction (the one the statistics are of)."""

    def __init__(self, view: Any) -> None:
        self.view = view

    @contextmanager
    def read(self) -> Iterator[Any]:
        yield self.view


def rows_read(view: Any) -> int:
    """Rows this transaction's scans of the graph's tables read so far."""
    found = view._conn.execute(
        "SELECT coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0)), 0), "
        "coalesce(sum(idx_scan), 0) FROM pg_stat_xact_user_tables "
        "WHERE schemaname = current_schema() AND relname = ANY(%s)", (list(_TABLES),)).fetchone()
    return int(found[0]) + int(found[1])  # an index scan reads at least its probe


def page_rows(schema: str, tmp: Path, people: int) -> dict[str, int]:
    with PgIdentityStore(PG_DSN, schema=schema, pool_size=2):
        pass  # the schema made
    fill(schema, people)
    msgid_store = LmdbMsgIdStore(tmp / "msgid-map.db")
    msgids = MsgIdMap(msgid_store)
    found: dict[str, int] = {}
    try:
        with PgIdentityStore(PG_DSN, schema=schema, pool_size=2) as store:
            pages = {
                "identities": lambda one: identity_page(one, None),
                "identities, next page": lambda one: identity_page(one, people - 30),
                "chats": lambda one: chat_page(one, msgids, None, [APP]),
                "chats, C2C": lambda one: chat_page(one, msgids, None, [APP], ["c2c"]),
                "a group's members": lambda one: one.view.seen_in(
                    f"QQ:{APP}:group:G{3:031X}", None, 101),
            }
            for name, page in pages.items():
                with store.read() as view:
                    before = rows_read(view)
                    page(OneView(view))
                    found[name] = rows_read(view) - before
    finally:
        msgid_store.close()
    return found


@pytest.mark.slow
def test_list_pages_read_the_same_rows_over_100000_identities_as_over_100(
        tmp_path: Path) -> None:
    with fresh_schema() as small_schema, fresh_schema() as large_schema:
        (tmp_path / "small").mkdir()
        (tmp_path / "large").mkdir()
        small = page_rows(small_schema, tmp_path / "small", 100)
        large = page_rows(large_schema, tmp_path / "large", 100_000)
    print({name: (small[name], large[name]) for name in small})
    for name in small:
        # with 100 identities the planner rightly scans the small tables whole, so the
        # small graph may read more; with 100,000 a page reads about a page of rows, where
        # a scan of one table would read 100,000
        assert 0 < large[name] <= 2 * small[name] + 50, (name, small, large)
        assert large[name] < 2_000, (name, large[name])
