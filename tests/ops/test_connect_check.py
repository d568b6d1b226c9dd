"""config check --connect: the PostgreSQL and Redis a config names are reached, each named
with why it cannot be used, and no password of theirs is ever printed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gensokyo_idmap.cli import main
from gensokyo_idmap.redaction import describe_dsn
from gensokyo_idmap.store.postgres.migrate import known_migrations

from ..conftest import REDIS_URL
from ..store_backends import schema_dsn


def check(config: Path, *extra: str) -> tuple[int, str]:
    result = CliRunner(env={"GSK_IDMAP__POSTGRES_DSN": None, "GSK_IDMAP__REDIS_URL": None}
                       ).invoke(main, ["config", "check", "--connect", *extra, str(config)])
    return result.exit_code, result.stdout


def write(tmp_path: Path, dsn: str, redis_url: str) -> Path:
    path = tmp_path / "config.yml"
    path.write_text(f'bot:\n  app_id: "102000001"\nidmap:\n  backend: postgres\n'
                    f'  postgres_dsn: "{dsn}"\n  runtime_backend: redis\n'
                    f'  redis_url: "{redis_url}"\n', encoding="utf-8")
    return path


def test_both_servers_answer(tmp_path: Path, pg_schema: str) -> None:
    code, out = check(write(tmp_path, schema_dsn(pg_schema), REDIS_URL), "--json")
    assert code == 0, out
    servers = json.loads(out)["servers"]
    assert [(s["server"], s["ok"]) for s in servers] == [("postgresql", True), ("redis", True)]
    pending = len(known_migrations())  # a new schema: the daemon makes it
    assert f"{pending} migration(s) pending" in servers[0]["detail"]
    assert servers[1]["detail"] == "answers PING"


def test_a_server_that_is_down_is_named_with_why_and_no_password(tmp_path: Path) -> None:
    config = write(tmp_path, "postgresql://gsk:s3cret@127.0.0.1:1/none",
                   "redis://:hunter2@127.0.0.1:1/0")
    code, out = check(config)
    assert code == 1
    assert out.startswith(f"error: {config}: ")
    lines = out.splitlines()[1:]
    assert lines[0].startswith("  PostgreSQL at postgresql://***@127.0.0.1:1/none: cannot be "
                               "used: cannot be reached: connection failed")
    assert lines[1].startswith("  Redis at redis://***@127.0.0.1:1/0: cannot be used: ")
    assert "refused" in lines[1]
    code, out = check(config, "--json")
    assert code == 1 and json.loads(out)["ok"] is False
    assert "s3cret" not in out and "hunter2" not in out


def test_an_lmdb_config_reaches_nothing(tmp_path: Path) -> None:
    config = tmp_path / "config.yml"
    config.write_text('bot:\n  app_id: "102000001"\n', encoding="utf-8")
    code, out = check(config, "--json")
    assert code == 0 and json.loads(out)["servers"] == []


def test_without_psycopg_the_server_is_named_as_everywhere_with_no_password(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver missing (``pip install`` without the extra) is said with the server
    named as in every other PostgreSQL message (``describe_dsn``)."""
    monkeypatch.setitem(sys.modules, "gensokyo_idmap.store.postgres.connect", None)  # not importable
    dsn = "postgresql://gsk:s3cret@127.0.0.1:1/none"
    code, out = check(write(tmp_path, dsn, REDIS_URL), "--json")
    assert code == 1, out
    [postgres] = [s for s in json.loads(out)["servers"] if s["server"] == "postgresql"]
    assert (postgres["where"], postgres["ok"]) == (describe_dsn(dsn), False)
    assert postgres["where"] == "postgresql://***@127.0.0.1:1/none"
    assert "psycopg is not installed" in postgres["detail"]
    assert "s3cret" not in out
