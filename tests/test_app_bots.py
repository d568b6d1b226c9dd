"""The daemon with two bots (issue 34.2, 34.3), in process over real sockets: one webhook URL
for both (each callback verified with its bot's key), a reverse-WS connection per bot to the
one shared framework URL (each with its X-Self-ID, carrying that bot's events), HTTP POST of
each event with its bot's X-Self-ID (the second bot to its own URL), and the ready line
naming each bot's connections."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from aiohttp import ClientSession, web
from prometheus_client.parser import text_string_to_metric_families
from structlog.testing import capture_logs

from gensokyo_idmap.app import Daemon, build_daemon
from gensokyo_idmap.config import Config
from gensokyo_idmap.testing import (
    EmulatedPlatform,
    WebhookSender,
    c2c_message,
    free_port,
    group_message,
    until,
)
from gensokyo_idmap.store.lmdb.outbox import LmdbOutboxStore
from gensokyo_idmap.testing.daemon import NO_PLATFORM_TOKEN_URL

from .conftest import REDIS_URL

TIMEOUT = 10
BOTS = {"102000001": ("first-secret-Hk2", None), "102000002": ("second-secret-Q7x", 20002)}
FIRST, SECOND = BOTS
T = TypeVar("T")
GROUP = "A1B2C3D4E5F60718293A4B5C6D7E8F90"
USER = "0F1E2D3C4B5A69788796A5B4C3D2E1F0"


def test_two_bots_each_with_its_self_id_on_every_connection(tmp_path: Path) -> None:
    async def scenario() -> None:
        sockets: dict[str, list[dict[str, Any]]] = {}  # X-Self-ID → the frames it carried
        posts: list[tuple[str, str | None, dict[str, Any]]] = []

        async def framework(request: web.Request) -> web.StreamResponse:
            if request.method == "POST":
                posts.append((request.path, request.headers.get("X-Self-ID"),
                              await request.json()))
                return web.Response(status=204)
            frames = sockets.setdefault(request.headers["X-Self-ID"], [])
            ws = web.WebSocketResponse()
            await ws.prepare(request)
            async for message in ws:
                frames.append(json.loads(message.data))
            return ws

        app = web.Application()
        app.add_routes([web.get("/{name}", framework), web.post("/{name}", framework)])
        runner = web.AppRunner(app)
        await runner.setup()
        port, webhook = free_port(), free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        (first, (secret_a, _)), (second, (secret_b, self_id_b)) = BOTS.items()
        config = Config.model_validate({
            "bots": [{"app_id": first, "secret": secret_a},
                     {"app_id": second, "secret": secret_b, "self_id": self_id_b,
                      "onebot": {"http_post": [{"url": f"http://127.0.0.1:{port}/own"}]}}],
            "qq": {"token_url": NO_PLATFORM_TOKEN_URL},
            "webhook": {"listen": f"127.0.0.1:{webhook}"},
            "idmap": {"data_dir": str(tmp_path / "data"), "map_size_mb": 1},
            "api": {"listen": ""},
            "onebot": {"heartbeat_interval_seconds": 60,
                       "reverse_ws": [f"ws://127.0.0.1:{port}/rws"],
                       "http_post": [{"url": f"http://127.0.0.1:{port}/shared"}]}})
        url = f"http://127.0.0.1:{webhook}/qqbot"
        try:
            async with AsyncExitStack() as stack:
                daemon = await build_daemon(config, asyncio.Event(), stack)
                assert daemon.listeners() == [
                    f"webhook {url}",
                    f"reverse ws ws://127.0.0.1:{port}/rws (self_id {first})",
                    f"reverse ws ws://127.0.0.1:{port}/rws (self_id {self_id_b})",
                    f"http post http://127.0.0.1:{port}/shared (self_id {first})",
                    f"http post http://127.0.0.1:{port}/own (self_id {self_id_b})"]
                await until(lambda: len(sockets) == 2, TIMEOUT, "a connection per bot")
                async with WebhookSender(url, first, secret_a) as to_a, \
                        WebhookSender(url, second, secret_b) as to_b:
                    assert (await to_a.dispatch("GROUP_AT_MESSAGE_CREATE",
                                                group_message(1, GROUP, USER))).status == 200
                    assert (await to_b.dispatch("GROUP_AT_MESSAGE_CREATE",
                                                group_message(2, GROUP, USER))).status == 200
                    # signed with the other bot's key: refused
                    wrong = to_a.build("GROUP_AT_MESSAGE_CREATE", group_message(3, GROUP, USER))
                    wrong.headers["X-Bot-Appid"] = second
                    assert (await to_a.post(wrong)).status == 401
                await until(lambda: len(posts) == 2, TIMEOUT, "a POST of each bot's event")

                def messages_each() -> list[int]:
                    return [len([frame for frame in frames if frame.get("post_type") == "message"])
                            for frames in sockets.values()]

                await until(lambda: messages_each() == [1, 1], TIMEOUT,
                            "each bot's event on its own connection")
        finally:
            await runner.cleanup()
        # each connection carried its own bot's events only, lifecycle first
        for header, frames in sockets.items():
            assert frames[0]["meta_event_type"] == "lifecycle"
            assert {frame["self_id"] for frame in frames} == {int(header)}
            [message] = [frame for frame in frames if frame.get("post_type") == "message"]
            assert message["raw_message"].startswith(f"[CQ:at,qq={header}]")
        assert sorted(sockets) == sorted([first, str(self_id_b)])
        assert sorted((path, header, body["self_id"]) for path, header, body in posts) == [
            ("/own", str(self_id_b), self_id_b), ("/shared", first, int(first))]

    asyncio.run(scenario())


@dataclass
class TwoBots:
    """A daemon serving the bots of two emulated platforms (each its own AppID, secret and
    tokens), its gateway session with each established."""

    platforms: list[EmulatedPlatform]
    daemon: Daemon
    http: ClientSession
    forward: int  # onebot.forward_ws port
    api: int  # onebot.http_api port

    async def event(self, platform: EmulatedPlatform, t: str, d: dict[str, Any]
                    ) -> dict[str, Any]:
        """Push ``d`` to ``platform``; the OneBot event its bot's forward-WS connection
        carries (its message id is stored by then)."""
        async with self.http.ws_connect(
                f"ws://127.0.0.1:{self.forward}/{platform.app_id}/") as ws:
            assert (await ws.receive_json(timeout=TIMEOUT))["meta_event_type"] == "lifecycle"
            await platform.push(t, d)
            event: dict[str, Any] = await ws.receive_json(timeout=TIMEOUT)
        assert event["post_type"] in ("message", "notice"), event
        return event

    async def action(self, self_id: object, action: str, **params: Any) -> dict[str, Any]:
        async with self.http.post(f"http://127.0.0.1:{self.api}/{self_id}/{action}",
                                  json=params) as resp:
            answer: dict[str, Any] = await resp.json(content_type=None)
        return answer

    async def identity_api(self, path: str) -> dict[str, Any]:
        """GET ``path`` of the identity API (``api.listen``: the config must set it)."""
        async with self.http.get(f"http://{self.daemon.config.api.listen}{path}") as resp:
            answer: dict[str, Any] = await resp.json()
        return answer


@asynccontextmanager
async def two_bots(tmp_path: Path, *, second: dict[str, Any] | None = None,
                   idmap: dict[str, Any] | None = None, serving: tuple[int, ...] = (0, 1),
                   **config: Any) -> AsyncIterator[TwoBots]:
    """:class:`TwoBots` (the second bot's entry gets ``second``; ``serving``: which of the
    two the config names, in that order; ``idmap`` and ``config``: more of the config)."""
    platforms = [EmulatedPlatform(app_id=app_id, secret=secret, token_prefix=prefix)
                 for (app_id, (secret, _)), prefix in zip(BOTS.items(), "AB", strict=True)]
    platforms = [platforms[n] for n in serving]
    for platform in platforms:
        await platform.start()
    forward, api = free_port(), free_port()
    entries = [platform.bot_entry(**(second or {}) if platform.app_id == SECOND else {})
               for platform in platforms]
    settings = {
        "bots": entries,
        "idmap": {"data_dir": str(tmp_path / "data"), "map_size_mb": 1, **(idmap or {})},
        "api": {"listen": ""},
        "onebot": {"heartbeat_interval_seconds": 60, "forward_ws": f"127.0.0.1:{forward}",
                   "http_api": f"127.0.0.1:{api}"}, **config}
    try:
        async with AsyncExitStack() as stack, ClientSession() as http:
            daemon = await build_daemon(Config.model_validate(settings), asyncio.Event(), stack)
            for platform in platforms:
                await until(lambda p=platform: len(p.identifies) == 1,  # type: ignore[misc]
                            TIMEOUT, "a gateway session per bot")
            yield TwoBots(platforms, daemon, http, forward, api)
    finally:
        for platform in platforms:
            await platform.close()


def test_an_action_goes_out_as_its_connections_bot(tmp_path: Path) -> None:
    """Issue 34.4: each bot's actions with its token, to its platform, as its AppID; a vUIN
    only the other bot has seen is retcode 100 naming both AppIDs, and nothing is sent."""
    async def scenario() -> None:
        async with two_bots(tmp_path, second={"self_id": 20002}) as bots:
            first, second = bots.platforms
            event = await bots.event(first, "C2C_MESSAGE_CREATE", c2c_message(1, USER, "hi"))
            assert event["self_id"] == int(first.app_id)
            vuin = event["user_id"]
            refused = await bots.action(20002, "send_private_msg", user_id=vuin,
                                        message="hello")
            assert (refused["status"], refused["retcode"]) == ("failed", 100), refused
            assert (f"none is an OpenID of QQ AppID {second.app_id}; its OpenIDs are of "
                    f"AppID {first.app_id}") in refused["message"]
            assert second.api_requests("POST", "/messages") == []
            sent = await bots.action(first.app_id, "send_private_msg", user_id=vuin,
                                     message="hello")
            assert sent["status"] == "ok", sent
            [(path, body)] = first.api_requests("POST", "/messages")
            assert (path, body["content"]) == (f"/v2/users/{USER}/messages", "hello")

    asyncio.run(scenario())


@pytest.mark.parametrize("runtime_backend", ["lmdb", "redis"])
def test_each_bot_has_its_own_five_replies_to_one_platform_message_id(
        tmp_path: Path, runtime_backend: str, request: pytest.FixtureRequest) -> None:
    """Issue 34.4: two bots given one platform message id (each in its own group) each have
    its five passive replies: the reply budget is per bot, in memory (LMDB) and on Redis,
    where each bot's counts are kept under its AppID."""
    idmap: dict[str, Any] = {}
    if runtime_backend == "redis":
        redis = request.getfixturevalue("redis_runtime")
        idmap = {"runtime_backend": "redis", "redis_url": REDIS_URL,
                 "redis_prefix": redis.prefix}

    async def scenario() -> None:
        async with two_bots(tmp_path, idmap=idmap) as bots:
            groups = {}
            for platform in bots.platforms:  # the same message id, "ROBOT1.0_gw1", to each
                event = await bots.event(platform, "GROUP_AT_MESSAGE_CREATE",
                                         group_message(1, GROUP))
                groups[platform.app_id] = event["group_id"]
            for platform in bots.platforms:
                for n in range(5):
                    answer = await bots.action(platform.app_id, "send_group_msg",
                                               group_id=groups[platform.app_id],
                                               message=f"reply {n}")
                    assert answer["status"] == "ok", (platform.app_id, n, answer)
                bodies = [body for _, body in platform.api_requests("POST", "/messages")]
                assert [(body["msg_id"], body["msg_seq"] - bodies[0]["msg_seq"])
                        for body in bodies] == [("ROBOT1.0_gw1", n) for n in range(5)]

    asyncio.run(scenario())


