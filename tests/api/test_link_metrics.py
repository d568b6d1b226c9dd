"""api/link_metrics: the console's view of the framework connections and the gateway, as
the Prometheus series ``/metrics`` writes (parsed back as Prometheus reads them)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gensokyo_idmap.api.console.status import BotLink, FrameworkLink, GatewayLink, LinkView
from gensokyo_idmap.api.link_metrics import GATEWAY_STATES, LinkCollector

FIRST, SECOND = "102000001", "102000002"
NO_BOT = ("bot", "")  # a view not told per bot: the label is there, empty


def scraped(view: LinkView) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry(auto_describe=True)
    registry.register(LinkCollector(lambda: view))
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(generate_latest(registry).decode())
            for sample in family.samples}


def test_each_framework_connection_is_a_series_of_each_family() -> None:
    view = LinkView(frameworks=(
        FrameworkLink("reverse_ws", "ws://127.0.0.1:8080/ws", True, 3, 1),
        FrameworkLink("reverse_ws", "ws://127.0.0.1:8081/ws", False, 0, 0),
        FrameworkLink("http_post", "http://127.0.0.1:5700/", None, 2, 2),
        FrameworkLink("forward_ws", "connection 1", True, 5, 0)))
    found = scraped(view)
    reverse = (NO_BOT, ("target", "ws://127.0.0.1:8080/ws"), ("transport", "reverse_ws"))
    down = (NO_BOT, ("target", "ws://127.0.0.1:8081/ws"), ("transport", "reverse_ws"))
    post = (NO_BOT, ("target", "http://127.0.0.1:5700/"), ("transport", "http_post"))
    forward = (NO_BOT, ("target", "connection 1"), ("transport", "forward_ws"))
    assert found[("gensokyo_framework_connected", reverse)] == 1
    assert found[("gensokyo_framework_connected", down)] == 0
    assert found[("gensokyo_framework_connected", forward)] == 1
    assert ("gensokyo_framework_connected", post) not in found  # no connection to speak of
    assert found[("gensokyo_framework_events_owed", reverse)] == 3
    assert found[("gensokyo_framework_events_on_disk", reverse)] == 1
    assert found[("gensokyo_framework_events_owed", post)] == 2
    assert found[("gensokyo_framework_events_on_disk", post)] == 2
    assert found[("gensokyo_framework_events_owed", forward)] == 5
    assert not any(name.startswith("gensokyo_gateway") for name, _ in found)  # no gateway


def test_the_same_target_twice_is_two_series_not_a_duplicate() -> None:
    """Prometheus refuses a whole scrape that holds one series twice."""
    view = LinkView(frameworks=(FrameworkLink("reverse_ws", "ws://h/ws", True, 1, 0),
                                FrameworkLink("reverse_ws", "ws://h/ws", False, 2, 0)))
    found = scraped(view)
    assert found[("gensokyo_framework_connected",
                  (NO_BOT, ("target", "ws://h/ws"), ("transport", "reverse_ws")))] == 1
    assert found[("gensokyo_framework_connected",
                  (NO_BOT, ("target", "ws://h/ws #2"), ("transport", "reverse_ws")))] == 0


def test_the_gateway_state_is_one_series_per_state_and_its_counts_are_counters() -> None:
    for current in GATEWAY_STATES:
        found = scraped(LinkView(gateway=GatewayLink("s", 7, 2, 1, 4, current)))
        assert {state: found[("gensokyo_gateway_state", (NO_BOT, ("state", state)))]
                for state in GATEWAY_STATES} == {
                    state: 1.0 if state == current else 0.0 for state in GATEWAY_STATES}
        assert found[("gensokyo_gateway_resumes_total", (NO_BOT,))] == 2
        assert found[("gensokyo_gateway_identifies_total", (NO_BOT,))] == 1
        assert found[("gensokyo_gateway_pauses_total", (NO_BOT,))] == 4


def test_each_bots_frameworks_and_gateway_are_series_of_their_own() -> None:
    """Issue 34.5: labelled ``bot`` (the AppID): two bots' connections to one framework URL
    are two series (not one, not ``#2``), and each bot's gateway has its own states and
    counts (a bot whose gateway is off has none)."""
    view = LinkView(
        frameworks=(FrameworkLink("reverse_ws", "ws://h/ws", True, 1, 0, bot=FIRST),
                    FrameworkLink("reverse_ws", "ws://h/ws", False, 4, 4, bot=SECOND)),
        bots=(BotLink(FIRST, 1, gateway=GatewayLink("s1", 7, 2, 1, 0, "connected")),
              BotLink(SECOND, 20002, gateway=GatewayLink(None, None, 0, 0, 3, "paused")),
              BotLink("102000003", 3)))
    found = scraped(view)
    for bot, connected, owed in ((FIRST, 1, 1), (SECOND, 0, 4)):
        labels = (("bot", bot), ("target", "ws://h/ws"), ("transport", "reverse_ws"))
        assert found[("gensokyo_framework_connected", labels)] == connected
        assert found[("gensokyo_framework_events_owed", labels)] == owed
    for bot, state, pauses in ((FIRST, "connected", 0), (SECOND, "paused", 3)):
        assert found[("gensokyo_gateway_state", (("bot", bot), ("state", state)))] == 1
        assert found[("gensokyo_gateway_pauses_total", (("bot", bot),))] == pauses
    assert not any(("bot", "102000003") in labels for _, labels in found)
