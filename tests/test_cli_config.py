"""The global --config of the CLI: its data dir, AppID and identity backend, so `identity …`
reaches the graph the daemon uses (PostgreSQL too) and the commands that work on
openid-map.db alone refuse a PostgreSQL graph instead of reading a file nobody uses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from gensokyo_idmap.cli import main
from gensokyo_idmap.store.postgres.identity import PgIdentityStore
from gensokyo_idmap.store.postgres.migrate import known_migrations

from .store_backends import PG_DSN, fresh_schema

APP_ID = "102000001"


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema(create=True) as name:
        yield name


def write_config(tmp_path: Path, idmap: str) -> Path:
    path = tmp_path / "config.yml"
    path.write_text(f'bot:\n  app_id: "{APP_ID}"\nidmap:\n{idmap}', encoding="utf-8")
    return path


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner(env={"GSK_IDMAP__DATA_DIR": None, "GSK_BOT__APP_ID": None,
                            "GSK_IDMAP__POSTGRES_DSN": None}).invoke(main, list(args))
    return result.exit_code, result.output


def test_the_config_gives_the_data_dir_and_the_app_id(tmp_path: Path) -> None:
    data = tmp_path / "elsewhere"
    config = write_config(tmp_path, f"  data_dir: {data}\n")
    code, out = cli("--config", str(config), "--json", "identity", "resolve", "A11CE")
    assert code == 0, out
    assert json.loads(out)["vuin"] == 1
    assert (data / "openid-map.db").is_file()
    code, out = cli("--config", str(config), "identity", "lookup", f"openid:QQ:{APP_ID}:A11CE")
    assert (code, out.strip()) == (0, "1")


def test_identity_commands_reach_the_postgres_graph(tmp_path: Path, schema: str) -> None:
    dsn = f"{PG_DSN}?options=-csearch_path%3D{schema}"
    config = write_config(tmp_path, f"  data_dir: {tmp_path / 'data'}\n  backend: postgres\n"
                                    f"  postgres_dsn: {dsn}\n")
    base = ["--config", str(config)]
    code, out = cli(*base, "identity", "resolve", "A11CE", "--scene", f"QQ:{APP_ID}:c2c")
    assert (code, out.strip()) == (0, "1 (new)"), out
    code, out = cli(*base, "identity", "bind", "raw:alice-legacy", "1")
    assert code == 0, out
    code, out = cli(*base, "--json", "identity", "show", "1")
    assert code == 0, out
    assert json.loads(out)["identities"] == ["openid:QQ:102000001:A11CE", "raw:alice-legacy"]
    with PgIdentityStore(PG_DSN, schema=schema, readonly=True) as store, store.read() as view:
        assert dict(view.iter_identities()) == {"openid:QQ:102000001:A11CE": 1,
                                                "raw:alice-legacy": 1}
    assert not (tmp_path / "data" / "openid-map.db").exists()
    code, out = cli(*base, "db", "status")  # the DSN of the global --config
    assert code == 0 and f"schema at version {known_migrations()[-1].version:04d}" in out, out


@pytest.mark.parametrize("command", [["recover", "identities", "--from-legacy"],
                                     ["recover", "identities"],
                                     ["--json", "recover", "identities", "--from-legacy", "x"]])
def test_recover_identities_refuses_a_postgres_graph_and_names_what_to_run(
        tmp_path: Path, command: list[str]) -> None:
    """Refused before anything is opened (the server here does not exist), exit 2, and
    the message names the commands that do the job on PostgreSQL."""
    config = write_config(tmp_path, f"  data_dir: {tmp_path / 'data'}\n  backend: postgres\n"
                                    "  postgres_dsn: postgresql://127.0.0.1:1/none\n")
    code, out = cli("--config", str(config), *command)
    assert code == 2, out
    assert "works on openid-map.db (idmap.backend lmdb) only" in out
    for way in ("pg_dump", "store copy --to postgres --from FILE", "migrate --legacy PATH",
                "`verify`"):
        assert way in out, out
    assert not (tmp_path / "data").exists()  # nothing written


def test_stats_counts_the_postgres_graph(tmp_path: Path, schema: str) -> None:
    dsn = f"{PG_DSN}?options=-csearch_path%3D{schema}"
    config = write_config(tmp_path, f"  data_dir: {tmp_path / 'data'}\n  backend: postgres\n"
                                    f"  postgres_dsn: {dsn}\n")
    assert cli("--config", str(config), "identity", "resolve", "A11CE")[0] == 0
    code, out = cli("--config", str(config), "--json", "stats")
    assert code == 0, out
    graph = json.loads(out)["openid_map"]
    newest = known_migrations()[-1].version
    assert (graph["path"], graph["bytes"], graph["schema_version"]) == (dsn, None, newest)
    assert (graph["identities"], graph["vuin_counter"]) == (1, 1)
    code, out = cli("--config", str(config), "stats")
    assert out.startswith(f"identity graph PostgreSQL at {dsn}, schema {newest:04d}, "
                          "vuin_counter 1")
    assert not (tmp_path / "data" / "openid-map.db").exists()


@pytest.mark.parametrize("command", [["msgid", "store", "R1"], ["msgid", "sweep"],
                                     ["recover", "msgid"]])
def test_msgid_commands_refuse_a_runtime_in_redis(tmp_path: Path, command: list[str]) -> None:
    config = write_config(tmp_path, f"  data_dir: {tmp_path}\n  runtime_backend: redis\n"
                                    "  redis_url: redis://127.0.0.1:6379/0\n")
    code, out = cli("--config", str(config), *command)
    assert code == 2, out
    assert "works on msgid-map.db (idmap.runtime_backend lmdb) only" in out