def test_a_bot_removed_and_added_again_takes_effect_on_restart_and_keeps_its_people(
        tmp_path: Path) -> None:
    """Issue 34.5: a bot removed from the config is not served after a restart (the graph
    untouched: its people keep their vUINs, ``stats`` lists its AppID as not served), and
    one added again is served with them: its user has the vUIN they had."""
    union = "UNION0000000000000000000000000001"

    async def person(bots: TwoBots, n: int, platform: EmulatedPlatform) -> int:
        event = await bots.event(platform, "GROUP_AT_MESSAGE_CREATE",
                                 group_message(n, GROUP, USER, union=union))
        vuin: int = event["user_id"]
        return vuin

    async def scenario() -> None:
        async with two_bots(tmp_path) as bots:
            first = await person(bots, 1, bots.platforms[0])
            assert await person(bots, 2, bots.platforms[1]) == first  # one union_openid
        async with two_bots(tmp_path, serving=(0,), api={"listen": f"127.0.0.1:{free_port()}"}
                            ) as bots:
            assert [runtime.settings.app_id for runtime in bots.daemon.bots] == [FIRST]
            refused = await bots.action(SECOND, "get_login_info")
            assert refused["retcode"] == 1404, refused  # no such bot
            stats = await bots.identity_api("/v1/stats")
            assert set(stats["bots"][FIRST].pop("traffic")) == {"events_in", "events_out",
                                                                "actions"}
            assert stats["bots"] == {FIRST: {"served": True, "self_id": int(FIRST),
                                             "openids": 2},
                                     SECOND: {"served": False, "self_id": None, "openids": 2}}
            # two users' and two groups' OpenIDs and the union: nothing went
            assert stats["openid_map"]["identities"] == 5
        async with two_bots(tmp_path, serving=(1, 0)) as bots:  # added back, listed first
            assert await person(bots, 3, bots.platforms[0]) == first
            assert await person(bots, 4, bots.platforms[1]) == first

    asyncio.run(scenario())


