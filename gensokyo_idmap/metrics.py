"""The daemon's Prometheus metrics: every metric object lives here, in one registry.

Code that counts something does one call at the point where it already logs the event
(``metrics.IDENTITY_HIT.inc()``); nothing here does I/O. The registry is this module's own
(not prometheus-client's global one), so tests and several in-process daemons never collide
on a name. Store sizes are not counted as they change: :class:`StoreSizeCollector` reads
them when ``/metrics`` is scraped.

Hot path: what is counted per event or per identity hit (resolutions, message ids, events
in and out) is a :class:`HotCounter`, whose pre-labelled ``inc`` is one plain add.
prometheus-client's ``Counter`` takes a lock per ``inc``; with five counts per inbound event
those locks were 5% of an event's cost.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gensokyo_idmap.store.base import MsgIdCounts, TableCounts

__all__ = [
    "ACTION_SECONDS",
    "BIND_RESULTS",
    "CONTENT_TYPE",
    "EVENTS_IN",
    "EVENTS_OUT",
    "EVENTS_UNENCODABLE",
    "IDENTITY_CREATE",
    "IDENTITY_HIT",
    "MSGID_CREATE",
    "MSGID_EXPIRED",
    "MSGID_HIT",
    "MSGID_LOOKUP",
    "MSGID_SWEEP_SECONDS",
    "REGISTRY",
    "HotCounter",
    "StoreSizeCollector",
    "render",
    "transport_of",
]

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

REGISTRY: Final = CollectorRegistry(auto_describe=True)


class HotChild:
    """One label combination of a :class:`HotCounter`."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1) -> None:
        self.value += amount


class HotCounter(Collector):
    """A labelled counter for the hot path: ``inc`` on a child is a plain add, read when
    ``/metrics`` is scraped.

    A plain add loses a count only if two threads bump one child at the same instant. In
    the daemon every bump runs on the event loop's thread (the CLI runs alone in its
    process), so none is lost; counters bumped from worker threads stay ``Counter``.
    """

    def __init__(self, name: str, documentation: str, labelnames: Iterable[str],
                 registry: CollectorRegistry) -> None:
        self._name = name
        self._documentation = documentation
        self._labelnames = tuple(labelnames)
        self._children: dict[tuple[str, ...], HotChild] = {}
        registry.register(self)

    def labels(self, *values: str) -> HotChild:
        if len(values) != len(self._labelnames):
            raise ValueError(f"{self._name}: expected labels {self._labelnames}, got {values}")
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = HotChild()
        return child

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self._name, self._documentation, labels=self._labelnames)
        for values, child in list(self._children.items()):
            family.add_metric(list(values), child.value)
        yield family


_IDENTITIES = HotCounter(
    "gensokyo_identity_resolutions", "Identity keys resolved, by result (create: a key "
    "written for the first time; hit: already known)", ["result"], registry=REGISTRY)
IDENTITY_CREATE: Final = _IDENTITIES.labels("create")
IDENTITY_HIT: Final = _IDENTITIES.labels("hit")

BIND_RESULTS: Final = Counter(
    "gensokyo_bind_results", "bind / rebind outcomes (moved, skipped, failed)",
    ["op", "outcome"], registry=REGISTRY)

_MSGIDS = HotCounter(
    "gensokyo_msgid_operations", "Message-id map operations: create (new virtual id), hit "
    "(known real id, TTL refreshed), lookup (virtual id asked for)", ["op"], registry=REGISTRY)
MSGID_CREATE: Final = _MSGIDS.labels("create")
MSGID_HIT: Final = _MSGIDS.labels("hit")
MSGID_LOOKUP: Final = _MSGIDS.labels("lookup")
MSGID_EXPIRED: Final = Counter(
    "gensokyo_msgid_expired", "Expired message ids deleted by the sweeper", registry=REGISTRY)
MSGID_SWEEP_SECONDS: Final = Histogram(
    "gensokyo_msgid_sweep_seconds", "Duration of one sweep of expired message ids",
    buckets=(0.001, 0.005, 0.02, 0.1, 0.5, 2.0, 10.0, 60.0), registry=REGISTRY)

EVENTS_IN: Final = HotCounter(
    "gensokyo_events_in", "Platform events received, by transport (webhook, gateway)",
    ["transport"], registry=REGISTRY)
EVENTS_OUT: Final = HotCounter(
    "gensokyo_events_out", "OneBot events handed to a framework connection, by transport",
    ["transport"], registry=REGISTRY)

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
    """Entries per table and file sizes of both stores, read at scrape time."""

    def __init__(self, identity_counts: Callable[[], TableCounts],
                 msgid_counts: Callable[[], MsgIdCounts], files: Iterable[Path]) -> None:
        self._identity_counts = identity_counts
        self._msgid_counts = msgid_counts
        self._files = tuple(files)

    def collect(self) -> Iterator[Metric]:
        entries = GaugeMetricFamily("gensokyo_store_entries", "Entries per table",
                                    labels=["store", "table"])
        counts = self._identity_counts()
        for table in ("identities", "vuins", "last_seen", "aliases", "config", "user_info"):
            entries.add_metric(["openid-map", table], getattr(counts, table))
        entries.add_metric(["msgid-map", "messages"], self._msgid_counts().live_or_unswept)
        yield entries
        sizes = GaugeMetricFamily("gensokyo_store_file_bytes", "Size of each store file",
                                  labels=["file"])
        for path in self._files:
            try:
                sizes.add_metric([path.name], os.stat(path).st_size)
            except OSError:
                continue
        yield sizes


def render(*extra: CollectorRegistry) -> bytes:
    """The Prometheus text of :data:`REGISTRY` and any ``extra`` registries."""
    return b"".join(generate_latest(registry) for registry in (REGISTRY, *extra))
