"""app.run_daemon: open the store, run until told to stop, close cleanly.

In-process tests drive ``run_daemon`` with a stop event; end-to-end tests start the real
``gensokyo-idmap serve`` console script and stop it with a signal. Waits are bounded
polling loops; nothing asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from gensokyo_idmap.app import run_daemon
from gensokyo_idmap.config import (
    ApiConfig,
    BotConfig,
    Config,
    IdmapConfig,
    LogConfig,
    QQConfig,
    load_config,
)
from gensokyo_idmap.errors import SchemaVersionError, StoreError
from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.logging import configure_logging
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.store.lmdb.identity import SCHEMA_VERSION, LmdbIdentityStore
from migrate.startup import migrate_if_found

from gensokyo_idmap.testing import free_port, until
from gensokyo_idmap.testing.daemon import NO_PLATFORM_TOKEN_URL

APP_ID = "102000001"
OPENID = "9F3A0C55E1B24D7A8C6E0F1D2B3A4C5D"
SECRET = "Zq9-DISTINCT-app-secret-7Hx2"
SCRIPT = Path(sys.executable).parent / "gensokyo-idmap"
TIMEOUT = 30.0


@pytest.fixture(autouse=True)
def _structlog_defaults() -> Iterator[None]:
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


def make_config(data_dir: Path) -> Config:
    """The example's shape, on ports of its own (the default API port may be taken by a
    daemon someone runs on this machine)."""
    return Config(
        bot=BotConfig(app_id=APP_ID, secret=SECRET),  # type: ignore[arg-type]
        # the token is asked for at start: of a closed port here, never the real platform
        qq=QQConfig(token_url=NO_PLATFORM_TOKEN_URL),
        idmap=IdmapConfig(data_dir=data_dir, map_size_mb=1),
        api=ApiConfig(listen=f"127.0.0.1:{free_port()}"),
        log=LogConfig(level="debug", format="json"),
    )


async def wait_for_path(path: Path, task: asyncio.Task[None]) -> None:
    def alive() -> None:
        if task.done():
            task.result()  # surface the failure
            raise AssertionError("run_daemon returned before opening the store")

    await until(path.exists, TIMEOUT, f"{path} to appear", alive=alive)


async def wait_for_event(logs: list[dict[str, Any]], event: str) -> None:
    await until(lambda: any(entry["event"] == event for entry in logs), TIMEOUT,
                f"the {event!r} log event")


def run_until_ready_then_stop(config: Config) -> list[dict[str, Any]]:
    async def scenario() -> list[dict[str, Any]]:
        stop = asyncio.Event()
        with capture_logs() as logs:
            # as `serve` runs it: with the start-up migration
            task = asyncio.create_task(run_daemon(config, stop, prepare=migrate_if_found))
            await wait_for_path(config.identity_db_path, task)
            await wait_for_event(logs, "[app] ready")
            assert not task.done()
            stop.set()
            await asyncio.wait_for(task, TIMEOUT)
        # no platform here: the token refused by its closed port is not what these look at
        return [entry for entry in logs if entry["event"] != "[qq] access token not obtained"]

    return asyncio.run(scenario())


def test_run_daemon_starts_stops_and_closes(tmp_path: Path) -> None:
    config = make_config(tmp_path / "data")
    term_before = signal.getsignal(signal.SIGTERM)
    logs = run_until_ready_then_stop(config)

    events = [entry["event"] for entry in logs]
    assert events == ["[idmap] store open", "[idmap] msgid store open",
                      "[http] connection limits", "[api] listening", "[app] ready",
                      "[app] stopping", "[app] stopped"]
    opened = logs[0]
    assert opened["path"] == str(tmp_path / "data" / "openid-map.db")
    assert opened["identities"] == 0
    assert opened["vuins"] == 0
    assert opened["app_id"] == APP_ID
    # its signal handlers are gone again
    assert signal.getsignal(signal.SIGTERM) == term_before

    # closed cleanly: the file opens again, takes a write and reads it back
    with LmdbIdentityStore(config.identity_db_path) as store:
        graph = IdentityGraph(store)
        vuin = asyncio.run(graph.resolve([OpenId(APP_ID, OPENID)])).vuin
        assert vuin == 1
        assert graph.lookup(OpenId(APP_ID, OPENID)) == 1


def test_v1_stats_gives_the_store_sizes_as_stats_json_does(tmp_path: Path) -> None:
    """/v1/stats of a daemon on LMDB measures openid-map.db (it said `bytes: null`, as for a
    PostgreSQL graph, while `stats --json` gave the size)."""
    import aiohttp
    from click.testing import CliRunner

    from gensokyo_idmap.cli import main

    config = make_config(tmp_path / "data")

    async def scenario() -> dict[str, Any]:
        stop = asyncio.Event()
        with capture_logs() as logs:
            task = asyncio.create_task(run_daemon(config, stop))
            await wait_for_path(config.identity_db_path, task)
            await wait_for_event(logs, "[app] ready")
            async with aiohttp.ClientSession() as http, \
                    http.get(f"http://{config.api.listen}/v1/stats") as resp:
                assert resp.status == 200, await resp.text()
                stats: dict[str, Any] = await resp.json()
            stop.set()
            await asyncio.wait_for(task, TIMEOUT)
        return stats

    served = asyncio.run(scenario())
    result = CliRunner(env={"GSK_IDMAP__DATA_DIR": None}).invoke(
        main, ["--data-dir", str(config.idmap.data_dir), "--json", "stats"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    size = config.identity_db_path.stat().st_size
    assert served["openid_map"]["path"] == str(config.identity_db_path)
    assert served["openid_map"]["bytes"] == printed["openid_map"]["bytes"] == size
    assert served["msgid_map"]["bytes"] == printed["msgid_map"]["bytes"] > 0


def test_v1_stats_and_metrics_show_each_memory_table_of_the_daemon(tmp_path: Path) -> None:
    """The daemon registers every in-memory table (issue 36.3): /v1/stats' ``memory`` names
    each with its entries and estimated bytes, beside the resident memory, and /metrics has
    a gauge per table."""
    import aiohttp

    config = make_config(tmp_path / "data")
    config = config.model_copy(update={"onebot": config.onebot.model_copy(  # its token table
        update={"http_api": f"127.0.0.1:{free_port()}"})})

    async def scenario() -> tuple[dict[str, Any], str]:
        stop = asyncio.Event()
        with capture_logs() as logs:
            task = asyncio.create_task(run_daemon(config, stop))
            await wait_for_event(logs, "[app] ready")
            base = f"http://{config.api.listen}"
            async with aiohttp.ClientSession() as http:
                async with http.get(f"{base}/v1/stats") as resp:
                    assert resp.status == 200, await resp.text()
                    stats: dict[str, Any] = await resp.json()
                async with http.get(f"{base}/metrics") as resp:
                    text = await resp.text()
            stop.set()
            await asyncio.wait_for(task, TIMEOUT)
        return stats, text

    stats, text = asyncio.run(scenario())
    memory = stats["memory"]
    assert memory["rss_anon_bytes"] > 0 and memory["rss_file_bytes"] > 0
    names = [table["name"] for table in memory["tables"]]
    assert set(names) >= {
        "reply_counts", "inbound_contexts", "member_profiles",
        "guild_directory", "parsed_keys", "probe_key_bytes", "probe_scene_bytes",
        "probe_answers", "send_chats", "send_targets", "reply_walks", "delivery_keys",
        "chat_turns", "parsed_openids", "console_sessions", "api_token_failures",
        "onebot_token_failures"}
    assert len(names) == len(set(names))  # one row per table (each bot's added up)
    for table in memory["tables"]:
        assert table["entries"] >= 0 and table["bytes"] > 0, table
        assert f'gensokyo_memory_table_entries{{table="{table["name"]}"}}' in text
        assert f'gensokyo_memory_table_bytes{{table="{table["name"]}"}}' in text


def test_run_daemon_keeps_existing_identities(tmp_path: Path) -> None:
    config = make_config(tmp_path / "data")
    with LmdbIdentityStore(config.identity_db_path) as store:
        graph = IdentityGraph(store)
        asyncio.run(graph.resolve([OpenId(APP_ID, OPENID), OpenId(APP_ID, "OTHER")]))
        asyncio.run(graph.resolve([OpenId(APP_ID, "THIRD")]))

    logs = run_until_ready_then_stop(config)
    opened = next(entry for entry in logs if entry["event"] == "[idmap] store open")
    assert (opened["identities"], opened["vuins"]) == (3, 2)

    with LmdbIdentityStore(config.identity_db_path) as store:
        graph = IdentityGraph(store)
        assert graph.lookup(OpenId(APP_ID, OPENID)) == 1
        assert graph.lookup(OpenId(APP_ID, "THIRD")) == 2
        assert asyncio.run(graph.resolve([OpenId(APP_ID, "NEW")])).vuin == 3


def test_run_daemon_twice_on_one_store(tmp_path: Path) -> None:
    config = make_config(tmp_path / "data")
    run_until_ready_then_stop(config)
    logs = run_until_ready_then_stop(config)
    assert logs[-1]["event"] == "[app] stopped"


def test_run_daemon_without_app_id_logs_none(tmp_path: Path) -> None:
    config = Config(idmap=IdmapConfig(data_dir=tmp_path / "d"))
    logs = run_until_ready_then_stop(config)
    opened = next(entry for entry in logs if entry["event"] == "[idmap] store open")
    assert opened["app_id"] is None


def test_run_daemon_logs_no_secret(tmp_path: Path) -> None:
    logs = run_until_ready_then_stop(make_config(tmp_path / "data"))
    assert len(logs) == 7  # both stores open, connection limits, api listening, ready,
    # stopping, stopped
    assert SECRET not in repr(logs)


async def _start_failure(config: Config) -> tuple[BaseException | None, object]:
    """What run_daemon raised, and the SIGTERM handler right after, inside the same loop."""
    failure: BaseException | None = None
    try:
        await asyncio.wait_for(run_daemon(config, asyncio.Event()), TIMEOUT)
    except Exception as err:  # noqa: BLE001 - the type is what the tests check
        failure = err
    return failure, signal.getsignal(signal.SIGTERM)


def test_run_daemon_schema_too_new_fails_and_removes_its_handlers(tmp_path: Path) -> None:
    config = make_config(tmp_path / "data")
    with LmdbIdentityStore(config.identity_db_path, schema_version=SCHEMA_VERSION + 1):
        pass
    term_before = signal.getsignal(signal.SIGTERM)
    failure, handler_after = asyncio.run(_start_failure(config))
    assert isinstance(failure, SchemaVersionError), repr(failure)
    assert f"schema_version {SCHEMA_VERSION + 1}" in failure.message
    # a failed start must not leave its signal handlers installed in the caller's loop
    assert handler_after == term_before


def test_run_daemon_data_dir_is_a_file_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    failure, _ = asyncio.run(_start_failure(make_config(blocker)))
    # errors.py: StoreError "the store cannot be opened"; the CLI prints IdmapErrors cleanly
    assert isinstance(failure, StoreError), repr(failure)
    assert str(blocker) in failure.message


#: ``[onebot] reverse ws unavailable`` in a JSON line (the component in a field of its own).
UNAVAILABLE = '"event":"reverse ws unavailable"'


def test_framework_urls_are_logged_without_their_credentials(tmp_path: Path) -> None:
    """Reverse-WS and HTTP POST URLs written with user:password@ (or ?access_token=) were
    logged as written: the start-up lines, the listener list and every connect attempt."""
    closed = free_port()  # nothing listens: the reverse WS logs its failed attempts
    config = Config.model_validate({
        "bot": {"app_id": APP_ID, "secret": SECRET},
        "qq": {"token_url": NO_PLATFORM_TOKEN_URL},
        "idmap": {"data_dir": str(tmp_path / "data"), "map_size_mb": 1},
        "api": {"listen": ""},
        "onebot": {"reverse_ws": [f"ws://user:{SECRET}@127.0.0.1:{closed}/ws",
                                  f"ws://127.0.0.1:{closed}/ws2?access_token={SECRET}"],
                   "http_post": [{"url": f"http://{SECRET}@127.0.0.1:{closed}/post"}]},
    })
    stream = io.StringIO()
    configure_logging("debug", "json", stream=stream)

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(run_daemon(config, stop))
        for _ in range(int(TIMEOUT / 0.01)):
            if stream.getvalue().count(UNAVAILABLE) >= 2:
                break
            await asyncio.sleep(0.01)
        stop.set()
        await asyncio.wait_for(task, TIMEOUT)

    asyncio.run(scenario())
    text = stream.getvalue()
    assert text.count(UNAVAILABLE) >= 2, text
    assert '"event":"ready"' in text
    assert SECRET not in text
    assert f"ws://***@127.0.0.1:{closed}/ws" in text and "access_token=***" in text


# --------------------------------------------------------------------------- the real process


def _reader(stream: Any, lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


_Serving = tuple["subprocess.Popen[str]", "queue.Queue[str | None]", list[str], threading.Thread]


def _start_serve(config_file: Path, cwd: Path) -> _Serving:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GSK_")}
    proc = subprocess.Popen(
        [str(SCRIPT), "serve", "--config", str(config_file)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    seen: list[str] = []
    thread = threading.Thread(target=_reader, args=(proc.stderr, lines), daemon=True)
    thread.start()
    return proc, lines, seen, thread


def _wait_for_line(lines: queue.Queue[str | None], seen: list[str], needle: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"no {needle!r} line; stderr so far: {''.join(seen)}")
        try:
            line = lines.get(timeout=remaining)
        except queue.Empty:
            continue
        if line is None:
            raise AssertionError(f"process ended before {needle!r}; stderr: {''.join(seen)}")
        seen.append(line)
        if needle in line:
            return


def _end(serving: _Serving, sig: signal.Signals = signal.SIGTERM) -> tuple[int, str, str]:
    """Stop a ``serve`` process with ``sig`` (kill it if it lingers): its exit code, stdout
    and stderr."""
    proc, lines, seen, thread = serving
    try:
        if proc.poll() is None:
            proc.send_signal(sig)
            proc.wait(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=TIMEOUT)
        thread.join(timeout=TIMEOUT)
    assert proc.stdout is not None and proc.stderr is not None
    stdout = proc.stdout.read()
    proc.stdout.close()
    proc.stderr.close()
    while not lines.empty():
        line = lines.get_nowait()
        if line is not None:
            seen.append(line)
    return proc.returncode, stdout, "".join(seen)


def _cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GSK_")}
    return subprocess.run([str(SCRIPT), "--data-dir", str(data_dir), "--json", *args],
                          capture_output=True, text=True, timeout=TIMEOUT, env=env,
                          check=False)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("fmt", ["console", "json"])
def test_serve_process_ready_then_signal(tmp_path: Path, sig: signal.Signals, fmt: str) -> None:
    assert SCRIPT.exists(), SCRIPT
    data_dir = tmp_path / "data"
    config_file = tmp_path / "config.yml"
    config_file.write_text(
        f'bot:\n  app_id: "{APP_ID}"\n  secret: "{SECRET}"\n'
        f"qq:\n  token_url: {NO_PLATFORM_TOKEN_URL}\n"
        f"idmap:\n  data_dir: {data_dir}\n  map_size_mb: 1\n"
        f"log:\n  level: debug\n  format: {fmt}\n",
        encoding="utf-8",
    )
    assert load_config(config_file).bot.secret.get_secret_value() == SECRET

    # JSON lines carry the component in a field of their own: "[app] ready" is
    # "event":"ready" … "component":"app"
    ready, stopping, stopped = (f"[app] {event}" if fmt == "console" else f'"event":"{event}"'
                                for event in ("ready", "stopping", "stopped"))
    serving = _start_serve(config_file, tmp_path)
    try:
        _wait_for_line(serving[1], serving[2], ready)
        assert (data_dir / "openid-map.db").exists()
    finally:
        code, stdout, stderr = _end(serving, sig)

    assert code == 0, stderr
    assert stopping in stderr
    assert stopped in stderr
    assert "Traceback" not in stderr
    assert SECRET not in stderr
    assert SECRET not in stdout
    # it closed the store: the file opens and reads in this process
    with LmdbIdentityStore(data_dir / "openid-map.db") as store, store.read() as view:
        assert view.counts().identities == 0


@pytest.mark.slow
def test_serve_bad_config_exits_2_without_the_secret(tmp_path: Path) -> None:
    config_file = tmp_path / "config.yml"
    config_file.write_text(f'bot:\n  app_id: "x1"\n  secret: "{SECRET}"\n', encoding="utf-8")
    done = subprocess.run(
        [str(SCRIPT), "serve", "--config", str(config_file)],
        capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path, check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("error: bot.app_id: ")
    assert SECRET not in done.stderr
    assert not (tmp_path / "data").exists()


@pytest.mark.slow
def test_a_second_serve_on_one_data_dir_is_refused_and_readers_work_beside_it(
        tmp_path: Path) -> None:
    """Two daemons on one data dir resumed one gateway session and knocked each other off.
    Now the second exits non-zero naming the data dir and the first one's pid; read-only
    CLI commands work beside the first; after kill -9 of the first a new serve starts."""
    data_dir = tmp_path / "data"
    with LmdbIdentityStore(data_dir / "openid-map.db") as store:
        assert asyncio.run(IdentityGraph(store).resolve([OpenId(APP_ID, OPENID)])).vuin == 1
    assert _cli(data_dir, "--app-id", APP_ID, "msgid", "store", "ROBOT1.0_x").returncode == 0
    config_file = tmp_path / "config.yml"
    config_file.write_text(
        f'bot:\n  app_id: "{APP_ID}"\n  secret: "{SECRET}"\n'
        f"qq:\n  token_url: {NO_PLATFORM_TOKEN_URL}\n"
        f'idmap:\n  data_dir: {data_dir}\n  map_size_mb: 1\napi:\n  listen: ""\n',
        encoding="utf-8")

    first = _start_serve(config_file, tmp_path)
    try:
        _wait_for_line(first[1], first[2], "[app] ready")
        second = subprocess.run([str(SCRIPT), "serve", "--config", str(config_file)],
                                capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path,
                                check=False)
        assert second.returncode != 0
        assert second.stderr.startswith(f"error: data dir {data_dir} is in use")
        assert f"pid {first[0].pid}" in second.stderr and "Traceback" not in second.stderr
        commands = [("stats",), ("verify",), ("identity", "lookup", OpenId(APP_ID, OPENID).key),
                    ("identity", "show", "1"), ("msgid", "lookup", "1"), ("msgid", "stats")]
        with ThreadPoolExecutor(len(commands)) as pool:  # all at once, beside the daemon
            readers = dict(zip((" ".join(c[:2]) for c in commands),
                               pool.map(lambda args: _cli(data_dir, *args), commands),
                               strict=True))
        for name, done in readers.items():
            assert done.returncode == 0, (name, done.stderr)
        assert json.loads(readers["identity lookup"].stdout)["vuin"] == 1
        assert json.loads(readers["msgid lookup"].stdout)["real_id"] == "ROBOT1.0_x"
        assert first[0].poll() is None  # the first one serves on, undisturbed
    finally:
        code, _, _ = _end(first, signal.SIGKILL)
    assert code == -signal.SIGKILL

    third = _start_serve(config_file, tmp_path)  # the kernel dropped the killed one's lock
    try:
        _wait_for_line(third[1], third[2], "[app] ready")
    finally:
        code, _, stderr = _end(third)
    assert code == 0, stderr


# --------------------------------------------------------------- a token for each transport


def test_each_transport_takes_its_own_token_or_the_default(tmp_path: Path) -> None:
    """onebot.access_token is every transport's token unless the transport sets its own
    (empty: none): reverse-WS entries, the forward WS, the HTTP API, HTTP POST secrets."""
    from contextlib import AsyncExitStack

    from aiohttp import ClientSession, WSServerHandshakeError, web

    from gensokyo_idmap.app import build_daemon
    from gensokyo_idmap.onebot.http_post import sign_body

    async def scenario() -> None:
        seen: dict[str, str | None] = {}
        signatures: list[str | None] = []

        async def framework(request: web.Request) -> web.StreamResponse:
            if request.method == "POST":
                signatures.append(request.headers.get("X-Signature"))
                return web.Response(status=204)
            seen[request.path] = request.headers.get("Authorization")
            ws = web.WebSocketResponse()
            await ws.prepare(request)
            async for _ in ws:
                pass
            return ws

        app = web.Application()
        app.add_routes([web.get("/{name}", framework), web.post("/{name}", framework)])
        runner = web.AppRunner(app)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        forward, http_api = free_port(), free_port()
        config = Config.model_validate({
            "bot": {"app_id": APP_ID},
            "idmap": {"data_dir": str(tmp_path / "data"), "map_size_mb": 1},
            "api": {"listen": ""},
            "onebot": {
                "access_token": "default-T", "heartbeat_interval_seconds": 60,
                "reverse_ws": [f"ws://127.0.0.1:{port}/plain",
                               {"url": f"ws://127.0.0.1:{port}/own", "access_token": "own-T"},
                               {"url": f"ws://127.0.0.1:{port}/open", "access_token": ""}],
                "forward_ws": f"127.0.0.1:{forward}", "forward_ws_access_token": "fwd-T",
                "http_api": f"127.0.0.1:{http_api}", "http_api_access_token": "",
                "http_post": [{"url": f"http://127.0.0.1:{port}/signed"},
                              {"url": f"http://127.0.0.1:{port}/unsigned", "secret": ""}]}})
        try:
            async with AsyncExitStack() as stack, ClientSession() as http:
                daemon = await build_daemon(config, asyncio.Event(), stack)
                await until(lambda: len(seen) == 3, TIMEOUT, "three reverse WS connections")
                assert seen == {"/plain": "Bearer default-T", "/own": "Bearer own-T",
                                "/open": None}
                with pytest.raises(WSServerHandshakeError) as refused:
                    await http.ws_connect(f"ws://127.0.0.1:{forward}/",
                                          headers={"Authorization": "Bearer default-T"})
                assert refused.value.status == 403
                async with http.ws_connect(f"ws://127.0.0.1:{forward}/api",
                                           headers={"Authorization": "Bearer fwd-T"}) as ws:
                    await ws.send_json({"action": "get_version_info", "echo": 1})
                    assert (await ws.receive_json(timeout=TIMEOUT))["status"] == "ok"
                async with http.get(f"http://127.0.0.1:{http_api}/get_status") as resp:
                    assert resp.status == 200  # its own token is empty: none needed
                event = {"post_type": "meta_event", "meta_event_type": "heartbeat", "n": 1}
                for post in daemon.posts:
                    post.publish(event)
                await until(lambda: len(signatures) == 2, TIMEOUT, "both HTTP POSTs")
                body = json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()
                assert sorted(signatures, key=str) == sorted(
                    [sign_body("default-T", body), None], key=str)
        finally:
            await runner.cleanup()

    asyncio.run(scenario())