def test_events_owed_under_names_no_connection_has_are_named_at_start(
        tmp_path: Path) -> None:
    """Issue 34.5: the move from ``bot`` to ``bots`` names each framework connection with
    its bot's self_id; what outbox.db still owes under the old name (and the old gateway
    session file) is said at start, with how many, the URL's credentials hidden."""
    data = tmp_path / "data"
    data.mkdir()
    url = "ws://127.0.0.1:9/onebot/v11/ws?access_token=s3cret-in-url"
    outbox = LmdbOutboxStore(data / "outbox.db")
    try:
        outbox.write_sync(lambda view: [view.add(f"reverse_ws {url}", b"{}") for _ in range(3)])
        outbox.write_sync(lambda view: view.add(f"reverse_ws {url} (self_id {FIRST})", b"{}"))
    finally:
        outbox.close()
    (data / "gateway-session.json").write_text('{"session_id": "old", "seq": 9}')

    async def scenario() -> None:
        with capture_logs() as logs:
            async with two_bots(tmp_path, onebot={"heartbeat_interval_seconds": 60,
                                                  "reverse_ws": [url]}):
                pass
        [owed] = [entry for entry in logs if entry["event"].startswith(
            "[onebot] events owed to connections this config does not make")]
        assert owed["owed"] == {
            "reverse_ws ws://127.0.0.1:9/onebot/v11/ws?access_token=***": 3}
        [session] = [entry for entry in logs if entry["event"].startswith(
            "[qq] gateway session of bot not resumed")]
        assert session["sessions"] == [f"gateway-session-{FIRST}.json",
                                       f"gateway-session-{SECOND}.json"]
        assert "s3cret-in-url" not in repr(owed)  # a dict's keys: hidden by the warning

    asyncio.run(scenario())


