"""The daemon's Prometheus metrics: one registry, written when ``/metrics`` is scraped.

What is counted per event or per identity hit lives in :mod:`gensokyo_idmap.counters` as
plain numbers, bumped where the event is logged; this module reads them at scrape time
(:class:`HotCounter`, :class:`DurationsCollector`), so a bump on the hot path is one plain
add, and only this module loads prometheus-client: the API imports it at the first scrape
(``api/server.py``), so a daemon nobody scrapes never loads it. Store sizes are not counted
as they change either: :class:`StoreSizeCollector` reads them at scrape time. The registry
is this module's own (not prometheus-client's global one), so tests and several in-process
daemons never collide on a name; it carries prometheus-client's ``process_*`` and
``python_*`` collectors too, as operators' dashboards expect.

No ``*_created`` series are written: every counter and histogram would otherwise come with
a second series holding its start time, which doubles what Prometheus stores and shows up
as a duplicate of each metric in Grafana's metric browser. ``process_start_time_seconds``
says when the process started. They are switched off with
``prometheus_client.disable_created_metrics()`` as this module is imported, not with the
``PROMETHEUS_DISABLE_CREATED_SERIES`` environment variable: that one is read once, when
prometheus-client is first imported, so it would depend on which module got there first and
on the environment the daemon was started with. Both are process-wide; the daemon is the
only user of prometheus-client in its process.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Final, TypeVar

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from gensokyo_idmap import counters
from gensokyo_idmap.runtime.base import MsgIdCounts
from gensokyo_idmap.store.base import LegacyCounts, TableCounts
from gensokyo_idmap.tables import TableFigures

__all__ = [
    "CONTENT_TYPE",
    "REGISTRY",
    "BackendUpCollector",
    "DataDirCollector",
    "DurationsCollector",
    "HotCounter",
    "MemoryTablesCollector",
    "StoreSizeCollector",
    "render",
]

T = TypeVar("T")

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

disable_created_metrics()  # type: ignore[no-untyped-call]  # see the module docstring

REGISTRY: Final = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)  # process_cpu_seconds_total, process_open_fds, …
PlatformCollector(registry=REGISTRY)  # python_info
GCCollector(registry=REGISTRY)  # python_gc_*: read from gc.get_stats() when scraped


class HotCounter(Collector):
    """A :class:`counters.Family` in a registry: its counts are read when ``/metrics`` is
    scraped."""

    def __init__(self, family: counters.Family, registry: CollectorRegistry | None = None
                 ) -> None:
        self.family = family
        if registry is not None:
            registry.register(self)

    def collect(self) -> Iterator[Metric]:
        family = self.family
        metric = CounterMetricFamily(family.name, family.documentation,
                                     labels=family.labelnames)
        for values, count in family.children():
            metric.add_metric(list(values), count.value)
        yield metric


class DurationsCollector(Collector):
    """:class:`counters.Durations` (or a :class:`counters.DurationsFamily`, one histogram
    per combination of labels) as a Prometheus histogram, read at scrape time."""

    def __init__(self, durations: counters.Durations | counters.DurationsFamily,
                 registry: CollectorRegistry) -> None:
        self.durations = durations
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        durations = self.durations
        children: list[tuple[tuple[str, ...], counters.Durations]]
        if isinstance(durations, counters.DurationsFamily):
            labelnames, children = durations.labelnames, durations.children()
        else:
            labelnames, children = (), [((), durations)]
        metric = HistogramMetricFamily(durations.name, durations.documentation,
                                       labels=labelnames)
        for values, child in children:
            per_bucket, total = child.snapshot()
            cumulative: list[tuple[str, float]] = []
            seen = 0
            for bound, n in zip((*child.buckets, math.inf), per_bucket, strict=True):
                seen += n
                cumulative.append(("+Inf" if bound == math.inf else repr(float(bound)), seen))
            metric.add_metric(list(values), cumulative, total)
        yield metric


for _family in counters.FAMILIES:  # in the order /metrics writes them
    if isinstance(_family, counters.Durations | counters.DurationsFamily):
        DurationsCollector(_family, REGISTRY)
    else:
        HotCounter(_family, REGISTRY)

class BackendUpCollector(Collector):
    """``gensokyo_backend_up{backend}``: 1 when the stores on that backend answered the
    last scrape's probe, 0 when not. The probe is asynchronous (a server is asked, within
    a second) and a collector is not, so the API asks before it renders and hands the
    answers to :meth:`update`."""

    def __init__(self) -> None:
        self._up: dict[str, bool] = {}

    def update(self, up: dict[str, bool]) -> None:
        self._up = dict(up)

    def describe(self) -> Iterator[Metric]:
        yield _backend_up()

    def collect(self) -> Iterator[Metric]:
        metric = _backend_up()
        for backend, up in self._up.items():
            metric.add_metric([backend], 1.0 if up else 0.0)
        yield metric


def _backend_up() -> GaugeMetricFamily:
    return GaugeMetricFamily(
        "gensokyo_backend_up", "Whether the stores on a backend work (1) or not (0), asked "
        "at each scrape: lmdb (the data dir's files can be read and their last write did not "
        "fail), postgres (select 1 within a second), redis (PING within a second)",
        labels=["backend"])


class DataDirCollector(Collector):
    """``gensokyo_data_dir_free_bytes``: the space left for the daemon in its data dir
    (``statvfs``, as ``/healthz`` reads it), so an alert needs no node exporter."""

    def __init__(self, data_dir: Path) -> None:
        self._data_dir = data_dir

    def describe(self) -> Iterator[Metric]:
        yield _free_bytes()

    def collect(self) -> Iterator[Metric]:
        metric = _free_bytes()
        try:
            stats = os.statvfs(self._data_dir)
        except OSError:
            yield metric  # no sample: /healthz names why
            return
        metric.add_metric([], stats.f_bavail * stats.f_frsize)
        yield metric


def _free_bytes() -> GaugeMetricFamily:
    return GaugeMetricFamily(
        "gensokyo_data_dir_free_bytes", "Bytes free for the daemon on the data dir's file "
        "system (below 16 MiB /healthz reports the disk full)")


class StoreSizeCollector(Collector):
    """Entries per table and file sizes of both stores, read at scrape time.

    A store on a server that does not answer (PostgreSQL, Redis: at start or later), or
    one that cannot be read at all (an LMDB file closed by a failure), leaves its entries
    out of that scrape; every other metric is still written, ``gensokyo_backend_up`` is 0
    and ``/healthz`` says what is down. Registering asks no store (:meth:`describe`), so a
    daemon can start while one is down."""

    def __init__(self, identity_counts: Callable[[], TableCounts],
                 legacy_counts: Callable[[], LegacyCounts],
                 msgid_counts: Callable[[], MsgIdCounts], files: Iterable[Path]) -> None:
        self._identity_counts = identity_counts
        self._legacy_counts = legacy_counts
        self._msgid_counts = msgid_counts
        self._files = tuple(files)

    def describe(self) -> Iterator[Metric]:
        """The families, without reading a store (what a registry asks at registration)."""
        yield _store_entries()
        yield _file_sizes()

    def collect(self) -> Iterator[Metric]:
        entries = _store_entries()
        counts = _unless_down(self._identity_counts)
        if counts is not None:
            for table in ("identities", "vuins", "last_seen", "aliases"):
                entries.add_metric(["openid-map", table], getattr(counts, table))
        legacy = _unless_down(self._legacy_counts)
        if legacy is not None:
            for table in ("config", "user_info"):
                entries.add_metric(["openid-map", table], getattr(legacy, table))
        messages = _unless_down(self._msgid_counts)
        if messages is not None:
            entries.add_metric(["msgid-map", "messages"], messages.live_or_unswept)
        yield entries
        sizes = _file_sizes()
        for path in self._files:
            try:
                sizes.add_metric([path.name], os.stat(path).st_size)
            except OSError:
                continue
        yield sizes


def _store_entries() -> GaugeMetricFamily:
    return GaugeMetricFamily("gensokyo_store_entries", "Entries per table",
                             labels=["store", "table"])


def _file_sizes() -> GaugeMetricFamily:
    return GaugeMetricFamily("gensokyo_store_file_bytes", "Size of each store file",
                             labels=["file"])


class MemoryTablesCollector(Collector):
    """``gensokyo_memory_table_entries{table}`` and ``gensokyo_memory_table_bytes{table}``:
    the daemon's in-memory tables (:mod:`gensokyo_idmap.tables`), read at scrape time."""

    def __init__(self, figures: Callable[[], Sequence[TableFigures]]) -> None:
        self._figures = figures

    def describe(self) -> Iterator[Metric]:
        yield from _memory_tables()

    def collect(self) -> Iterator[Metric]:
        entries, size = _memory_tables()
        for table in self._figures():
            entries.add_metric([table.name], table.entries)
            size.add_metric([table.name], table.bytes)
        yield entries
        yield size


def _memory_tables() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
    return (GaugeMetricFamily("gensokyo_memory_table_entries", "Entries of each in-memory "
                              "table keyed by chat, person or message", labels=["table"]),
            GaugeMetricFamily("gensokyo_memory_table_bytes", "Estimated bytes each in-memory "
                              "table holds", labels=["table"]))


def _unless_down(count: Callable[[], T]) -> T | None:
    try:
        return count()
    except Exception:  # noqa: BLE001 - a server down (StoreError), a file closed: /healthz says
        return None


def render(*extra: CollectorRegistry) -> bytes:
    """The Prometheus text of :data:`REGISTRY` and any ``extra`` registries."""
    return b"".join(generate_latest(registry) for registry in (REGISTRY, *extra))
