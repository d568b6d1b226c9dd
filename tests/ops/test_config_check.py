"""GSK_<SECTION>__<KEY> overrides, ``config check`` and ``config import-gensokyo``."""

from __future__ import annotations

import typing

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from click.testing import CliRunner, Result

from gensokyo_idmap.cli import main
from gensokyo_idmap.config import Config, load_config
from gensokyo_idmap.errors import BadInputError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "config.yml"
GENSOKYO = Path(__file__).resolve().parents[1] / "fixtures" / "gensokyo" / "config.yml"
SECRET = "Zq9-DISTINCT-bot-secret-7Hx2"
OLD_SECRETS = ("sample-client-secret-Hk29", "sample-ws-token-Q7", "sample-post-secret-W1",
               "sample-ws-server-token-9", "sample-http-token-M3", "sample-webui-password",
               "sample-old-bot-token-Zt4")


def write(tmp_path: Path, text: str, name: str = "config.yml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- environment overrides ---------------------------------------------------------------


def test_env_overrides_win_over_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, 'bot:\n  app_id: "1"\nidmap:\n  map_size_mb: 8\n')
    config = load_config(path, {
        "GSK_QQ__GATEWAY": "true",
        "GSK_IDMAP__MAP_SIZE_MB": "128",
        "GSK_IDMAP__DATA_DIR": str(tmp_path / "d"),
        "GSK_BOT__APP_ID": "102000009",           # digits stay text: an AppID
        "GSK_BOT__SECRET": "123456",              # a secret is taken as written
        "GSK_ONEBOT__REVERSE_WS": "[ws://a:1/x, ws://b:2/y]",
        "GSK_ONEBOT__HTTP_POST": '[{url: "http://h:1/p", secret: s1}]',
        "GSK_ONEBOT__SELF_ID": "42",
        "GSK_LOG__LEVEL": "debug",
        "OTHER": "x", "GSK_NOT_OURS": "ignored (no __)",
    })
    assert config.qq.gateway is True
    assert config.idmap.map_size_mb == 128
    assert config.idmap.data_dir == tmp_path / "d"
    assert config.bot.app_id == "102000009"
    assert config.bot.secret.get_secret_value() == "123456"
    assert config.onebot.reverse_ws == ["ws://a:1/x", "ws://b:2/y"]
    assert [(p.url, p.secret.get_secret_value()) for p in config.onebot.http_post] == [
        ("http://h:1/p", "s1")]
    assert config.onebot.self_id == 42
    assert config.log.level == "debug"


def test_text_values_are_not_reinterpreted(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, ""), {"GSK_BOT__SECRET": "[not: yaml",
                                               "GSK_WEBHOOK__LISTEN": "",
                                               "GSK_IDMAP__LEGACY_DB": ""})
    assert config.bot.secret.get_secret_value() == "[not: yaml"
    assert config.webhook.listen == ""
    assert config.legacy_db_path is None  # "" switches migration off, as in the file


def test_env_without_a_file_section(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "log:\n  level: info\n"), {"GSK_QQ__INTENTS": "7"})
    assert config.qq.intents == 7 and config.log.level == "info"


@pytest.mark.parametrize(("var", "value", "where"), [
    ("GSK_BOT__APPID", "1", "bot.appid"),
    ("GSK_NOPE__KEY", "1", "nope"),
    ("GSK_IDMAP__MAP_SIZE_MB", "big", "idmap.map_size_mb"),
    ("GSK_IDMAP__MAP_SIZE_MB", "[1", "idmap.map_size_mb"),
    ("GSK_QQ__GATEWAY", "maybe", "qq.gateway"),
    ("GSK_ONEBOT__REVERSE_WS", "[http://x]", "onebot.reverse_ws"),
    ("GSK_BOT__APP_ID", "abc", "bot.app_id"),
])
def test_bad_env_value_names_the_key_and_the_variable(tmp_path: Path, var: str, value: str,
                                                      where: str) -> None:
    with pytest.raises(BadInputError) as err:
        load_config(write(tmp_path, ""), {var: value})
    assert err.value.field == where
    assert err.value.message.startswith(f"{where}")
    assert var in err.value.message


