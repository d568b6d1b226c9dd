from __future__ import annotations

from gensokyo_idmap.api.console.chart import rate_chart
from gensokyo_idmap.api.console.rates import RateHistory


def test_rates_are_differences_over_time_and_an_hour_is_kept() -> None:
    now = [0.0]
    totals = {"events in": 0.0}
    history = RateHistory(lambda: totals, step=10, span=60, clock=lambda: now[0])
    assert history.latest() == {}
    for value in (0, 50, 150, 150, 100):  # the last: a count that went down
        totals["events in"] = value
        history.sample()
        now[0] += 10
    assert history.series() == {"events in": [5.0, 10.0, 0.0, 0.0]}
    assert history.latest() == {"events in": 0.0}
    for _ in range(10):
        history.sample()
        now[0] += 10
    assert len(history.series()["events in"]) == 6  # 60 s of 10 s steps


def test_the_chart_draws_one_line_per_series_with_the_latest_rate() -> None:
    svg = rate_chart({"events in": [1.0, 3.0], "actions": [], "<x>": [0.5]}, 10, 3600)
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert svg.count("<polyline") == 2
    assert "events in 3.00/s" in svg and "&lt;x&gt;" in svg and "<x>" not in svg
    assert ">5/s<" in svg  # the axis top: the next of 1, 2, 5 x 10^n above the peak


def test_to_now_adds_the_step_in_progress() -> None:
    now = [0.0]
    totals = {"events in": 0.0}
    history = RateHistory(lambda: totals, step=10, clock=lambda: now[0])
    history.sample()
    now[0], totals["events in"] = 4.0, 8.0
    assert history.series() == {"events in": []}
    assert history.series(to_now=True) == {"events in": [2.0]}
    assert history.latest() == {"events in": 2.0}


def test_sizes_read_as_people_read_them() -> None:
    from gensokyo_idmap.api.console.pages import human_size
    assert [human_size(n) for n in (None, 0, 1023, 57344, 67108864)] == [
        "—", "0 B", "1023 B", "56.0 KiB", "64.0 MiB"]


def test_a_burst_in_the_step_in_progress_keeps_the_chart_scale() -> None:
    """One event a second, sampled every 10 s; five more arrive in the second after a
    sample: the point of the step in progress is a rate over a whole step or more, not 5/s
    over that second, and the chart's axis stays where the steady traffic put it."""
    now = [0.0]
    totals = {"events in": 0.0}
    history = RateHistory(lambda: totals, step=10, clock=lambda: now[0])
    for _ in range(12):
        history.sample()
        now[0] += 10
        totals["events in"] += 10
    history.sample()
    steady = rate_chart(history.series(to_now=True), 10, 3600)
    now[0] += 1.0
    totals["events in"] += 5
    series = history.series(to_now=True)
    assert series["events in"][:-1] == [1.0] * 12
    assert 1.0 <= series["events in"][-1] <= 1.5  # 15 events over 11 s, not 5 over 1
    assert history.latest()["events in"] <= 1.5
    assert ">1/s<" in steady and ">2/s<" in rate_chart(series, 10, 3600)  # not 5/s
