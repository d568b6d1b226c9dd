"""The framework connections and the gateway session as Prometheus metrics, read from the
daemon's :data:`~gensokyo_idmap.api.console.status.LinkStatus` when ``/metrics`` is scraped.

The console's overview and ``/metrics`` describe the same view, so an alert and the page an
operator opens after it never disagree, and nothing is counted twice: the figures are what
the parts keep anyway (each framework's queue and outbox count, the gateway client's
session and counts).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gensokyo_idmap.api.console.status import LinkStatus, LinkView

__all__ = ["GATEWAY_STATES", "LinkCollector"]

#: What :attr:`~gensokyo_idmap.api.console.status.GatewayLink.state` may say.
GATEWAY_STATES: Final = ("connecting", "connected", "paused", "stopped")

_FRAMEWORK_LABELS: Final = ("transport", "target", "bot")


class LinkCollector(Collector):
    """Per framework connection (``transport``, ``target``: its URL without credentials,
    or ``connection N`` of the forward WebSocket listener; ``bot``: the AppID whose events
    it carries): connected (0/1; an HTTP POST target has no connection, so no such series),
    events owed and of them those on disk; per bot (``bot``), its gateway's state (one
    series per state, 1 for the current one) and its resumes, identifies and pauses."""

    def __init__(self, link: LinkStatus) -> None:
        self._link = link

    def describe(self) -> Iterator[Metric]:
        """The families, without asking the daemon (what a registry asks at registration)."""
        yield from _families(LinkView())

    def collect(self) -> Iterator[Metric]:
        yield from _families(self._link())


def _families(view: LinkView) -> Iterator[Metric]:
    connected = GaugeMetricFamily(
        "gensokyo_framework_connected", "Whether a framework connection is up (1) or not (0), "
        "by transport (reverse_ws, forward_ws) and target", labels=_FRAMEWORK_LABELS)
    owed = GaugeMetricFamily(
        "gensokyo_framework_events_owed", "OneBot events handed to a framework connection and "
        "not yet confirmed, by transport and target", labels=_FRAMEWORK_LABELS)
    on_disk = GaugeMetricFamily(
        "gensokyo_framework_events_on_disk", "Of the events owed to a framework connection, "
        "those waiting in outbox.db (kept across a restart), by transport and target",
        labels=_FRAMEWORK_LABELS)
    seen: set[tuple[str, str, str]] = set()
    for link in view.frameworks:
        labels = (link.transport, link.name, link.bot)
        n = 1
        while labels in seen:  # the same URL configured twice: two series, never one twice
            n += 1
            labels = (link.transport, f"{link.name} #{n}", link.bot)
        seen.add(labels)
        if link.connected is not None:
            connected.add_metric(labels, 1.0 if link.connected else 0.0)
        owed.add_metric(labels, link.owed)
        on_disk.add_metric(labels, link.durable)
    yield connected
    yield owed
    yield on_disk
    state = GaugeMetricFamily(
        "gensokyo_gateway_state", "Each bot's gateway session's state, one series per state, "
        "1 for the current one: connecting, connected (a session is established), paused "
        "(reading stops until events can be processed), stopped (closed for good by the "
        "platform)", labels=["bot", "state"])
    counts = {name: CounterMetricFamily(f"gensokyo_gateway_{name}", text, labels=["bot"])
              for name, text in (("resumes", "Gateway sessions resumed, by bot"),
                                 ("identifies", "Gateway sessions identified afresh, by bot"),
                                 ("pauses", "Times a bot's gateway stopped reading because "
                                            "events could not be processed"))}
    gateways = ([(bot.app_id, bot.gateway) for bot in view.bots] if view.bots
                else [("", view.gateway)])
    for bot, gateway in gateways:
        if gateway is None:
            continue
        for name in GATEWAY_STATES:
            state.add_metric([bot, name], 1.0 if gateway.state == name else 0.0)
        counts["resumes"].add_metric([bot], gateway.resumes)
        counts["identifies"].add_metric([bot], gateway.identifies)
        counts["pauses"].add_metric([bot], gateway.pauses)
    yield state
    yield from counts.values()
