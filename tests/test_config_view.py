"""The configuration as the console shows it: every key, no secret (hypothesis: whatever the
secrets are), and where each value came from."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from gensokyo_idmap.config import Config, load_config
from gensokyo_idmap.config_env import env_overrides
from gensokyo_idmap.config_view import config_keys

#: what a secret may be in the file (a password in a URL: the characters userinfo takes
#: unescaped)
SECRETS = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                  "0123456789-._~"), min_size=8, max_size=30).map(
    lambda text: "zQ9" + text)  # found nowhere else in what is shown


def write(tmp: Path, text: str) -> Path:
    path = tmp / "config.yml"
    path.write_text(text, encoding="utf-8")
    return path


def test_every_key_with_its_source(tmp_path: Path) -> None:
    path = write(tmp_path, 'bot:\n  app_id: "102000001"\n  secret: s3cret-value-1\n'
                           "api:\n  listen: 127.0.0.1:15631\n")
    environ = {"GSK_API__TOKEN": "api-token-value", "GSK_IDMAP__MAP_SIZE_MB": "128"}
    config = load_config(path, environ)
    keys = {path: (value, source) for path, value, source
            in config_keys(config, env_overrides(environ))}
    every = {f"{section}.{key}" if isinstance(field.annotation, type) and issubclass(
                 field.annotation, BaseModel) else section
             for section, field in Config.model_fields.items()
             for key in getattr(field.annotation, "model_fields", [None])}
    assert set(keys) == every
    assert keys["bot.app_id"] == ("102000001", "file")
    assert keys["bot.secret"] == ("***", "file")
    assert keys["api.token"] == ("***", "GSK_API__TOKEN")
    assert keys["idmap.map_size_mb"] == ("128", "GSK_IDMAP__MAP_SIZE_MB")
    assert keys["api.listen"] == ("127.0.0.1:15631", "file")
    assert keys["webhook.listen"][1] == "default"


@settings(max_examples=30, deadline=None)
@given(secret=SECRETS, token=SECRETS, password=SECRETS)
def test_no_secret_is_shown(tmp_path_factory, secret: str, token: str,  # type: ignore[no-untyped-def]
                            password: str) -> None:
    tmp = tmp_path_factory.mktemp("config")
    path = write(tmp, f'bot:\n  app_id: "1"\n  secret: "{secret}"\n'
                      f"onebot:\n  reverse_ws:\n    - url: ws://u:{password}@h:1/ws\n"
                      f'      access_token: "{token}"\n'
                      f"    - ws://h:2/ws?access_token={token}\n"
                      f"idmap:\n  backend: postgres\n"
                      f"  postgres_dsn: postgresql://gsk:{password}@127.0.0.1/gsk\n")
    environ = {"GSK_ONEBOT__ACCESS_TOKEN": token}
    shown = " ".join(f"{p} {v} {s}" for p, v, s in
                     config_keys(load_config(path, environ), env_overrides(environ)))
    for hidden in (secret, token, password):
        assert hidden not in shown
    assert "ws://***@h:1/ws" in shown and "access_token=***" in shown


def test_the_secrets_of_each_bot_are_hidden(tmp_path: Path) -> None:
    path = write(tmp_path, 'bots:\n  - app_id: "102000001"\n    secret: first-secret-zQ9\n'
                           '  - app_id: "102000002"\n    secret: second-secret-zQ9\n'
                           "    onebot:\n      reverse_ws: [\"ws://h:1/ws?access_token=tok-zQ9\"]\n")
    keys = {path: (value, source) for path, value, source
            in config_keys(load_config(path, {}), [])}
    value, source = keys["bots"]
    assert "102000002" in value and source == "file"
    assert "zQ9" not in value and value.count("***") >= 3
