"""idmap.backend and idmap.postgres_dsn: validated when the file is read, the password never
shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gensokyo_idmap.cli import main
from gensokyo_idmap.config import load_config
from gensokyo_idmap.errors import BadInputError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_default_backend_is_lmdb(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "idmap: {}\n"), environ={})
    assert (config.idmap.backend, config.idmap.postgres_dsn) == ("lmdb", "")


def test_postgres_backend_with_its_dsn(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "idmap:\n  backend: postgres\n  postgres_dsn: "
                                         "postgresql://127.0.0.1:5432/gsk\n"), environ={})
    assert config.idmap.backend == "postgres"


def test_postgres_backend_needs_a_dsn(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="idmap.backend postgres needs idmap.postgres_dsn"):
        load_config(write(tmp_path, "idmap:\n  backend: postgres\n"), environ={})


def test_an_unknown_backend_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BadInputError) as err:
        load_config(write(tmp_path, "idmap:\n  backend: sqlite\n"), environ={})
    assert err.value.field == "idmap.backend"


def test_a_dsn_of_another_scheme_is_refused_without_its_password(tmp_path: Path) -> None:
    path = write(tmp_path, "idmap:\n  postgres_dsn: mysql://gsk:s3cretpw@db/x\n")
    with pytest.raises(BadInputError, match="must be a postgresql:// URL") as err:
        load_config(path, environ={})
    assert "s3cretpw" not in err.value.message


def test_the_dsn_from_the_environment(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "idmap:\n  backend: postgres\n"), environ={
        "GSK_IDMAP__POSTGRES_DSN": "postgresql://gsk:pw@127.0.0.1/gsk"})
    assert config.idmap.postgres_dsn == "postgresql://gsk:pw@127.0.0.1/gsk"


def test_config_check_refuses_postgres_without_a_dsn(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["config", "check",
                                       str(write(tmp_path, "idmap:\n  backend: postgres\n"))])
    assert result.exit_code == 2
    assert "idmap.postgres_dsn" in result.output
