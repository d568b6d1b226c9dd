"""What the daemon counts, as plain numbers: no metrics library, no I/O.

The graph rules (``idmap``), the message-id rules (``msgid``) and the transports bump these
where they already log the event; ``metrics`` reads them when ``/metrics`` is scraped and
writes them as Prometheus text. So the pure modules load nothing but this one, and a bump
on the hot path is one plain add: no lock, no call into a metrics library (prometheus-client's
``Counter`` takes a lock per ``inc``; with five counts per inbound event those locks were 5%
of an event's cost).

A plain add loses a count only if two threads bump one number at the same instant. In the
daemon every bump of a :class:`Count` runs on the event loop's thread (the CLI runs alone in
its process); what a worker thread bumps (the sweeper's figures) is a :class:`SharedCount`
or :class:`Durations`, which take a lock.

Names and help texts are the Prometheus ones (``metrics`` adds ``_total`` to counters), kept
here so each metric is spelled once. Every metric the daemon keeps is one of these, so
prometheus-client loads only when ``/metrics`` is first scraped (an idle daemon that nobody
scrapes does without its 1.5 MiB: ``bench/idle_imports.py``).
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable
from typing import Final

__all__ = [
    "ACTION_SECONDS",
    "BACKEND_ERRORS",
    "BACKEND_POOL_WAITS",
    "BACKEND_ROUND_TRIPS",
    "BIND_RESULTS",
    "EVENTS_IN",
    "EVENTS_OUT",
    "EVENTS_UNENCODABLE",
    "FAMILIES",
    "HTTP_MALFORMED",
    "IDENTITY_CACHE",
    "IDENTITY_CREATE",
    "IDENTITY_HIT",
    "MSGID_CREATE",
    "MSGID_EXPIRED",
    "MSGID_HIT",
    "MSGID_LOOKUP",
    "MSGID_SWEEP_SECONDS",
    "WEBHOOK_RESPONSES",
    "Count",
    "Durations",
    "DurationsFamily",
    "Family",
    "SharedCount",
    "backend_of",
    "transport_of",
]


class Count:
    """One number that only grows."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1) -> None:
        self.value += amount