@pytest.mark.parametrize("env", [
    {"GSK_BOT__SECRET": SECRET, "GSK_BOT__APP_ID": "x"},
    {"GSK_ONEBOT__HTTP_POST": f'[{{secret: "{SECRET}"}}]'},     # url missing: the entry
    {"GSK_ONEBOT__HTTP_POST": f'[{{url: "ftp://x", secret: "{SECRET}"}}]'},
    {"GSK_ONEBOT__ACCESS_TOKEN": SECRET, "GSK_ONEBOT__EXTRA": "1"},
    # not valid YAML: the text itself would be echoed
    {"GSK_ONEBOT__HTTP_POST": f'[{{url: "http://h:1/p", secret: {SECRET}}}'},
    {"GSK_ONEBOT__HTTP_POST": f'[{{"url": "http://h:1/p", "secret": "{SECRET} x"}}'},
    {"GSK_ONEBOT__REVERSE_WS": f"[ws://user:{SECRET}@h:1/ws"},
    # valid YAML, a refused value: the URL (with its password) is quoted in the reason
    {"GSK_ONEBOT__REVERSE_WS": f"[http://user:{SECRET}@h:1/ws]"},
    {"GSK_ONEBOT__HTTP_POST": f"[{{url: 'ftp://user:{SECRET}@h/p'}}]"},
])
def test_secret_from_env_never_in_errors(tmp_path: Path, env: dict[str, str]) -> None:
    with pytest.raises(BadInputError) as err:
        load_config(write(tmp_path, ""), env)
    for shown in (str(err.value), repr(err.value), repr(err.value.value)):
        assert SECRET not in shown


def test_secret_in_a_file_entry_never_in_errors(tmp_path: Path) -> None:
    # a list entry missing its url: pydantic's input is the whole entry, secret included
    path = write(tmp_path, f'onebot:\n  http_post:\n    - secret: "{SECRET}"\n')
    with pytest.raises(BadInputError) as err:
        load_config(path, {})
    assert err.value.field == "onebot.http_post.0.url"
    assert SECRET not in str(err.value) and SECRET not in repr(err.value.value)


# --- config check --------------------------------------------------------------------------


def cli(*args: str, env: dict[str, str] | None = None) -> Result:
    clean = {k: None for k in os.environ if k.startswith("GSK_")}
    runner = CliRunner(env={**clean, **(env or {})})
    return runner.invoke(main, list(args), catch_exceptions=False)


def test_check_the_example() -> None:
    result = cli("config", "check", str(EXAMPLE))
    assert result.exit_code == 0, result.output
    assert result.stdout.count("\n") == 1 and result.stdout.startswith(f"ok: {EXAMPLE}: ")
    assert "app_id 102000001" in result.stdout and "webhook 127.0.0.1:8443" in result.stdout
    assert "no bot.secret" in result.stderr  # what serve would warn about


def test_check_starts_nothing(tmp_path: Path) -> None:
    path = write(tmp_path, f'idmap:\n  data_dir: {tmp_path / "d"}\n'
                 'webhook:\n  listen: 127.0.0.1:1\n'
                 f'bot:\n  app_id: "1"\n  secret: "{SECRET}"\n')
    result = cli("--json", "config", "check", str(path))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ok"] is True and "secret set" in data["summary"]
    assert SECRET not in result.output
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize(("text", "env", "where"), [
    ("idmap:\n  map_size_mb: lots\n", {}, "idmap.map_size_mb"),
    ("idmap:\n  map_sise_mb: 8\n", {}, "idmap.map_sise_mb"),
    ("onebot:\n  reverse_ws: [http://x]\n", {}, "onebot.reverse_ws"),
    ("", {"GSK_LOG__LEVEL": "loud"}, "log.level"),
    # what serve refuses at start-up, found without starting it
    ('bot:\n  app_id: "1"\nqq:\n  gateway: true\n', {}, "qq.gateway"),
    ("qq:\n  gateway: true\n", {"GSK_BOT__APP_ID": "1"}, "qq.gateway"),
    ("webhook:\n  listen: 127.0.0.1:8443\n", {}, "webhook.listen"),
    ("api:\n  listen: 0.0.0.0:15631\n", {}, "api.listen"),
    # bots: the gateway of an entry without its secret, shared or its own
    ('bots:\n  - app_id: "1"\n    secret: s\n  - app_id: "2"\nqq:\n  gateway: true\n', {},
     "qq.gateway"),
    ('bots:\n  - app_id: "1"\n  - app_id: "2"\n    qq: {gateway: true}\n', {},
     "bots.1.qq.gateway"),
    ('bots:\n  - app_id: "1"\n  - app_id: "1"\n', {}, "bots.1.app_id"),
])
def test_check_refuses_with_the_key_path(tmp_path: Path, text: str, env: dict[str, str],
                                         where: str) -> None:
    result = cli("config", "check", str(write(tmp_path, text)), env=env)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: {where}: ")


