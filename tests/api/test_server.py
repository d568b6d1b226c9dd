"""The /v1 routes, /healthz, /metrics and /openapi.json on a real socket over real stores."""

from __future__ import annotations

import json
from typing import Any

from gensokyo_idmap import counters
from gensokyo_idmap.api.console.status import LinkView
from gensokyo_idmap.identity import OpenId, RUin
from gensokyo_idmap.readiness import PlatformReadiness
from gensokyo_idmap.runtime.msgid import MsgContext

from ..conftest import FakeClock
from gensokyo_idmap.testing.loopback import raw_request
from .conftest import ALICE, APP_ID, BOB, GROUP, ServeApi, scenario


def error_code(answer: tuple[int, Any]) -> tuple[int, str]:
    status, body = answer
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    return status, body["error"]["code"]


def test_resolve_lookup_show_bind_rebind(serve_api: ServeApi) -> None:
    async def body(c: Any) -> None:
        status, made = await c.post("/v1/resolve", {"keys": [ALICE, "rUIN-QQ-0-2870338968"],
                                                     "scene": f"QQ:{APP_ID}:c2c:{ALICE}"})
        assert status == 200 and made["created"] is True
        alice = made["vuin"]
        assert made["added"] == [f"openid:QQ:{APP_ID}:{ALICE}", "ruin:QQ:0:2870338968"]
        assert await c.post("/v1/resolve", {"keys": [ALICE]}) == (200, {
            "vuin": alice, "created": False, "added": [], "conflicts": []})
        # every DESIGN §1 form reaches the same person
        for key in (ALICE, f"openid:QQ:{APP_ID}:{ALICE}", "rUIN-QQ-0-GI4DOMBTGM4DSNRY",
                    "ruin-QQ-0-gi4domBTgm4dsnry"):
            assert await c.get("/v1/identity", key=key) == (200, {
                "key": f"openid:QQ:{APP_ID}:{ALICE}" if not key.lower().startswith("ruin")
                else "ruin:QQ:0:2870338968", "vuin": alice}), key
        assert await c.get("/v1/identity", key=str(alice)) == (200, {"key": None,
                                                                    "vuin": alice})
        status, shown = await c.get(f"/v1/vuins/{alice}")
        assert status == 200 and shown["vuin"] == alice and shown["aliases"] == []
        assert set(shown["identities"]) == {f"openid:QQ:{APP_ID}:{ALICE}",
                                            "ruin:QQ:0:2870338968"}
        assert shown["last_seen"][f"QQ:{APP_ID}:c2c:{ALICE}"]["identity"] == (
            f"openid:QQ:{APP_ID}:{ALICE}")
        bob = (await c.post("/v1/resolve", {"keys": [BOB]}))[1]["vuin"]
        status, bound = await c.post("/v1/bind", {"key": "rUIN-QQ-0-2870338968",
                                                  "vuin": str(bob)})
        assert status == 200 and bound["outcome"] == "moved" and bound["previous"] == alice
        status, again = await c.post("/v1/bind", {"key": "ruin:QQ:0:2870338968", "vuin": bob})
        assert status == 200 and again["outcome"] == "skipped"
        status, moved = await c.post("/v1/rebind", {"old": alice, "new": bob})
        assert status == 200 and moved["outcome"] == "moved" and moved["new"] == bob
        assert await c.get("/v1/identity", key=ALICE) == (
            200, {"key": f"openid:QQ:{APP_ID}:{ALICE}", "vuin": bob})
        status, shown = await c.get(f"/v1/vuins/{alice}")  # an alias shows its target
        assert status == 200 and shown["vuin"] == bob and shown["requested"] == alice
        assert (await c.get(f"/v1/vuins/{bob}"))[1]["aliases"] == [alice]

    scenario(serve_api, body)