def test_readyz_metrics_and_the_overview_are_per_bot(tmp_path: Path) -> None:
    """Issue 34.5: with both bots' sessions up the daemon is ready; once the second bot's
    session is lost (its platform answers no Resume) ``/readyz`` names that bot alone, its
    ``get_status`` alone says it is not online, and ``/metrics`` has each bot's gateway
    state, events in, events out and actions, each labelled with its AppID; the overview
    says the same per bot."""
    api = free_port()

    async def scenario() -> None:
        async with two_bots(tmp_path, api={"listen": f"127.0.0.1:{api}"}) as bots:
            first, second = bots.platforms
            for n, platform in enumerate(bots.platforms, 1):
                event = await bots.event(platform, "GROUP_AT_MESSAGE_CREATE",
                                         group_message(n, GROUP))
                answer = await bots.action(platform.app_id, "send_group_msg",
                                           group_id=event["group_id"], message="pong")
                assert answer["status"] == "ok", answer

            async def readyz() -> tuple[int, dict[str, Any]]:
                async with bots.http.get(f"http://127.0.0.1:{api}/readyz") as resp:
                    return resp.status, await resp.json()

            await until_async(lambda: readyz(), lambda r: r[0] == 200, "both bots ready")
            second.hold_sessions()
            await second.drop(4009)
            status, body = await until_async(readyz, lambda r: r[0] == 503,
                                             "the second bot not ready")
            assert body["missing"] == ["bots.1 (AppID 102000002): gateway not connected: no "
                                       "session established"], body
            # what each bot tells its frameworks follows the same rule, per bot
            assert (await bots.action(SECOND, "get_status"))["data"] == {
                "online": False, "good": False}
            assert (await bots.action(FIRST, "get_status"))["data"] == {
                "online": True, "good": True}
            async with bots.http.get(f"http://127.0.0.1:{api}/metrics") as resp:
                text = await resp.text()
            samples = {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
                       for family in text_string_to_metric_families(text)
                       for sample in family.samples}
            for bot, connected in ((FIRST, 1.0), (SECOND, 0.0)):
                assert samples[("gensokyo_gateway_state",
                                (("bot", bot), ("state", "connected")))] == connected
                assert samples[("gensokyo_events_in_total",
                                (("bot", bot), ("transport", "gateway")))] >= 1
                assert samples[("gensokyo_events_out_total",
                                (("bot", bot), ("transport", "forward_ws")))] >= 1
                assert samples[("gensokyo_action_seconds_count",
                                (("action", "send_group_msg"), ("bot", bot)))] >= 1
            async with bots.http.get(f"http://127.0.0.1:{api}/ui/overview.json") as resp:
                overview = await resp.json()
            assert [(bot["app_id"], bot["gateway"]["state"]) for bot in overview["bots"]] == [
                (FIRST, "connected"), (SECOND, "connecting")]
            second.release_sessions()

    asyncio.run(scenario())


async def until_async(ask: Callable[[], Awaitable[T]], done: Callable[[T], bool],
                      what: str) -> T:
    """Ask until ``done`` says the answer is the one awaited (within :data:`TIMEOUT`)."""
    deadline = asyncio.get_running_loop().time() + TIMEOUT
    while True:
        answer = await ask()
        if done(answer):
            return answer
        assert asyncio.get_running_loop().time() < deadline, f"{what}: {answer}"
        await asyncio.sleep(0.05)