#: Configs that validate but that serve refuses at start-up (ops.config_check.check_startup).
REFUSED_AT_START = [
    'bot:\n  app_id: "1"\nqq:\n  gateway: true\n',
    "webhook:\n  listen: 127.0.0.1:8443\n",
    "api:\n  listen: 0.0.0.0:15631\n",
    'bot:\n  app_id: "1"\napi:\n  listen: "[::]:15631"\n',
    'bots:\n  - app_id: "1"\n  - app_id: "2"\n    qq: {gateway: true}\n',
]


@pytest.mark.parametrize("text", REFUSED_AT_START)
def test_serve_refuses_what_check_refuses_before_opening_anything(tmp_path: Path,
                                                                   text: str) -> None:
    """One validation for both: the same first error, from config check and from the
    daemon, and the daemon refuses before it creates the data dir or binds a port."""
    import asyncio

    from gensokyo_idmap.app import run_daemon

    data = tmp_path / "data"
    path = write(tmp_path, f"idmap:\n  data_dir: {data}\n" + text)
    checked = cli("config", "check", str(path))
    assert checked.exit_code == 2, checked.output
    with pytest.raises(BadInputError) as refused:
        asyncio.run(run_daemon(load_config(path, {})))
    assert checked.stderr == f"error: {refused.value.message}\n"
    assert not data.exists()


def test_check_gateway_with_secret_from_env(tmp_path: Path) -> None:
    path = write(tmp_path, 'bot:\n  app_id: "1"\nqq:\n  gateway: true\n')
    result = cli("config", "check", str(path), env={"GSK_BOT__SECRET": SECRET})
    assert result.exit_code == 0, result.output
    assert "gateway on" in result.stdout and "1 set by GSK_* variables" in result.stdout
    assert SECRET not in result.output


def test_check_names_each_bot_and_what_each_lacks(tmp_path: Path) -> None:
    path = write(tmp_path, 'bots:\n  - app_id: "102000001"\n'
                 '  - app_id: "102000002"\n    self_id: 9\n    onebot: {reverse_ws: []}\n'
                 'webhook:\n  listen: 127.0.0.1:1\n'
                 'onebot:\n  reverse_ws: [ws://127.0.0.1:2/ws]\n')
    result = cli("config", "check", str(path), env={"GSK_BOTS__0__SECRET": SECRET})
    assert result.exit_code == 0, result.output
    assert ("bots 2 (app_id 102000001 self_id 102000001; app_id 102000002 self_id 9 "
            "(no secret))") in result.stdout
    assert "reverse ws 1" in result.stdout
    assert "bots.1 (app_id 102000002) has no secret" in result.stderr
    assert "bots.1 (self_id 9) has no framework connection" in result.stderr
    assert "bots.0" not in result.stderr and SECRET not in result.output


def test_check_missing_file(tmp_path: Path) -> None:
    result = cli("config", "check", str(tmp_path / "nope.yml"))
    assert result.exit_code == 2 and "cannot read" in result.stderr


# --- import-gensokyo ---------------------------------------------------------------------