def test_bad_input_is_400_naming_the_field(serve_api: ServeApi) -> None:
    async def body(c: Any) -> None:
        bad: list[tuple[str, str, Any]] = [
            ("post", "/v1/resolve", {"keys": []}),
            ("post", "/v1/resolve", {"keys": ["123"]}),
            ("post", "/v1/resolve", {"keys": ["has space"]}),
            ("post", "/v1/resolve", {"keys": [ALICE], "scene": 5}),
            ("post", "/v1/resolve", {"keys": [ALICE], "scene": "\ud800"}),
            ("post", "/v1/resolve", {"keys": ["x"] * 65}),
            ("post", "/v1/resolve", [ALICE]),
            ("post", "/v1/bind", {"key": ALICE, "vuin": 1.5}),
            ("post", "/v1/bind", {"key": ALICE, "vuin": 0}),
            ("post", "/v1/bind", {"key": ALICE, "vuin": True}),
            ("post", "/v1/bind", {"key": 42, "vuin": 1}),
            ("post", "/v1/bind", {"vuin": 1}),
            ("post", "/v1/rebind", {"old": "-1", "new": 2}),
            ("post", "/v1/rebind", {"old": 1, "new": 2**63}),
            ("get", "/v1/identity", {}),
            ("get", "/v1/identity", {"key": "rUIN-QQ-x-1"}),
            ("get", "/v1/identity", {"key": "-5"}),
            ("get", "/v1/vuins/abc", {}),
            ("get", "/v1/vuins/0/pick", {}),
            ("get", "/v1/vuins/1/pick", {"scene": "a", "scene_prefix": "b"}),
            ("get", "/v1/vuins/1/pick", {"app_id": "x1"}),
            ("get", "/v1/msgids/0", {}),
            ("get", "/v1/msgids/2147483648", {}),
            ("get", "/v1/msgids/1.5", {}),
            ("get", "/v1/msgids", {}),
        ]
        for method, path, data in bad:
            answer = (await c.post(path, data) if method == "post"
                      else await c.get(path, **data))
            assert error_code(answer) == (400, "bad_input"), (path, data, answer)
        answer = await c.post("/v1/bind", raw=b"{not json",
                              headers={"Content-Type": "application/json"})
        assert error_code(answer) == (400, "bad_input")
        status, body_ = await c.post("/v1/bind", {"key": "123", "vuin": 1})
        assert status == 400 and "key" in body_["error"]["message"]

    scenario(serve_api, body)


def test_not_found_is_404(serve_api: ServeApi) -> None:
    async def body(c: Any) -> None:
        for path, params in [("/v1/identity", {"key": ALICE}), ("/v1/identity", {"key": "77"}),
                             ("/v1/vuins/77", {}), ("/v1/vuins/77/pick", {}),
                             ("/v1/msgids/5", {}), ("/v1/msgids", {"real_id": "ROBOT1.0_x"})]:
            assert error_code(await c.get(path, **params))[0] == 404, path
        assert error_code(await c.post("/v1/rebind", {"old": 77, "new": 78})) == (
            404, "not_found")

    scenario(serve_api, body)


def test_pick_follows_the_reverse_path(serve_api: ServeApi, graph: Any) -> None:
    other_app = OpenId(app_id="102000002", openid=ALICE)

    async def body(c: Any) -> None:
        mine = OpenId(app_id=APP_ID, openid=ALICE)
        vuin = (await graph.resolve([other_app], scene="QQ:102000002:c2c:x")).vuin
        status, picked = await c.get(f"/v1/vuins/{vuin}/pick")
        assert error_code((status, picked)) == (404, "no_usable_identity")
        assert (await c.get(f"/v1/vuins/{vuin}/pick", app_id="102000002"))[1]["identity"] == (
            other_app.key)
        await graph.bind(mine, vuin)
        await graph.bind(RUin("QQ", 0, "2870338968"), vuin)
        second = OpenId(app_id=APP_ID, openid=BOB)
        await graph.bind(second, vuin)
        await graph.resolve([second], scene=f"QQ:{APP_ID}:group:{GROUP}")
        assert await c.get(f"/v1/vuins/{vuin}/pick", scene=f"QQ:{APP_ID}:group:{GROUP}") == (
            200, {"vuin": vuin, "identity": second.key, "ruin": None})
        assert (await c.get(f"/v1/vuins/{vuin}/pick",
                            scene_prefix=f"QQ:{APP_ID}:group:"))[1]["identity"] == second.key
        # a scene never seen: any OpenID of this AppID (the first of the set)
        status, picked = await c.get(f"/v1/vuins/{vuin}/pick", scene="QQ:1:c2c:none")
        assert status == 200 and picked["identity"].startswith(f"openid:QQ:{APP_ID}:")

    scenario(serve_api, body, app_ids=(APP_ID, "102000002"))


