"""The daemon's Prometheus metrics: one registry, written when ``/metrics`` is scraped.

What is counted per event or per identity hit lives in :mod:`gensokyo_idmap.counters` as
plain numbers, bumped where the event is logged; this module reads them at scrape time
(:class:`HotCounter`, :class:`DurationsCollector`), so the pure modules never load
prometheus-client and a bump on the hot path is one plain add. Store sizes are not counted
as they change either: :class:`StoreSizeCollector` reads them at scrape time. The few
metrics of the outer layers (unencodable events, action latency) are prometheus-client
objects here. The registry is this module's own (not prometheus-client's global one), so
tests and several in-process daemons never collide on a name.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Final, TypeVar

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from gensokyo_idmap import counters
from gensokyo_idmap.errors import StoreError
from gensokyo_idmap.runtime.base import MsgIdCounts
from gensokyo_idmap.store.base import LegacyCounts, TableCounts

__all__ = [
    "ACTION_SECONDS",
    "CONTENT_TYPE",
    "EVENTS_OUT",
    "EVENTS_UNENCODABLE",
    "REGISTRY",
    "DurationsCollector",
    "HotCounter",
    "StoreSizeCollector",
    "render",
    "transport_of",
]

T = TypeVar("T")

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

REGISTRY: Final = CollectorRegistry(auto_describe=True)


class HotCounter(Collector):
    """A :class:`counters.Family` in a registry: its counts are read when ``/metrics`` is
    scraped (``created``: write the ``_created`` series, as prometheus-client's ``Counter``
    does)."""

    def __init__(self, family: counters.Family, registry: CollectorRegistry | None = None, *,
                 created: bool = False) -> None:
        self.family = family
        self._created = created
        if registry is not None:
            registry.register(self)

    def collect(self) -> Iterator[Metric]:
        family = self.family
        metric = CounterMetricFamily(family.name, family.documentation,
                                     labels=family.labelnames)
        for values, count in family.children():
            metric.add_metric(list(values), count.value,
                              created=count.created if self._created else None)
        yield metric


class DurationsCollector(Collector):
    """:class:`counters.Durations` as a Prometheus histogram, read at scrape time."""

    def __init__(self, durations: counters.Durations, registry: CollectorRegistry) -> None:
        self.durations = durations
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        durations = self.durations
        per_bucket, total = durations.snapshot()
        cumulative: list[tuple[str, float]] = []
        seen = 0
        for bound, n in zip((*durations.buckets, math.inf), per_bucket, strict=True):
            seen += n
            cumulative.append(("+Inf" if bound == math.inf else repr(float(bound)), seen))
        metric = HistogramMetricFamily(durations.name, durations.documentation,
                                       buckets=cumulative, sum_value=total)
        metric.add_sample(f"{durations.name}_created", {}, durations.created)
        yield metric


#: Counts that were prometheus-client ``Counter`` objects: they keep their ``_created``
#: series, so ``/metrics`` shows what it showed before they moved to ``counters``.
_WITH_CREATED: Final = frozenset({"gensokyo_bind_results", "gensokyo_msgid_expired"})

for _family in counters.FAMILIES:  # in the order /metrics writes them
    if isinstance(_family, counters.Durations):
        DurationsCollector(_family, REGISTRY)
    else:
        HotCounter(_family, REGISTRY, created=_family.name in _WITH_CREATED)

#: Counted by the bridge, which reads it here.
EVENTS_OUT: Final = counters.EVENTS_OUT

EVENTS_UNENCODABLE: Final = Counter(
    "gensokyo_events_unencodable", "OneBot events dropped from one sink because they cannot "
    "be encoded (never retried), by sink: http_post, outbox, reverse_ws, forward_ws",
    ["sink"], registry=REGISTRY)

ACTION_SECONDS: Final = Histogram(
    "gensokyo_action_seconds", "OneBot action latency, from parsed request to response",
    ["action"], buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                         2.5, 5.0, 10.0), registry=REGISTRY)

#: Sink class name → transport label (a sink is any object with ``publish``).
_TRANSPORTS: Final = {
    "ReverseWsClient": "reverse_ws",
    "ForwardWsServer": "forward_ws",
    "HttpPostTarget": "http_post",
}


def transport_of(sink: object) -> str:
    """The ``transport`` label of an event sink (its class name when unknown)."""
    name = type(sink).__name__
    return _TRANSPORTS.get(name, name)


class StoreSizeCollector(Collector):
    """Entries per table and file sizes of both stores, read at scrape time.

    A store on a server that does not answer (PostgreSQL, Redis: at start or later) leaves
    its entries out of that scrape; every other metric is still written, and ``/healthz``
    says what is down. Registering asks no store (:meth:`describe`), so a daemon can start
    while one is down."""

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


def _unless_down(count: Callable[[], T]) -> T | None:
    try:
        return count()
    except StoreError:
        return None


def render(*extra: CollectorRegistry) -> bytes:
    """The Prometheus text of :data:`REGISTRY` and any ``extra`` registries."""
    return b"".join(generate_latest(registry) for registry in (REGISTRY, *extra))