def test_import_gensokyo_writes_a_config_that_loads(tmp_path: Path) -> None:
    out = tmp_path / "new.yml"
    result = cli("config", "import-gensokyo", str(GENSOKYO), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    config = load_config(out, {})
    assert config.bot.app_id == "102000001"
    assert config.bot.secret.get_secret_value() == "sample-client-secret-Hk29"
    assert config.onebot.self_id == 2870338968
    assert config.qq.gateway is True and config.webhook.listen == ""
    assert config.onebot.reverse_ws == ["ws://127.0.0.1:8080/onebot/v11/ws",
                                        "ws://10.0.0.7:6199/ws"]
    assert config.onebot.access_token.get_secret_value() == "sample-ws-token-Q7"
    assert config.onebot.forward_ws == "0.0.0.0:15630"
    assert config.onebot.http_api == "127.0.0.1:5700"
    # each transport keeps the token it had
    onebot = config.onebot
    assert onebot.token(onebot.forward_ws_access_token) == "sample-ws-server-token-9"
    assert onebot.token(onebot.http_api_access_token) == "sample-http-token-M3"
    assert [(p.url, onebot.token(p.secret), p.max_retries, p.retry_interval_seconds,
             p.timeout_seconds) for p in config.onebot.http_post] == [
        ("http://127.0.0.1:5789/onebot", "sample-post-secret-W1", 3, 1.5, 5)]
    assert config.onebot.message_format == "string"  # array: false
    assert config.onebot.heartbeat_interval_seconds == 10
    assert config.log.level == "warning"  # log_level: 2
    # the Go daemon's switches (the empty white prefix matched everything there: dropped)
    assert (onebot.white_prefixes, onebot.black_prefixes) == (["help", "/status"], ["查询"])
    assert (onebot.remove_at, onebot.send_error) == (True, True)
    assert config.qq.intents == 1 << 25  # GroupAT, C2C, GroupAddRobot: group and C2C events
    assert cli("config", "check", str(out)).exit_code == 0
    # the report: what has no equivalent, and why some values were not carried
    lines = result.stdout.splitlines()
    assert lines[0] == f"wrote {out}"
    unmapped = {line.split()[2].rstrip(":") for line in lines
                if line.startswith("no equivalent: ")}
    assert {"settings.token", "settings.lotus", "settings.hash_id", "settings.remove_prefix",
            "settings.server_user_password"} <= unmapped
    assert not unmapped & {"settings.app_id", "settings.client_secret", "settings.ws_address",
                           "settings.port", "settings.http_address", "settings.post_url",
                           "settings.uin", "settings.log_level", "settings.text_intent",
                           "settings.post_max_retries", "settings.post_retries_interval",
                           "settings.http_timeout", "settings.white_prefixs",
                           "settings.black_prefixs", "settings.remove_at",
                           "settings.send_error", "settings.ws_server_token"}
    assert not any("were not carried" in line for line in lines)
    for secret in OLD_SECRETS:
        assert secret not in result.output


def test_import_gensokyo_to_stdout_hides_secrets(tmp_path: Path) -> None:
    result = cli("config", "import-gensokyo", str(GENSOKYO))
    assert result.exit_code == 0, result.output
    shown: dict[str, Any] = yaml.safe_load(result.stdout)
    assert shown["bot"] == {"app_id": "102000001", "secret": "<hidden>"}
    assert shown["onebot"]["access_token"] == "<hidden>"
    assert shown["onebot"]["forward_ws_access_token"] == "<hidden>"
    assert shown["onebot"]["http_api_access_token"] == "<hidden>"
    assert shown["onebot"]["http_post"][0]["secret"] == "<hidden>"
    assert "no equivalent: settings.token" in result.stderr
    for secret in OLD_SECRETS:
        assert secret not in result.output
    data = json.loads(cli("--json", "config", "import-gensokyo", str(GENSOKYO)).stdout)
    assert data["config"]["bot"]["secret"] == "<hidden>" and data["out"] is None
    lotus = next(entry for entry in data["unmapped"] if entry["key"] == "settings.lotus")
    assert "idmap.backend: postgres" in lotus["reason"]


SECOND_SECRET = "sample-second-secret-Pq8"
SECOND_GENSOKYO = f"""version: 1
settings:
  app_id: 102000002
  client_secret: "{SECOND_SECRET}"
  use_uin: false
  sandbox_mode: true
  ws_address: ["ws://127.0.0.1:8090/onebot/v11/ws"]
  ws_token: ["sample-ws-token-Q7"]
  enable_ws_server: true
  port: "15640"
  array: false
  log_level: 2
"""


def test_import_gensokyo_makes_several_configs_one_bots_list(tmp_path: Path) -> None:
    second = write(tmp_path, SECOND_GENSOKYO, "second.yml")
    out = tmp_path / "new.yml"
    result = cli("config", "import-gensokyo", str(GENSOKYO), str(second), "--out", str(out))
    assert result.exit_code == 0, result.output
    config = load_config(out, {})
    assert config.bot.app_id == "" and len(config.bots) == 2
    first, other = config.bots
    assert (first.app_id, first.own_self_id) == ("102000001", 2870338968)
    assert first.secret.get_secret_value() == "sample-client-secret-Hk29"
    assert first.qq is None and first.onebot is None  # the shared sections are its own
    assert (other.app_id, other.own_self_id) == ("102000002", 102000002)  # use_uin: false
    assert other.secret.get_secret_value() == SECOND_SECRET
    # its sandbox API and its intents (the default: it named no handler) are its own keys
    assert other.qq is not None
    assert other.qq.api_base == "https://sandbox.api.sgroup.qq.com"
    assert other.onebot is not None and other.onebot.reverse_ws == [
        "ws://127.0.0.1:8090/onebot/v11/ws"] and other.onebot.http_post == []
    # shared: the first file's
    assert config.onebot.forward_ws == "0.0.0.0:15630" and config.onebot.self_id is None
    assert config.onebot.reverse_ws == ["ws://127.0.0.1:8080/onebot/v11/ws",
                                        "ws://10.0.0.7:6199/ws"]
    assert cli("config", "check", str(out)).exit_code == 0
    assert ("note: second.yml: onebot.forward_ws differs from config.yml's ('0.0.0.0:15640'; "
            "config.yml: '0.0.0.0:15630')") in result.stdout
    assert "no equivalent: config.yml: settings.token:" in result.stdout
    for secret in (*OLD_SECRETS, SECOND_SECRET):
        assert secret not in result.output
    shown = yaml.safe_load(cli("config", "import-gensokyo", str(GENSOKYO), str(second)).stdout)
    assert [bot["secret"] for bot in shown["bots"]] == ["<hidden>", "<hidden>"]
    assert shown["onebot"]["http_post"][0]["secret"] == "<hidden>"


def test_import_gensokyo_of_two_configs_of_one_bot_is_refused(tmp_path: Path) -> None:
    again = write(tmp_path, SECOND_GENSOKYO.replace("102000002", "102000001"), "again.yml")
    out = tmp_path / "new.yml"
    result = cli("config", "import-gensokyo", str(GENSOKYO), str(again), "--out", str(out))
    assert result.exit_code == 2 and not out.exists()
    assert result.stderr.startswith("error: bots.1.app_id: bots.0 and bots.1 have the same "
                                    "app_id"), result.stderr
    assert f"converted from {GENSOKYO}, {again}" in result.stderr


def test_import_gensokyo_refuses_bad_input_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "new.yml"
    not_old = write(tmp_path, "bot:\n  app_id: '1'\n", "ours.yml")
    result = cli("config", "import-gensokyo", str(not_old), "--out", str(out))
    assert result.exit_code == 2 and "settings" in result.stderr and not out.exists()
    bad_ws = write(tmp_path, "version: 1\nsettings:\n  app_id: 1\n  ws_address: [http://x]\n",
                   "old.yml")
    result = cli("config", "import-gensokyo", str(bad_ws), "--out", str(out))
    assert result.exit_code == 2 and "onebot.reverse_ws" in result.stderr and not out.exists()
    out.write_text("keep me")
    result = cli("config", "import-gensokyo", str(GENSOKYO), "--out", str(out))
    assert result.exit_code == 2 and "exists already" in result.stderr
    assert out.read_text() == "keep me"
    result = cli("config", "import-gensokyo", str(GENSOKYO), "--out", str(out), "--force")
    assert result.exit_code == 0 and load_config(out, {}).bot.app_id == "102000001"


def test_import_of_an_untouched_template() -> None:
    """The template's own placeholders count as unset: nothing invented, the gaps noted."""
    from gensokyo_idmap.ops.gensokyo_config import convert_gensokyo

    template = {"version": 1, "settings": {
        "ws_address": ["ws://<YOUR_WS_ADDRESS>:<YOUR_WS_PORT>"], "ws_token": ["", "", ""],
        "app_id": 12345, "token": "<YOUR_APP_TOKEN>", "client_secret": "<YOUR_CLIENT_SECRET>",
        "server_dir": "<YOUR_SERVER_DIR>", "port": "15630", "enable_ws_server": True,
        "ws_server_token": "12345", "array": False, "post_url": [""], "post_secret": [""]}}
    result = convert_gensokyo(template)
    assert result.config["bot"] == {"app_id": "12345"}
    assert result.config["onebot"]["reverse_ws"] == []
    assert result.config["onebot"]["http_post"] == []
    assert result.config["onebot"]["access_token"] == "12345"  # ws_server_token
    assert any("fill in bot.secret" in note for note in result.notes)
    assert dict(result.unmapped)["settings.server_dir"].startswith("the daemon has no image "
                                                                   "server")


def test_import_carries_each_token_and_the_switches_as_the_go_daemon_used_them() -> None:
    from gensokyo_idmap.ops.gensokyo_config import convert_gensokyo, masked

    old = {"version": 1, "settings": {
        "ws_address": ["ws://a/ws", "ws://b/ws", "ws://c/ws"],
        "ws_token": ["T-a", "T-b"], "ws_server_token": "", "enable_ws_server": True,
        "port": "15630", "http_address": "0.0.0.0:5700", "http_access_token": "T-a",
        "post_url": ["http://p/", "http://q/"], "post_secret": ["", "S-q"],
        "post_max_retries": [0], "post_retries_interval": [250, 2000], "http_timeout": 3,
        "white_prefix_mode": False, "white_prefixs": ["help"],
        "black_prefix_mode": True, "black_prefixs": ["", " "],
        "text_intent": ["ATMessageEventHandler", "DirectMessageHandler", "ReadyHandler",
                        "MemberEventHandler", "NoSuchHandler", "ATMessageEventHandler"]}}
    result = convert_gensokyo(old)
    onebot = result.config["onebot"]
    assert onebot["access_token"] == "T-a"
    assert onebot["reverse_ws"] == ["ws://a/ws", {"url": "ws://b/ws", "access_token": "T-b"},
                                    {"url": "ws://c/ws", "access_token": ""}]  # had none
    assert onebot["forward_ws_access_token"] == ""  # the Go daemon's forward WS was open
    assert "http_api_access_token" not in onebot  # the same as the default
    assert onebot["http_post"] == [
        {"url": "http://p/", "secret": "", "max_retries": 0, "retry_interval_seconds": 0.25},
        {"url": "http://q/", "secret": "S-q", "retry_interval_seconds": 2.0}]  # timeout < 5
    assert "white_prefixes" not in onebot and "black_prefixes" not in onebot
    assert any("white_prefixs were not carried: settings.white_prefix_mode was off" in note
               for note in result.notes)
    assert result.config["qq"]["intents"] == ["PUBLIC_GUILD_MESSAGES", "DIRECT_MESSAGE",
                                              "GUILD_MEMBERS"]
    assert any("'NoSuchHandler'" in note for note in result.notes)
    config = Config.model_validate(result.config)
    assert config.qq.intents == (1 << 30) | (1 << 12) | (1 << 1)
    assert config.onebot.reverse_ws_targets() == [("ws://a/ws", "T-a"), ("ws://b/ws", "T-b"),
                                                  ("ws://c/ws", "")]
    shown = masked(result.config)["onebot"]
    assert shown["reverse_ws"][1] == {"url": "ws://b/ws", "access_token": "<hidden>"}
    assert shown["reverse_ws"][2] == {"url": "ws://c/ws", "access_token": ""}
    assert shown["http_post"][1]["secret"] == "<hidden>"
    assert "T-b" not in str(masked(result.config)) and "S-q" not in str(masked(result.config))


# --- every old key has a reason; what does the job of lotus and crt/key --------------------

TEMPLATE_KEYS = [line for line in (GENSOKYO.parent / "template_keys.txt").read_text(
    encoding="utf-8").splitlines() if line and not line.startswith("#")]


def test_every_key_of_the_go_template_is_carried_or_has_a_reason_of_its_own() -> None:
    from gensokyo_idmap.ops.gensokyo_config import convert_gensokyo
    from gensokyo_idmap.ops.gensokyo_keys import UNKNOWN_KEY

    assert len(TEMPLATE_KEYS) > 150
    result = convert_gensokyo({"version": 1, "settings": dict.fromkeys(TEMPLATE_KEYS)})
    reasons = dict(result.unmapped)
    assert {key for key, why in reasons.items() if why == UNKNOWN_KEY} == set()
    assert all(why and why != "no equivalent" for why in reasons.values())
    assert len(reasons) > 130  # the few carried over are not listed
    assert "settings.app_id" not in reasons and "settings.shard_id" not in reasons
    # a key the template never had says so; a top-level key too
    result = convert_gensokyo({"version": 1, "settings": {"app_idd": 1}, "extra": 1})
    assert dict(result.unmapped) == {"settings.app_idd": UNKNOWN_KEY,
                                     "extra": "the Go daemon reads only version and settings"}


def test_the_fixture_has_no_key_without_a_reason(tmp_path: Path) -> None:
    result = cli("--json", "config", "import-gensokyo", str(GENSOKYO))
    assert result.exit_code == 0, result.output
    unmapped = json.loads(result.stdout)["unmapped"]
    assert len(unmapped) > 30
    assert [e["key"] for e in unmapped if e["reason"] in ("", "no equivalent")] == []


def test_lotus_points_at_a_shared_postgres_graph_and_crt_at_the_tls_proxy() -> None:
    from gensokyo_idmap.ops.gensokyo_config import convert_gensokyo

    settings = {"app_id": 102000001, "lotus": True, "lotus_password": "sample-lotus-pw",
                "crt": "/etc/ssl/bot.crt", "key": "/etc/ssl/bot.key"}
    result = convert_gensokyo({"version": 1, "settings": settings})
    lotus = next(note for note in result.notes if note.startswith("settings.lotus"))
    for step in ("idmap.backend: postgres", "idmap.postgres_dsn", "store copy --to postgres",
                 "db --config config.yml upgrade", "Several daemons"):
        assert step in lotus, lotus
    tls = next(note for note in result.notes if note.startswith("settings.crt"))
    assert "examples/nginx.conf" in tls and "docs/security.md" in tls
    assert "sample-lotus-pw" not in str(result.notes) + str(result.unmapped)
    quiet = convert_gensokyo({"version": 1, "settings": {"lotus": False, "crt": "", "key": ""}})
    assert not any(note.startswith(("settings.lotus", "settings.crt")) for note in quiet.notes)


def test_shard_and_use_uin_carry_as_the_go_daemon_used_them() -> None:
    from gensokyo_idmap.ops.gensokyo_config import convert_gensokyo

    def convert(**settings: Any) -> dict[str, Any]:
        return convert_gensokyo({"version": 1, "settings": {"app_id": 1, **settings}}).config

    assert convert(shard_id=1, shard_count=2)["qq"]["shard"] == [1, 2]
    assert "shard" not in convert(shard_id=0, shard_count=1)["qq"]
    bad = convert_gensokyo({"version": 1, "settings": {"shard_id": 2, "shard_count": 2}})
    assert "shard" not in bad.config["qq"] and any("shard_id 2" in n for n in bad.notes)
    assert convert(uin=2870338968)["onebot"]["self_id"] == 2870338968
    assert convert(uin=2870338968, use_uin=True)["onebot"]["self_id"] == 2870338968
    assert "self_id" not in convert(uin=2870338968, use_uin=False)["onebot"]  # the AppID
    Config.model_validate(convert(shard_id=1, shard_count=2, use_uin=False))


def test_check_of_a_go_gensokyo_file_says_to_import_it(tmp_path: Path) -> None:
    for command in (["config", "check", str(GENSOKYO)], ["--config", str(GENSOKYO), "stats"]):
        result = cli(*command)
        assert result.exit_code == 2, result.output
        assert "an old Go Gensokyo config.yml" in result.stderr
        assert "gensokyo-idmap config import-gensokyo FILE --out config.yml" in result.stderr
        assert result.stderr.count(str(GENSOKYO)) == 1
        for secret in OLD_SECRETS:
            assert secret not in result.output


def test_the_go_template_app_id_unquoted_passes_check(tmp_path: Path) -> None:
    path = write(tmp_path, "bot:\n  app_id: 12345\n")
    result = cli("--json", "config", "check", str(path))
    assert result.exit_code == 0, result.output
    assert "app_id 12345" in json.loads(result.stdout)["summary"]


# --- an unknown key names the nearest known one --------------------------------------------


@pytest.mark.parametrize(("text", "env", "hint"), [
    ("bot:\n  appid: '1'\n", {}, "did you mean `bot.app_id`? (in "),
    ("idmap:\n  map_sise_mb: 8\n", {}, "did you mean `idmap.map_size_mb`?"),
    ("webhook:\n  token: x\n", {}, "did you mean `api.token`?"),
    ("boot:\n  app_id: '1'\n", {}, "did you mean `bot`?"),
    ("", {"GSK_BOT__APPID": "1"}, "did you mean `GSK_BOT__APP_ID`? (from GSK_BOT__APPID)"),
])
def test_an_unknown_key_suggests_the_nearest_known_one(tmp_path: Path, text: str,
                                                       env: dict[str, str], hint: str) -> None:
    result = cli("config", "check", str(write(tmp_path, text)), env=env)
    assert result.exit_code == 2, result.output
    assert "Extra inputs are not permitted; " + hint in result.stderr, result.stderr


def test_an_unknown_key_far_from_every_known_one_gets_no_guess(tmp_path: Path) -> None:
    result = cli("config", "check", str(write(tmp_path, "idmap:\n  zzzzzz: 1\n")))
    assert result.exit_code == 2 and "did you mean" not in result.stderr, result.stderr


def _known_paths(model: type[BaseModel], where: str = "") -> set[str]:
    """Every key path of ``model`` (an entry of a list at index 0)."""
    paths = set()
    for name, field in model.model_fields.items():
        path = f"{where}{name}"
        paths.add(path)
        annotation = field.annotation
        inner = [annotation, *typing.get_args(annotation)]
        if typing.get_origin(annotation) is list:
            path += ".0"
            inner = [*typing.get_args(annotation)]
        for kind in inner:
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                paths |= _known_paths(kind, f"{path}.")
    return paths


@settings(max_examples=200, deadline=None)
@given(section=st.sampled_from(["bot", "bots", "idmap", "qq", "api", "nope"])
       | st.text(max_size=12),
       key=st.text(max_size=24), entry=st.sampled_from([None, "qq", "onebot", "nope"]))
def test_a_guess_is_always_a_known_key_path(section: str, key: str, entry: str | None) -> None:
    from gensokyo_idmap.config import nearest_key

    known = _known_paths(Config)
    assert nearest_key((section, key)) in known | {None}
    assert nearest_key((section,)) in set(Config.model_fields) | {None}
    in_entry = ("bots", 0, key) if entry is None else ("bots", 0, entry, key)
    assert nearest_key(in_entry) in known | {None}


def test_a_key_of_a_bots_entry_gets_its_guess_within_the_entry(tmp_path: Path) -> None:
    for text, hint in (("bots:\n- app_id: '1'\n  secert: x\n", "bots.0.secret"),
                       ("bots:\n- app_id: '1'\n  qq: {api_bse: 'http://x'}\n",
                        "bots.0.qq.api_base"),
                       ("bots:\n- app_id: '1'\n  onebot: {reverse_wss: []}\n",
                        "bots.0.onebot.reverse_ws")):
        result = cli("config", "check", str(write(tmp_path, text)))
        assert result.exit_code == 2, result.output
        assert f"did you mean `{hint}`?" in result.stderr, result.stderr