def test_msgid_lookups(serve_api: ServeApi, msgids: Any, clock: FakeClock) -> None:
    async def body(c: Any) -> None:
        virtual = await msgids.store_real("ROBOT1.0_abc", MsgContext(APP_ID, "group", GROUP))
        status, record = await c.get(f"/v1/msgids/{virtual}")
        assert status == 200 and record["real_id"] == "ROBOT1.0_abc"
        assert record["chat_kind"] == "group" and record["target"] == GROUP
        assert await c.get("/v1/msgids", real_id="ROBOT1.0_abc") == (
            200, {"real_id": "ROBOT1.0_abc", "virtual_id": virtual, "app_id": APP_ID})
        clock.advance(3601)  # expired: invisible at once
        assert error_code(await c.get(f"/v1/msgids/{virtual}"))[0] == 404
        assert error_code(await c.get("/v1/msgids", real_id="ROBOT1.0_abc"))[0] == 404

    scenario(serve_api, body)


OTHER_APP = "102000002"


def test_app_id_picks_the_bot_of_bare_openids_on_every_route(serve_api: ServeApi) -> None:
    """Issue 34.4: ``?app_id=`` names which bot's OpenID a bare one is on resolve, identity,
    bind and pick (default: the first bot's); one naming no bot served, or no AppID at all,
    is a 400 naming the AppIDs served, and nothing is written."""
    async def body(c: Any) -> None:
        status, made = await c.post(f"/v1/resolve?app_id={OTHER_APP}", {"keys": [ALICE]})
        assert status == 200 and made["added"] == [f"openid:QQ:{OTHER_APP}:{ALICE}"]
        assert error_code(await c.get("/v1/identity", key=ALICE)) == (404, "not_found")
        assert await c.get("/v1/identity", key=ALICE, app_id=OTHER_APP) == (
            200, {"key": f"openid:QQ:{OTHER_APP}:{ALICE}", "vuin": made["vuin"]})
        status, bound = await c.post(f"/v1/bind?app_id={APP_ID}",
                                     {"key": ALICE, "vuin": made["vuin"]})
        assert status == 200 and bound["key"] == f"openid:QQ:{APP_ID}:{ALICE}"
        assert (await c.get(f"/v1/vuins/{made['vuin']}/pick", app_id=OTHER_APP))[1][
            "identity"] == f"openid:QQ:{OTHER_APP}:{ALICE}"
        before = (await c.get("/v1/stats"))[1]["openid_map"]["identities"]
        for app_id, why in (("102000009", "not a bot of this daemon (its AppIDs: "
                                          f"{APP_ID}, {OTHER_APP})"),
                            ("abc", "AppID must be 1 to 20 digits")):
            for answer in (await c.post(f"/v1/resolve?app_id={app_id}", {"keys": [BOB]}),
                           await c.post(f"/v1/bind?app_id={app_id}",
                                        {"key": BOB, "vuin": made["vuin"]}),
                           await c.get("/v1/identity", key=BOB, app_id=app_id),
                           await c.get(f"/v1/vuins/{made['vuin']}/pick", app_id=app_id),
                           await c.get("/v1/msgids", real_id="X", app_id=app_id),
                           await c.get("/v1/stats", app_id=app_id)):
                assert error_code(answer) == (400, "bad_input"), answer
                assert answer[1]["error"]["message"].startswith(f"app_id: {why}"), answer
        assert (await c.get("/v1/stats"))[1]["openid_map"]["identities"] == before

    scenario(serve_api, body, app_ids=(APP_ID, OTHER_APP))