class SharedCount(Count):
    """A :class:`Count` bumped from more than one thread: each add under a lock."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def inc(self, amount: float = 1) -> None:
        with self._lock:
            self.value += amount


class Family:
    """A counter with labels: one :class:`Count` per combination of label values.

    Without label names the family has its one count from the start (``labels()``), the
    way an unlabelled Prometheus counter shows 0 before its first bump.
    """

    __slots__ = ("_children", "_count", "_pulled", "documentation", "labelnames", "name")

    def __init__(self, name: str, documentation: str, labelnames: Iterable[str] = (), *,
                 shared: bool = False) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._count: type[Count] = SharedCount if shared else Count
        self._children: dict[tuple[str, ...], Count] = {}
        self._pulled: dict[tuple[str, ...], list[Callable[[], float]]] = {}
        if not self.labelnames:
            self.labels()

    def labels(self, *values: str) -> Count:
        """The count of one label combination (made on first use; callers keep it)."""
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name}: expected labels {self.labelnames}, got {values}")
        child = self._children.get(values)
        if child is None:
            child = self._children.setdefault(values, self._count())
        return child

    def pull(self, values: tuple[str, ...], read: Callable[[], float]) -> Callable[[], None]:
        """Add what ``read()`` returns (a number another library counts, e.g. a connection
        pool's waits) to the count of ``values`` whenever the family is read; the function
        returned stops that (the pool closed: its last figure stays counted)."""
        count = self.labels(*values)
        sources = self._pulled.setdefault(values, [])
        sources.append(read)

        def stop() -> None:
            if read in sources:
                sources.remove(read)
                count.inc(read())

        return stop

    def children(self) -> list[tuple[tuple[str, ...], Count]]:
        """(label values, count) of every combination used so far, in order of first use."""
        if not any(self._pulled.values()):
            return list(self._children.items())
        found: list[tuple[tuple[str, ...], Count]] = []
        for values, count in self._children.items():
            sources = self._pulled.get(values)
            if sources:
                total = Count()
                total.value = count.value + sum(read() for read in sources)
                count = total
            found.append((values, count))
        return found


class Durations:
    """How long something took, in buckets (a histogram without labels), under a lock:
    what it times runs in a worker thread."""

    __slots__ = ("_lock", "bucket_counts", "buckets", "documentation", "name", "sum")

    def __init__(self, name: str, documentation: str, buckets: Iterable[float]) -> None:
        self.name = name
        self.documentation = documentation
        self.buckets = tuple(sorted(buckets))
        self.bucket_counts = [0] * (len(self.buckets) + 1)  # the last one: above every bound
        self.sum = 0.0
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        with self._lock:
            self.sum += seconds
            self.bucket_counts[bisect_left(self.buckets, seconds)] += 1

    def snapshot(self) -> tuple[list[int], float]:
        """(count per bucket, the last one above every bound; sum) read together."""
        with self._lock:
            return list(self.bucket_counts), self.sum


class DurationsFamily:
    """:class:`Durations` with labels: one per combination of label values, made on first
    use (callers keep it), in the family's buckets."""

    __slots__ = ("_children", "buckets", "documentation", "labelnames", "name")

    def __init__(self, name: str, documentation: str, labelnames: Iterable[str],
                 buckets: Iterable[float]) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.buckets = tuple(sorted(buckets))
        self._children: dict[tuple[str, ...], Durations] = {}

    def labels(self, *values: str) -> Durations:
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name}: expected labels {self.labelnames}, got {values}")
        child = self._children.get(values)
        if child is None:
            child = self._children.setdefault(
                values, Durations(self.name, self.documentation, self.buckets))
        return child

    def children(self) -> list[tuple[tuple[str, ...], Durations]]:
        """(label values, durations) of every combination used so far, in order of first
        use."""
        return list(self._children.items())


_IDENTITIES: Final = Family(
    "gensokyo_identity_resolutions", "Identity keys resolved, by result (create: a key "
    "written for the first time; hit: already known)", ["result"])
IDENTITY_CREATE: Final = _IDENTITIES.labels("create")
IDENTITY_HIT: Final = _IDENTITIES.labels("hit")

BIND_RESULTS: Final = Family(
    "gensokyo_bind_results", "bind / rebind outcomes (moved, skipped, failed)",
    ["op", "outcome"], shared=True)  # rare, and the CLI's and compat's calls may run anywhere

_MSGIDS: Final = Family(
    "gensokyo_msgid_operations", "Message-id map operations: create (new virtual id), hit "
    "(known real id, TTL refreshed), lookup (virtual id asked for)", ["op"])
MSGID_CREATE: Final = _MSGIDS.labels("create")
MSGID_HIT: Final = _MSGIDS.labels("hit")
MSGID_LOOKUP: Final = _MSGIDS.labels("lookup")

_EXPIRED: Final = Family("gensokyo_msgid_expired",
                         "Expired message ids deleted by the sweeper", shared=True)
MSGID_EXPIRED: Final = _EXPIRED.labels()
MSGID_SWEEP_SECONDS: Final = Durations(
    "gensokyo_msgid_sweep_seconds", "Duration of one sweep of expired message ids",
    buckets=(0.001, 0.005, 0.02, 0.1, 0.5, 2.0, 10.0, 60.0))

EVENTS_IN: Final = Family(
    "gensokyo_events_in", "Platform events received, by transport (webhook, gateway) and "
    "bot (its AppID)", ["transport", "bot"])
EVENTS_OUT: Final = Family(
    "gensokyo_events_out", "OneBot events handed to a framework connection, by transport and "
    "bot (its AppID)", ["transport", "bot"])

