"""metrics: the pure counts (counters.py) render as Prometheus counters and histograms, like
prometheus-client's."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gensokyo_idmap.counters import Durations, DurationsFamily, Family
from gensokyo_idmap.metrics import (
    DurationsCollector,
    HotCounter,
    MemoryTablesCollector,
    StoreSizeCollector,
)
from gensokyo_idmap.runtime.redis.state import RedisMsgIdMap
from gensokyo_idmap.store.base import TableCounts, legacy_counts
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.tables import TableFigures
from gensokyo_idmap.runtime.redis.scripts import RedisMsgIds
from gensokyo_idmap.runtime.redis.connection import RedisRuntime
from gensokyo_idmap.testing import free_port


def test_hot_counter_renders_each_label_set_as_a_total() -> None:
    registry = CollectorRegistry(auto_describe=True)
    counter = Family("test_things", "Things counted", ["kind"])
    HotCounter(counter, registry)
    counter.labels("a").inc()
    counter.labels("a").inc(2)
    counter.labels("b").inc()
    text = generate_latest(registry).decode()
    assert "# TYPE test_things_total counter" in text  # as prometheus-client writes it
    assert 'test_things_total{kind="a"} 3.0' in text
    assert 'test_things_total{kind="b"} 1.0' in text
    assert "test_things_created" not in text


def test_the_registry_writes_no_created_series_and_the_process_and_python_ones() -> None:
    """Every counter and histogram once came with a ``*_created`` twin (prometheus-client's
    own objects and two of ours): none now, whichever kind wrote it; the ``process_*`` and
    ``python_*`` families operators' dashboards expect are there."""
    from gensokyo_idmap import counters, metrics

    counters.EVENTS_UNENCODABLE.labels("test_sink")  # labelled families, bumped or not
    counters.ACTION_SECONDS.labels("test_action", "102000001").observe(0.01)
    text = metrics.render().decode()
    assert "_created" not in text
    names = {family.name for family in text_string_to_metric_families(text)}
    assert {"gensokyo_events_unencodable", "gensokyo_action_seconds",
            "gensokyo_bind_results", "gensokyo_msgid_sweep_seconds"} <= names
    assert {"process_cpu_seconds", "process_resident_memory_bytes", "process_open_fds",
            "process_start_time_seconds", "python_info", "python_gc_collections"} <= names


def test_unlabelled_family_shows_zero_before_its_first_bump() -> None:
    registry = CollectorRegistry(auto_describe=True)
    HotCounter(Family("test_plain", "Plain"), registry)
    assert "test_plain_total 0.0" in generate_latest(registry).decode()


def test_durations_render_as_a_cumulative_histogram() -> None:
    registry = CollectorRegistry(auto_describe=True)
    durations = Durations("test_seconds", "Seconds", buckets=(0.1, 1.0))
    DurationsCollector(durations, registry)
    for seconds in (0.05, 0.1, 0.5, 7.0):
        durations.observe(seconds)
    text = generate_latest(registry).decode()
    assert 'test_seconds_bucket{le="0.1"} 2.0' in text  # a bound is inside its bucket
    assert 'test_seconds_bucket{le="1.0"} 3.0' in text
    assert 'test_seconds_bucket{le="+Inf"} 4.0' in text
    assert "test_seconds_count 4.0" in text
    assert "test_seconds_sum 7.65" in text
    assert "test_seconds_created" not in text


def test_labelled_durations_render_one_histogram_per_label_set() -> None:
    """A :class:`DurationsFamily` (the action latency's kind): each label set its own
    cumulative buckets, count and sum, labelled as prometheus-client's Histogram writes
    them; a label set is made once and kept."""
    registry = CollectorRegistry(auto_describe=True)
    family = DurationsFamily("test_latency", "Latency", ["action", "bot"], buckets=(0.1, 1.0))
    DurationsCollector(family, registry)
    assert family.labels("send", "1") is family.labels("send", "1")
    family.labels("send", "1").observe(0.05)
    family.labels("send", "1").observe(2.0)
    family.labels("get", "1").observe(0.5)
    with pytest.raises(ValueError, match="test_latency"):
        family.labels("send")
    text = generate_latest(registry).decode()
    assert 'test_latency_bucket{action="send",bot="1",le="0.1"} 1.0' in text
    assert 'test_latency_bucket{action="send",bot="1",le="+Inf"} 2.0' in text
    assert 'test_latency_count{action="send",bot="1"} 2.0' in text
    assert 'test_latency_bucket{action="get",bot="1",le="0.1"} 0.0' in text
    assert 'test_latency_bucket{action="get",bot="1",le="1.0"} 1.0' in text
    assert 'test_latency_sum{action="get",bot="1"} 0.5' in text


def test_hot_counter_children_are_shared_per_label_set() -> None:
    counter = Family("test_shared", "Shared", ["kind"])
    assert counter.labels("x") is counter.labels("x")
    assert counter.labels("x") is not counter.labels("y")


def test_hot_counter_refuses_the_wrong_number_of_labels() -> None:
    counter = Family("test_labels", "Labels", ["a", "b"])
    with pytest.raises(ValueError, match="test_labels"):
        counter.labels("only-one")


def test_store_sizes_register_without_asking_and_leave_out_a_server_that_is_down(
        tmp_path: Path) -> None:
    """The message ids on a Redis nothing listens at (a daemon started while it is down):
    registering the collector asks no store, and a scrape writes the graph's entries and
    the files' sizes, without the message ids."""
    msgids = RedisMsgIdMap(RedisMsgIds(RedisRuntime(f"redis://127.0.0.1:{free_port()}/0")))
    path = tmp_path / "openid-map.db"
    with LmdbIdentityStore(path) as store:
        def identity_counts() -> TableCounts:
            with store.read() as view:
                return view.counts()

        registry = CollectorRegistry(auto_describe=True)
        registry.register(StoreSizeCollector(identity_counts, partial(legacy_counts, store),
                                             msgids.counts, [path]))
        text = generate_latest(registry).decode()
    assert 'gensokyo_store_entries{store="openid-map",table="identities"} 0.0' in text
    assert 'gensokyo_store_file_bytes{file="openid-map.db"}' in text
    assert "msgid-map" not in text


def test_memory_tables_are_a_gauge_pair_per_table_read_at_each_scrape() -> None:
    figures = [TableFigures("delivery_keys", 3, 400)]
    registry = CollectorRegistry(auto_describe=True)
    registry.register(MemoryTablesCollector(lambda: figures))  # describes without reading
    figures = [TableFigures("delivery_keys", 5, 600), TableFigures("member_profiles", 0, 64)]
    families = {f.name: f for f in text_string_to_metric_families(
        generate_latest(registry).decode())}
    assert [(s.labels, s.value) for s in families["gensokyo_memory_table_entries"].samples] == [
        ({"table": "delivery_keys"}, 5.0), ({"table": "member_profiles"}, 0.0)]
    assert [(s.labels, s.value) for s in families["gensokyo_memory_table_bytes"].samples] == [
        ({"table": "delivery_keys"}, 600.0), ({"table": "member_profiles"}, 64.0)]