def test_a_real_id_given_to_two_bots_is_looked_up_per_bot(serve_api: ServeApi,
                                                          msgids: Any) -> None:
    """``/v1/msgids?real_id=`` answers the newest record of a real id and names its bot;
    with ``?app_id=`` only one of that bot's (msgid rule 10: the index names the newest)."""
    async def body(c: Any) -> None:
        first = await msgids.store_real("ROBOT1.0_both", MsgContext(APP_ID, "group", GROUP))
        second = await msgids.store_real("ROBOT1.0_both", MsgContext(OTHER_APP, "group", "G2"))
        assert first != second
        assert await c.get("/v1/msgids", real_id="ROBOT1.0_both") == (200, {
            "real_id": "ROBOT1.0_both", "virtual_id": second, "app_id": OTHER_APP})
        assert (await c.get("/v1/msgids", real_id="ROBOT1.0_both", app_id=OTHER_APP))[1][
            "virtual_id"] == second
        status, answer = await c.get("/v1/msgids", real_id="ROBOT1.0_both", app_id=APP_ID)
        assert error_code((status, answer)) == (404, "not_found")
        assert f"AppID {OTHER_APP}'s" in answer["error"]["message"]

    scenario(serve_api, body, app_ids=(APP_ID, OTHER_APP))


def test_stats_per_app_id_keep_a_removed_bots_identities(serve_api: ServeApi,
                                                         graph: Any) -> None:
    """Issue 34.5: ``bots`` counts the OpenIDs of each bot served (in the config's order,
    with its self_id), then of each AppID the graph still holds that no bot is served of
    (a bot removed from the config keeps its identities); ``?app_id=``: one bot."""
    async def body(c: Any) -> None:
        await graph.resolve([OpenId(APP_ID, ALICE), OpenId(APP_ID, GROUP)])
        await graph.resolve([OpenId("102000007", BOB)])
        counters.EVENTS_IN.labels("webhook", OTHER_APP).inc(2)
        status, stats = await c.get("/v1/stats")
        traffic = {app: stats["bots"][app].pop("traffic") for app in (OTHER_APP, APP_ID)}
        assert status == 200 and stats["bots"] == {
            OTHER_APP: {"served": True, "self_id": 20002, "openids": 0},
            APP_ID: {"served": True, "self_id": int(APP_ID), "openids": 2},
            "102000007": {"served": False, "self_id": None, "openids": 1}}
        assert list(stats["bots"]) == [OTHER_APP, APP_ID, "102000007"]
        assert set(traffic[APP_ID]) == {"events_in", "events_out", "actions"}
        assert traffic[OTHER_APP]["events_in"] >= 2  # this process's counts, per bot
        one = (await c.get("/v1/stats", app_id=APP_ID))[1]["bots"]
        assert list(one) == [APP_ID] and one[APP_ID]["openids"] == 2

    scenario(serve_api, body, app_ids=(OTHER_APP, APP_ID), self_ids=(20002, int(APP_ID)))


def test_stats_counts_tables(serve_api: ServeApi) -> None:
    async def body(c: Any) -> None:
        await c.post("/v1/resolve", {"keys": [ALICE, BOB]})
        status, stats = await c.get("/v1/stats")
        assert status == 200
        assert stats["openid_map"]["identities"] == 2 and stats["openid_map"]["vuins"] == 1
        assert stats["msgid_map"]["entries"] == 0

    scenario(serve_api, body)


def test_stats_show_the_memory_of_the_console_and_the_tables_handed_in(
        serve_api: ServeApi) -> None:
    """``memory``: the resident memory apart, and each table's figures, the console's own
    (sessions) and the listener's wrong tokens among them."""
    async def body(c: Any) -> None:
        c.server.token_failures.failed("192.0.2.1")  # a wrong token from one client
        status, stats = await c.get("/v1/stats")
        assert status == 200
        memory = stats["memory"]
        assert set(memory) == {"rss_anon_bytes", "rss_file_bytes", "tables"}
        tables = {table["name"]: table for table in memory["tables"]}
        assert tables["console_sessions"]["entries"] == 0
        assert tables["api_token_failures"]["entries"] == 1
        assert all(set(table) == {"name", "entries", "bytes"} for table in tables.values())

    scenario(serve_api, body)


def test_a_path_no_route_serves_answers_the_error_envelope(serve_api: ServeApi) -> None:
    """An unknown path or a route's wrong method answers JSON like every other error (it
    was aiohttp's plain text "404: Not Found"); the console keeps its own pages."""
    async def body(c: Any) -> None:
        for path in ("/v1/nope", "/v2/stats", "/", "/uix"):
            status, answer = await c.get(path)
            assert error_code((status, answer)) == (404, "not_found"), path
            assert path in answer["error"]["message"]
        status, answer = await c.post("/v1/stats", {})
        assert error_code((status, answer)) == (405, "method_not_allowed")
        async with c.session.post(c.base + "/v1/stats", json={}) as resp:
            assert "GET" in resp.headers["Allow"]
        status, _ = await c.get("/ui/no-such-page")
        assert status == 404  # the console's own answer

    scenario(serve_api, body)


