"""A list page over 100,000 identities reads what it reads over 100 (issue 35.1).

The stores are real LMDB files; what is counted is every read the pages make of them, at
LMDB's own level: each ``get``, each cursor positioning or step, each entry a cursor
iteration yields (the views' transactions are wrapped, nothing else is changed). Seconds
are not measured (the machine is shared): a page that walked the graph would read a
thousand times more entries with 100,000 identities than with 100, one that reads an index
a page at a time reads the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import aiohttp
import pytest
from aiohttp import web

from gensokyo_idmap.api.server import ApiServer
from gensokyo_idmap.api.settings import ApiSettings
from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore, MsgIdView
from gensokyo_idmap.runtime.msgid import MsgContext, MsgIdMap
from gensokyo_idmap.store.base import LastSeen
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore, LmdbView

from ...conftest import run

APP: Final = "102000001"
GROUPS: Final = 20
MESSAGES: Final = 300
#: Cursor moves: positioning and stepping (each one reads a page of the B-tree at most).
_MOVES: Final = frozenset({
    "first", "last", "next", "prev", "next_dup", "prev_dup", "next_nodup", "prev_nodup",
    "set_key", "set_range", "set_key_dup", "set_range_dup", "first_dup", "last_dup",
    "get", "count"})


class Reads:
    count = 0


class CountingCursor:
    def __init__(self, cursor: Any, reads: Reads) -> None:
        self._cursor = cursor
        self._reads = reads

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._cursor, name)
        if name in _MOVES:
            def moved(*args: Any, **kwargs: Any) -> Any:
                self._reads.count += 1
                return attr(*args, **kwargs)
            return moved
        if name.startswith("iter"):
            def walked(*args: Any, **kwargs: Any) -> Iterator[Any]:
                for item in attr(*args, **kwargs):
                    self._reads.count += 1
                    yield item
            return walked
        return attr

    def __iter__(self) -> Iterator[Any]:
        for item in self._cursor:
            self._reads.count += 1
            yield item


class CountingTxn:
    def __init__(self, txn: Any, reads: Reads) -> None:
        self._txn = txn
        self._reads = reads

    def get(self, *args: Any, **kwargs: Any) -> Any:
        self._reads.count += 1
        return self._txn.get(*args, **kwargs)

    def cursor(self, *args: Any, **kwargs: Any) -> CountingCursor:
        return CountingCursor(self._txn.cursor(*args, **kwargs), self._reads)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._txn, name)


def fill(identities: LmdbIdentityStore, msgids: MsgIdMap, people: int) -> None:
    """``people`` people, each in its own C2C chat and one of :data:`GROUPS` groups (so a
    group has ``people / GROUPS`` members), the groups themselves, and :data:`MESSAGES`
    messages in the groups: the same messages however many people there are."""
    def write(view: LmdbView) -> None:
        for n in range(people):
            key = OpenId(APP, f"{n:032X}").key
            view.add_person(key, n + 1, f"QQ:{APP}:c2c:{n:032X}", 1_000.0 + n)
            view.set_last_seen(n + 1, f"QQ:{APP}:group:G{n % GROUPS:031X}", LastSeen(key, 1.0))
        for g in range(GROUPS):
            group = OpenId(APP, f"G{g:031X}").key
            view.add_person(group, people + g + 1, f"QQ:{APP}:group:G{g:031X}", 2.0)
        view.set_vuin_counter(people + GROUPS)

    identities.write_sync(write)
    for m in range(MESSAGES):
        group = MsgContext(APP, "group", f"G{m % GROUPS:031X}")
        msgids.store_real_sync(f"M{m}", group.about(people - m % people, f"message {m}"))


def counted(store: Any, view_class: type, reads: Reads) -> None:
    store.make_view = lambda txn, tables: view_class(CountingTxn(txn, reads), tables)


def page_reads(tmp: Path, people: int) -> dict[str, int]:
    """The store reads of each list page (and the next page of each) over ``people``."""
    identities = LmdbIdentityStore(tmp / "openid-map.db", map_size=1 << 30)
    msgid_store = LmdbMsgIdStore(tmp / "msgid-map.db")
    msgids = MsgIdMap(msgid_store)
    reads = Reads()
    found: dict[str, int] = {}
    try:
        fill(identities, msgids, people)
        counted(identities, LmdbView, reads)
        counted(msgid_store, MsgIdView, reads)
        server = ApiServer(IdentityGraph(identities), msgids, ApiSettings(
            app_id=APP, identity_path=tmp / "openid-map.db", msgid_path=tmp / "msgid-map.db"))
        group = f"QQ:{APP}:group:G{3:031X}"
        pages = {
            "identities": "/ui/identities",
            "identities, next page": f"/ui/identities?below={people - 30}",
            "identities, filtered": "/ui/identities?f=nobody",
            "chats": "/ui/chats",
            "chats, C2C": "/ui/chats?kind=c2c",
            "chats, C2C next page": f"/ui/chats?kind=c2c&after=QQ:{APP}:c2c:{people // 2:032X}",
            "a group": f"/ui/chats/{group}",
            "messages": "/ui/messages",
            "messages, filtered": "/ui/messages?f=message%201",
        }

        async def visit() -> None:
            runner = web.AppRunner(server.application(), access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            base = f"http://127.0.0.1:{runner.addresses[0][1]}"
            try:
                async with aiohttp.ClientSession() as session:
                    for name, path in pages.items():
                        reads.count = 0
                        async with session.get(base + path) as resp:
                            assert resp.status == 200, (path, await resp.text())
                            await resp.read()
                        found[name] = reads.count
            finally:
                await runner.cleanup()

        run(asyncio.wait_for(visit(), 120))
    finally:
        identities.close()
        msgid_store.close()
    return found


@pytest.mark.slow
def test_list_pages_read_the_same_over_100000_identities_as_over_100(tmp_path: Path) -> None:
    (tmp_path / "small").mkdir()
    (tmp_path / "large").mkdir()
    small = page_reads(tmp_path / "small", 100)
    large = page_reads(tmp_path / "large", 100_000)
    print({name: (small[name], large[name]) for name in small})
    for name in small:  # 1,000 times the identities: the same order of reads
        assert 0 < large[name] < 10 * small[name], (name, small[name], large[name])
    # a page of a list reads the same entries however large the graph: only a filter (which
    # reads up to SCAN entries where 100 identities have fewer) and a group's members (up
    # to a page of them where the small group has 5) read more, and as much at any size
    for name in ("identities", "identities, next page", "chats", "chats, C2C",
                 "chats, C2C next page", "messages", "messages, filtered"):
        assert large[name] <= small[name] + 20, (name, small[name], large[name])
