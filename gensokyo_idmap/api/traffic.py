"""The daemon's traffic as running totals, read from the counters ``/metrics`` reads too:
platform events in, OneBot events out, OneBot actions answered; of every bot, or of one
(the counters' ``bot`` label, its AppID). The console's chart and overview and
``/v1/stats`` show them."""

from __future__ import annotations

from gensokyo_idmap import counters

__all__ = ["totals"]


def totals(bot: str | None = None) -> dict[str, float]:
    """Events in, events out and actions answered since the process started: of ``bot``
    (an AppID), or of all bots."""
    actions = float(sum(sum(durations.snapshot()[0])  # the count of each histogram
                        for labels, durations in counters.ACTION_SECONDS.children()
                        if bot in (None, labels[1])))
    return {
        "events in": sum(count.value for labels, count in counters.EVENTS_IN.children()
                         if bot in (None, labels[1])),
        "events out": sum(count.value for labels, count in counters.EVENTS_OUT.children()
                          if bot in (None, labels[1])),
        "actions": actions,
    }