def test_token_guards_v1_but_not_health(serve_api: ServeApi) -> None:
    async def body(c: Any) -> None:
        assert error_code(await c.get("/v1/stats")) == (401, "unauthorized")
        assert error_code(await c.get("/v1/stats", headers={
            "Authorization": "Bearer wrong"})) == (401, "unauthorized")
        assert error_code(await c.get("/v1/stats", headers={
            "Authorization": "Basic s3cret-token"})) == (401, "unauthorized")
        status, _ = await c.get("/v1/stats", headers={"Authorization": "Bearer s3cret-token"})
        assert status == 200
        assert (await c.get("/healthz"))[0] == 204
        assert (await c.get("/metrics"))[0] == 200
        assert (await c.get("/openapi.json"))[0] == 200

    scenario(serve_api, body, token="s3cret-token")


def test_a_token_that_is_not_utf8_is_refused_with_the_usual_401(serve_api: ServeApi) -> None:
    """Header bytes that are not UTF-8 reach us as lone surrogates; the token they spell is
    a wrong one (also where a replacement character would have made it equal: "ab?")."""
    async def body(c: Any) -> None:
        port = int(c.base.rsplit(":", 1)[1])
        status, answer = await raw_request(
            port, b"GET /v1/stats HTTP/1.1\r\nAuthorization: Bearer ab\xff\r\n")
        assert status == 401
        assert json.loads(answer)["error"]["code"] == "unauthorized"
        status, _ = await c.get("/v1/stats", headers={"Authorization": "Bearer ab?"})
        assert status == 200

    scenario(serve_api, body, token="ab?")


def test_healthz_204_then_503_when_a_store_is_closed(serve_api: ServeApi, msgid_store: Any
                                                     ) -> None:
    async def body(c: Any) -> None:
        assert await c.get("/healthz") == (204, None)
        msgid_store.close()
        status, reason = await c.get("/healthz")
        assert error_code((status, reason)) == (503, "unhealthy")
        assert reason["error"]["message"]

    scenario(serve_api, body)


def test_readyz_names_what_is_missing_and_is_200_once_nothing_is(
        serve_api: ServeApi, msgid_store: Any) -> None:
    """Liveness and readiness differ: a daemon without bot.secret is alive (``/healthz``
    204) but not ready; with everything there, 200; a store that fails is named too."""
    platform = [PlatformReadiness(app_id=True, secret=False, webhook=True)]

    def link() -> LinkView:
        return LinkView(webhook=True, platform=platform[0])

    async def body(c: Any) -> None:
        assert await c.get("/healthz") == (204, None)
        status, answer = await c.get("/readyz")
        assert status == 503 and answer["ready"] is False
        assert len(answer["missing"]) == 1 and "bot.secret" in answer["missing"][0]
        platform[0] = PlatformReadiness(app_id=True, secret=True, token_obtained=True,
                                        webhook=True)
        assert await c.get("/readyz") == (200, {"ready": True, "missing": []})
        msgid_store.close()
        status, answer = await c.get("/readyz")
        assert status == 503 and [reason.split(":")[0] for reason in answer["missing"]] == [
            msgid_store.path.name]

    scenario(serve_api, body, link=link)


def test_readyz_without_a_link_judges_the_stores_alone(serve_api: ServeApi) -> None:
    async def body(c: Any) -> None:
        assert await c.get("/readyz") == (200, {"ready": True, "missing": []})

    scenario(serve_api, body)


def test_healthz_writes_nothing(serve_api: ServeApi, graph: Any, msgids: Any) -> None:
    """It used to commit a write to each store (and fsync) per call: now no transaction is
    committed and no file changes, however often it is asked."""
    def state() -> list[Any]:
        found: list[Any] = []
        for store in (graph.store, msgids.store):
            stat = store.path.stat()
            found += [store.env.info()["last_txnid"], stat.st_size, stat.st_mtime_ns]
        return found

    async def body(c: Any) -> None:
        before = state()
        for _ in range(5):
            assert await c.get("/healthz") == (204, None)
        assert state() == before

    scenario(serve_api, body)


