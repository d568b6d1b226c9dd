"""examples/prometheus/alerts.yml and examples/grafana/dashboard.json against the real
daemon: every metric their expressions name is in the ``/metrics`` of a running daemon
(``gensokyo-idmap serve``, a real process, on the emulated platform's gateway and webhook,
with a reverse-WS framework connected and an HTTP POST target, so the labelled series
exist); ``promtool check rules`` takes the alerts and ``promtool test rules`` shows each one
fires when it should; the metrics docs/monitoring.md lists are the ones ``/metrics`` writes.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import ClientSession, web
from prometheus_client.parser import text_string_to_metric_families

from gensokyo_idmap.testing import (
    EmulatedPlatform,
    daemon_config,
    framework_server,
    free_port,
    running_daemon,
    until,
    ws_url,
)

from .test_inbound import QueueFramework

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "examples" / "prometheus" / "alerts.yml"
ALERT_TESTS = ROOT / "examples" / "prometheus" / "alerts_test.yml"
DASHBOARD = ROOT / "examples" / "grafana" / "dashboard.json"
MONITORING = ROOT / "docs" / "monitoring.md"
#: Our metrics and the process_* / python_* ones: what an expression may name.
METRIC = re.compile(r"\b((?:gensokyo|process|python)_[a-z0-9_]+)")


def scrape_running_daemon(workdir: Path) -> str:
    """The ``/metrics`` text of a real daemon with every part a series is labelled by:
    the gateway (connected), the webhook, a reverse-WS framework (connected, and its
    ``get_status`` answered) and an HTTP POST target."""
    api, webhook = free_port(), free_port()
    framework = QueueFramework()

    async def posted(request: web.Request) -> web.Response:
        return web.Response(status=204)

    async def main() -> str:
        async with EmulatedPlatform() as platform:
            server = await framework_server(framework.handle, posted)
            config = daemon_config(
                workdir / "data", platform=platform, webhook=f"127.0.0.1:{webhook}",
                api=f"127.0.0.1:{api}",
                onebot={"reverse_ws": [ws_url(server)],
                        "http_post": [{"url": str(server.make_url("/post"))}]})
            try:
                async with running_daemon(config, workdir, listening=[api, webhook]) as daemon, \
                        ClientSession() as session:
                    await until(lambda: framework.socket, 20, "the framework connected",
                                alive=daemon.alive)
                    assert framework.socket is not None
                    await framework.socket.send_json({"action": "get_status", "echo": 1})
                    text = ""

                    async def connected() -> bool:  # and the action's latency observed
                        nonlocal text
                        async with session.get(f"http://127.0.0.1:{api}/metrics") as resp:
                            assert resp.status == 200
                            text = await resp.text()
                        return (re.search(r'gensokyo_gateway_state\{bot="\d+",'
                                          r'state="connected"\} 1\.0', text) is not None
                                and "gensokyo_action_seconds_count" in text)

                    for _ in range(400):
                        daemon.alive()
                        if await connected():
                            return text
                        await asyncio.sleep(0.05)
                    raise AssertionError(f"the gateway never connected:\n{text}")
            finally:
                await server.close()

    return asyncio.run(asyncio.wait_for(main(), 60))


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> str:
    return scrape_running_daemon(tmp_path_factory.mktemp("daemon"))


def sample_names(text: str) -> set[str]:
    return {sample.name for family in text_string_to_metric_families(text)
            for sample in family.samples}


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(ALERTS.read_text("utf-8"))["groups"]
            for rule in group["rules"]]


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # a collapsed row holds its panels


def dashboard_expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text("utf-8"))
    found = [target["expr"] for panel in panels(dashboard)
             for target in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query")
        found.append(query.get("query", "") if isinstance(query, dict) else query or "")
    return found


def test_every_metric_the_alerts_and_the_dashboard_name_is_in_a_daemons_metrics(
        scraped: str) -> None:
    written = sample_names(scraped)
    expressions = [rule["expr"] for rule in alert_rules()] + dashboard_expressions()
    named = {name for expr in expressions for name in METRIC.findall(expr)}
    assert len(named) >= 10, named
    assert named - written == set(), f"named but not in /metrics: {named - written}"


def test_the_alerts_cover_what_operators_are_paged_for() -> None:
    rules = {rule["alert"]: rule for rule in alert_rules()}
    for alert, metric in [("GensokyoFrameworkDown", "gensokyo_framework_connected"),
                          ("GensokyoEventsOwedGrowing", "gensokyo_framework_events_owed"),
                          ("GensokyoBackendDown", "gensokyo_backend_up"),
                          ("GensokyoWebhook5xx", "gensokyo_webhook_responses_total"),
                          ("GensokyoDiskLow", "gensokyo_data_dir_free_bytes")]:
        assert metric in rules[alert]["expr"], alert
        assert rules[alert]["labels"]["severity"] in ("warning", "critical")
        assert rules[alert]["annotations"]["summary"]


def test_the_dashboard_is_one_grafana_imports() -> None:
    """What Grafana 10+ needs to import it with a Prometheus picked at import time: a
    datasource variable every panel uses, ids unique, a grid position for each panel."""
    dashboard = json.loads(DASHBOARD.read_text("utf-8"))
    assert dashboard["schemaVersion"] >= 36 and dashboard["uid"] and dashboard["title"]
    [source] = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
    assert source["query"] == "prometheus"
    ids = [panel["id"] for panel in panels(dashboard)]
    assert len(ids) == len(set(ids))
    for panel in panels(dashboard):
        assert {"x", "y", "w", "h"} <= set(panel["gridPos"]), panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": f"${{{source['name']}}}"}
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"] and target["expr"]


def test_the_docs_list_every_metric_a_daemon_writes(scraped: str) -> None:
    """docs/monitoring.md's table names each family ``/metrics`` writes (those with no
    sample yet too: their ``# HELP`` is there), and nothing it does not."""
    written = {family.name for family in text_string_to_metric_families(scraped)}
    rows = re.findall(r"^\| `((?:gensokyo|process|python)_[a-z0-9_]+)",
                      MONITORING.read_text("utf-8"), re.M)
    documented = {re.sub(r"_total$", "", name) for name in rows}
    assert len(rows) == len(documented), "a metric listed twice"
    assert written - documented == set(), f"not in docs/monitoring.md: {written - documented}"
    assert documented - written == set(), f"not in /metrics: {documented - written}"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    return found


def test_promtool_checks_the_alert_rules() -> None:
    result = subprocess.run([promtool(), "check", "rules", str(ALERTS)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_each_alert_fires_when_it_should_and_not_before() -> None:
    """examples/prometheus/alerts_test.yml: series over time, and the alerts promtool's
    rule evaluation says are firing at given moments."""
    result = subprocess.run([promtool(), "test", "rules", str(ALERT_TESTS)],
                            capture_output=True, text=True, timeout=60, cwd=ALERTS.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    tested = set(re.findall(r"alertname: (\w+)", ALERT_TESTS.read_text("utf-8")))
    assert tested == {rule["alert"] for rule in alert_rules()}


def test_promtool_finds_nothing_wrong_with_the_metrics_a_daemon_writes(scraped: str) -> None:
    result = subprocess.run([promtool(), "check", "metrics"], input=scraped,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr
