"""outbox.db's own reads: the names it owes events under (issue 34.5: what the daemon
compares with the names of its connections at start)."""

from __future__ import annotations

import uuid
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gensokyo_idmap.store.lmdb.outbox import LmdbOutboxStore

NAMES = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)),
                min_size=1, max_size=30)


def test_sinks_name_each_sink_with_its_entries_count(tmp_path: Path) -> None:
    store = LmdbOutboxStore(tmp_path / "outbox.db")
    try:
        with store.read() as view:
            assert view.sinks() == {}
        store.write_sync(lambda view: [view.add(sink, b"{}") for sink in (
            "reverse_ws ws://a/ (self_id 2)", "reverse_ws ws://a/", "reverse_ws ws://a/",
            "http_post http://b/")])
        store.write_sync(lambda view: view.remove("http_post http://b/", 4))
        with store.read() as view:
            assert view.sinks() == {"reverse_ws ws://a/": 2,
                                    "reverse_ws ws://a/ (self_id 2)": 1}
    finally:
        store.close()


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(NAMES, max_size=12))
def test_sinks_count_what_was_added_under_each_name(tmp_path: Path, names: list[str]) -> None:
    store = LmdbOutboxStore(tmp_path / f"{uuid.uuid4()}.db")
    try:
        if names:
            store.write_sync(lambda view: [view.add(name, b"x") for name in names])
        with store.read() as view:
            found = view.sinks()
        in_key_order = sorted(set(names), key=lambda name: name.encode())
        assert list(found.items()) == [(name, names.count(name)) for name in in_key_order]
    finally:
        store.close()