def test_metrics_count_what_happened(serve_api: ServeApi, msgids: Any, graph: Any) -> None:
    def value(text: str, line_start: str) -> float:
        for line in text.splitlines():
            if line.startswith(line_start + " "):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    async def body(c: Any) -> None:
        before = (await c.get("/metrics"))[1]
        await c.post("/v1/resolve", {"keys": [ALICE]})
        await c.post("/v1/resolve", {"keys": [ALICE]})
        bob = (await c.post("/v1/resolve", {"keys": [BOB]}))[1]["vuin"]
        await c.post("/v1/bind", {"key": ALICE, "vuin": bob})
        await c.post("/v1/bind", {"key": ALICE, "vuin": bob})  # skipped
        try:
            await graph.bind(OpenId(APP_ID, BOB), 0)
        except ValueError:
            pass
        virtual = await msgids.store_real("ROBOT1.0_m")
        await c.get(f"/v1/msgids/{virtual}")
        await msgids.sweep()
        status, after = await c.get("/metrics")
        assert status == 200
        for name, delta in [
            ('gensokyo_identity_resolutions_total{result="create"}', 2),
            ('gensokyo_identity_resolutions_total{result="hit"}', 1),
            ('gensokyo_bind_results_total{op="bind",outcome="moved"}', 1),
            ('gensokyo_bind_results_total{op="bind",outcome="skipped"}', 1),
            ('gensokyo_bind_results_total{op="bind",outcome="failed"}', 1),
            ('gensokyo_msgid_operations_total{op="create"}', 1),
            ('gensokyo_msgid_operations_total{op="lookup"}', 1),
            ("gensokyo_msgid_sweep_seconds_count", 1),
        ]:
            assert value(after, name) - value(before, name) == delta, name
        assert value(after, 'gensokyo_store_entries{store="openid-map",table="identities"}') == 2
        assert value(after, 'gensokyo_store_file_bytes{file="openid-map.db"}') > 0

    scenario(serve_api, body)


def test_openapi_document_names_every_route(serve_api: ServeApi) -> None:
    async def body(c: Any) -> None:
        status, doc = await c.get("/openapi.json")
        assert status == 200 and doc["openapi"].startswith("3.")
        documented = set(doc["paths"])
        assert documented == {"/v1/resolve", "/v1/identity", "/v1/vuins/{vuin}",
                              "/v1/vuins/{vuin}/pick", "/v1/bind", "/v1/rebind",
                              "/v1/msgids/{virtual_id}", "/v1/msgids", "/v1/stats", "/getid",
                              "/healthz", "/readyz", "/metrics", "/openapi.json"}
        served = {route.path for route in c.server.routes()}
        assert served == documented

    scenario(serve_api, body)


def test_a_name_not_listed_as_host_is_refused_421_where_access_is_checked(
        serve_api: ServeApi) -> None:
    """DNS rebinding: a page at evil.example:<port> reads /v1, /getid and the console as its
    own origin, unless a Host naming it is refused; the open routes answer any Host."""
    async def body(c: Any) -> None:
        alice = (await c.post("/v1/resolve", {"keys": [ALICE]}))[1]["vuin"]
        for host in ("evil.example", f"EVIL.example.:{c.base.rsplit(':', 1)[1]}",
                     "127.0.0.1.nip.io", "localhost.evil.example", "bücher.example", "::1"):
            rebound = {"Host": host}
            for path in ("/v1/stats", f"/v1/vuins/{alice}", "/getid?type=2&id=1", "/ui/",
                         "/ui/identities", "/v1/nothing-here"):
                status, answer = await c.get(path, headers=rebound)
                assert status == 421, (host, path, status, answer)
                assert "Host" in str(answer["error"])  # /getid: in the Go daemon's shape
            assert error_code(await c.post("/v1/rebind", {"old": alice, "new": 9},
                                           headers=rebound)) == (421, "misdirected")
            assert (await c.get("/healthz", headers=rebound))[0] == 204
            assert (await c.get("/metrics", headers=rebound))[0] == 200
            assert (await c.get("/openapi.json", headers=rebound))[0] == 200
        for host in ("localhost", "LOCALHOST.:80", "127.0.0.1", "[::1]:1", "10.0.0.5",
                     "console.test"):
            assert (await c.get("/v1/stats", headers={"Host": host}))[0] == 200, host
        assert (await c.get(f"/v1/vuins/{alice}"))[0] == 200

    scenario(serve_api, body, allowed_hosts=("console.test",))


