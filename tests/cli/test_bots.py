"""The CLI with a config of several bots (issue 34.4, 34.5): ``--app-id`` names which bot's
OpenID a bare one is (the first bot's by default), one naming no bot of the config is
refused naming its AppIDs, and ``stats`` counts per AppID (a bot removed from the config
keeps its identities) with what each bot's framework connections are owed and what is
owed under a name no connection of the config has."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from click.testing import CliRunner, Result

from gensokyo_idmap.cli import main
from gensokyo_idmap.store.lmdb.outbox import LmdbOutboxStore

FIRST, SECOND, GONE = "102000001", "102000002", "102000009"
ALICE = "9F3A0C55E1B24D7A8C6E0F1D2B3A4C5D"
URL = "ws://127.0.0.1:8080/onebot/v11/ws"


@pytest.fixture(autouse=True)
def _structlog_defaults() -> Iterator[None]:
    yield
    structlog.reset_defaults()


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "bots.yml"
    path.write_text(f"""bots:
  - app_id: "{FIRST}"
    secret: first-secret
  - app_id: "{SECOND}"
    secret: second-secret
    self_id: 20002
onebot:
  reverse_ws: ["{URL}"]
idmap:
  data_dir: {tmp_path / "data"}
""", encoding="utf-8")
    return path


def cli(config: Path, *args: str) -> Result:
    runner = CliRunner(env={"GSK_IDMAP__DATA_DIR": None, "GSK_BOT__APP_ID": None})
    return runner.invoke(main, ["--config", str(config), *args], catch_exceptions=False)


def out(result: Result) -> str:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result.stdout


def test_app_id_picks_the_bot_of_a_bare_openid(config: Path) -> None:
    made = json.loads(out(cli(config, "--json", "identity", "resolve", ALICE)))
    assert made["added"] == [f"openid:QQ:{FIRST}:{ALICE}"]  # the first bot's by default
    made = json.loads(out(cli(config, "--app-id", SECOND, "--json", "identity", "resolve",
                              ALICE)))
    assert made["added"] == [f"openid:QQ:{SECOND}:{ALICE}"]
    assert out(cli(config, "--app-id", SECOND, "identity", "lookup", ALICE)).strip() == str(
        made["vuin"])


def test_an_app_id_naming_no_bot_of_the_config_is_refused_naming_them(config: Path) -> None:
    for command in (["identity", "resolve", ALICE], ["identity", "lookup", ALICE],
                    ["stats"]):
        result = cli(config, "--app-id", GONE, *command)
        assert result.exit_code == 2, result.output
        assert (f"Invalid value for '--app-id': not a bot of this daemon (its AppIDs: "
                f"{FIRST}, {SECOND})") in result.stderr
        assert f"(got '{GONE}')" in result.stderr
    assert not (config.parent / "data" / "openid-map.db").exists()  # nothing written


def test_stats_per_app_id_with_what_each_bot_is_owed(config: Path) -> None:
    assert out(cli(config, "identity", "resolve", ALICE))
    assert out(cli(config, "--app-id", SECOND, "identity", "resolve", ALICE))
    gone = CliRunner(env={"GSK_IDMAP__DATA_DIR": None, "GSK_BOT__APP_ID": None}).invoke(
        main, ["--data-dir", str(config.parent / "data"), "--app-id", GONE, "identity",
               "resolve", ALICE])  # a bot the config no longer has: its people stay
    assert gone.exit_code == 0, gone.output
    outbox = LmdbOutboxStore(config.parent / "data" / "outbox.db")
    try:
        outbox.write_sync(lambda view: [
            view.add(name, b"{}") for name in (
                f"reverse_ws {URL} (self_id 20002)", f"reverse_ws {URL} (self_id 20002)",
                f"reverse_ws {URL} (self_id {FIRST})", f"reverse_ws {URL}")])
    finally:
        outbox.close()
    stats = json.loads(out(cli(config, "--json", "stats")))
    assert stats["bots"] == {
        FIRST: {"served": True, "self_id": int(FIRST), "openids": 1, "owed": 1},
        SECOND: {"served": True, "self_id": 20002, "openids": 1, "owed": 2},
        GONE: {"served": False, "self_id": None, "openids": 1}}
    assert stats["outbox"]["orphaned"] == {f"reverse_ws {URL}": 1}
    assert json.loads(out(cli(config, "--app-id", SECOND, "--json", "stats")))["bots"] == {
        SECOND: stats["bots"][SECOND]}
    human = out(cli(config, "stats"))
    assert f"  {SECOND:<12} self_id 20002: 1 OpenIDs, 2 events owed" in human
    assert f"  {GONE:<12} not a bot of the config: 1 OpenIDs" in human
    assert f"  1 owed to reverse_ws {URL}: no connection of the config has that name" in human