#: What the webhook answered the platform: a 5xx means an event was not processed (the
#: platform delivers it again), a 401 a callback that was not signed by this bot's secret.
WEBHOOK_RESPONSES: Final = Family(
    "gensokyo_webhook_responses", "Webhook callbacks answered, by HTTP status code (200 "
    "acknowledged; 4xx refused; 503 not processed: the platform delivers it again)", ["code"])

#: A OneBot event a sink could not encode (a bug, or a value JSON cannot hold): dropped from
#: that sink, never retried (:mod:`gensokyo_idmap.onebot.encoding`).
EVENTS_UNENCODABLE: Final = Family(
    "gensokyo_events_unencodable", "OneBot events dropped from one sink because they cannot "
    "be encoded (never retried), by sink: http_post, outbox, reverse_ws, forward_ws",
    ["sink"], shared=True)  # rare, and an outbox may encode off the loop

#: A request a listener could not parse (bad request line or header, a head too long):
#: answered 400 by aiohttp and logged a line a minute (:mod:`gensokyo_idmap.http_guard`).
HTTP_MALFORMED: Final = Family(
    "gensokyo_http_malformed_requests", "Requests a listener could not parse (answered 400), "
    "by listener: webhook.listen, api.listen, onebot.forward_ws, onebot.http_api",
    ["listener"])

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


#: Server check class name → ``backend`` label, as ``gensokyo_backend_*_total`` spell it.
_BACKENDS: Final = {"PgPing": "postgres", "RedisRuntime": "redis"}


def backend_of(check: object) -> str:
    """The ``backend`` label of a server a store lives on (its class name when unknown)."""
    name = type(check).__name__
    return _BACKENDS.get(name, name)


#: OneBot action latency, timed on the event loop by the action service.
ACTION_SECONDS: Final = DurationsFamily(
    "gensokyo_action_seconds", "OneBot action latency, from parsed request to response, by "
    "action and bot (the AppID it went out as)", ["action", "bot"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
             10.0))

#: The server backends (label ``backend``: ``postgres``, ``redis``). Bumped from the
#: writer thread and the worker threads as well as the loop: shared counts.
BACKEND_ROUND_TRIPS: Final = Family(
    "gensokyo_backend_round_trips", "Requests sent to a server backend, each one round trip "
    "(PostgreSQL: a statement outside a pipeline, or a pipeline; Redis: a command, script "
    "or pipeline), by backend", ["backend"], shared=True)
BACKEND_POOL_WAITS: Final = Family(
    "gensokyo_backend_pool_waits", "Times a caller had to wait for a free pooled "
    "connection, by backend (PostgreSQL; Redis opens one instead of waiting)", ["backend"],
    shared=True)
BACKEND_ERRORS: Final = Family(
    "gensokyo_backend_errors", "Calls to a server backend that failed (server down, "
    "connection lost, timeout), by backend", ["backend"], shared=True)

#: The identity cache of a daemon over a shared graph (store/identity_cache.py), read from
#: the cache's own counts when ``/metrics`` is scraped.
IDENTITY_CACHE: Final = Family(
    "gensokyo_identity_cache", "Identity cache over a PostgreSQL graph: lookups answered "
    "from memory (hit) or asked of PostgreSQL (miss), entries dropped for another write "
    "(invalidation) and whole clears (a Redis (re)subscription)", ["event"], shared=True)

#: Every family in the order ``/metrics`` writes them.
FAMILIES: Final[tuple[Family | Durations | DurationsFamily, ...]] = (
    _IDENTITIES, BIND_RESULTS, _MSGIDS, _EXPIRED, MSGID_SWEEP_SECONDS, EVENTS_IN, EVENTS_OUT,
    WEBHOOK_RESPONSES, BACKEND_ROUND_TRIPS, BACKEND_POOL_WAITS, BACKEND_ERRORS, IDENTITY_CACHE,
    EVENTS_UNENCODABLE, ACTION_SECONDS, HTTP_MALFORMED)