def test_writes_take_json_only_and_no_other_sites_request(serve_api: ServeApi) -> None:
    """The issue's request (text/plain, another origin) and its neighbours: refused before
    the handler, so nothing is written; the same write from a script goes through."""
    async def body(c: Any) -> None:
        alice = (await c.post("/v1/resolve", {"keys": [ALICE]}))[1]["vuin"]
        bob = (await c.post("/v1/resolve", {"keys": [BOB]}))[1]["vuin"]
        rebind = json.dumps({"old": alice, "new": bob}).encode()
        for headers, expected in [
            ({"Content-Type": "text/plain"}, (415, "unsupported_media_type")),
            ({"Content-Type": "application/x-www-form-urlencoded"},
             (415, "unsupported_media_type")),
            ({"Content-Type": "multipart/form-data; boundary=x"},
             (415, "unsupported_media_type")),
            ({"Content-Type": "application/json", "Origin": "http://evil.example"},
             (403, "cross_site")),
            ({"Content-Type": "application/json", "Origin": "null"}, (403, "cross_site")),
            ({"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"},
             (403, "cross_site")),
            ({"Content-Type": "text/plain", "Origin": "http://evil.example",
              "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"},
             (403, "cross_site")),
        ]:
            answer = await c.post("/v1/rebind", raw=rebind, headers=headers)
            assert error_code(answer) == expected, (headers, answer)
        for path in (f"/getid?type=1&id={GROUP}", "/getid?type=3&id=a&subtype=b&value=c"):
            status, _ = await c.get(path, headers={"Sec-Fetch-Site": "cross-site"})
            assert status == 403, path  # an <img> of another site: /getid writes on a GET
        assert (await c.get(f"/v1/vuins/{alice}"))[1]["aliases"] == []
        assert (await c.get("/v1/identity", key=GROUP))[0] == 404
        own = f"http://127.0.0.1:{c.base.rsplit(':', 1)[1]}"
        status, moved = await c.post("/v1/rebind", raw=rebind, headers={
            "Content-Type": "application/json; charset=utf-8", "Origin": own,
            "Sec-Fetch-Site": "same-origin"})
        assert status == 200 and moved["outcome"] == "moved", moved
        assert (await c.get(f"/getid?type=1&id={GROUP}"))[0] == 200  # lotus: no headers

    scenario(serve_api, body)


def metric(text: str, sample: str) -> float | None:
    """The value of one sample (name and labels as written) in Prometheus text, or None."""
    for line in text.splitlines():
        if line.startswith(sample + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_metrics_say_whether_the_lmdb_stores_work_and_the_space_left(
        serve_api: ServeApi, msgid_store: Any, msgid_db_path: Any) -> None:
    """``gensokyo_backend_up{backend="lmdb"}`` follows what /healthz finds of the stores;
    ``gensokyo_data_dir_free_bytes`` is the data dir's free space as statvfs says it."""
    import os

    async def body(c: Any) -> None:
        status, text = await c.get("/metrics")
        assert status == 200
        assert metric(text, 'gensokyo_backend_up{backend="lmdb"}') == 1
        stats = os.statvfs(msgid_db_path.parent)
        free = metric(text, "gensokyo_data_dir_free_bytes")
        assert free is not None and free > 0
        assert abs(free - stats.f_bavail * stats.f_frsize) < 256 * 1024 * 1024
        msgid_store.close()
        status, text = await c.get("/metrics")
        assert status == 200  # a broken store is a 0, not a failed scrape
        assert metric(text, 'gensokyo_backend_up{backend="lmdb"}') == 0
        assert metric(text, 'gensokyo_backend_up{backend="redis"}') is None  # none here

    scenario(serve_api, body)
