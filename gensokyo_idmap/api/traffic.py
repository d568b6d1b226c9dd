"""The daemon's traffic as running totals, read from the counters ``/metrics`` reads too:
platform events in, OneBot events out, OneBot actions answered; of every bot, or of one
(the counters' ``bot`` label, its AppID). The console's chart and overview and
``/v1/stats`` show them."""

from __future__ import annotations

from gensokyo_idmap import counters, metrics

__all__ = ["totals"]


def totals(bot: str | None = None) -> dict[str, float]:
    """Events in, events out and actions answered since the process started: of ``bot``
    (an AppID), or of all bots."""
    actions = sum(sample.value for family in metrics.ACTION_SECONDS.collect()
                  for sample in family.samples if sample.name.endswith("_count")
                  and bot in (None, sample.labels.get("bot")))
    return {
        "events in": sum(count.value for labels, count in counters.EVENTS_IN.children()
                         if bot in (None, labels[1])),
        "events out": sum(count.value for labels, count in counters.EVENTS_OUT.children()
                          if bot in (None, labels[1])),
        "actions": actions,
    }
