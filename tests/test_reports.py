"""reports.py: the JSON shapes the CLI prints and the HTTP API sends."""

from __future__ import annotations

from gensokyo_idmap.reports import memory_data
from gensokyo_idmap.tables import TableFigures


def test_the_stats_shape_of_the_memory() -> None:
    assert memory_data((1, 2), [TableFigures("delivery_keys", 3, 400)]) == {
        "rss_anon_bytes": 1, "rss_file_bytes": 2,
        "tables": [{"name": "delivery_keys", "entries": 3, "bytes": 400}]}
