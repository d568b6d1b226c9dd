"""What the CLI prints: an error about a value from a ``GSK_*`` variable names the variable
(not a flag the user never typed), a path is printed once, and ``--json`` is on every
command the README says it is on."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from gensokyo_idmap.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"


def cli(*args: str, env: dict[str, str] | None = None) -> Result:
    clean: dict[str, str | None] = {k: None for k in os.environ if k.startswith("GSK_")}
    return CliRunner(env={**clean, **(env or {})}).invoke(main, list(args))


@pytest.fixture
def a_file(tmp_path: Path) -> str:
    (tmp_path / "afile").write_text("x")
    return str(tmp_path / "afile")


# --- values from the environment ------------------------------------------------------------


@pytest.mark.parametrize(("var", "value", "flag", "args", "reason"), [
    ("GSK_BOT__APP_ID", "abc", "--app-id", ["identity", "resolve", "X"],
     "AppID must be 1 to 20 digits (0-9) (got 'abc')"),
    ("GSK_IDMAP__MSGID_TTL_SECONDS", "-1", "--ttl-seconds", ["msgid", "sweep"],
     "must be positive (got -1)"),
    ("GSK_IDMAP__MSGID_TTL_SECONDS", "soon", "--ttl-seconds", ["msgid", "sweep"],
     "'soon' is not a valid float"),
    ("GSK_IDMAP__POSTGRES_DSN", "mysql://h/db", "--postgres-dsn", ["db", "status"],
     "must be a postgresql:// URL"),
])
def test_a_bad_value_from_the_environment_names_the_variable(
        tmp_path: Path, var: str, value: str, flag: str, args: list[str], reason: str) -> None:
    result = cli("--data-dir", str(tmp_path), *args, env={var: value})
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{var}' (environment variable): {reason}" in result.output
    assert flag not in result.output.split("Error:")[1]
    # given as the flag, the flag is named
    flagged = ([f"{flag}={value}", *args] if flag == "--app-id" else  # the root's option
               [args[0], f"{flag}={value}", *args[1:]])  # the group's
    result = cli("--data-dir", str(tmp_path), *flagged)
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{flag}': {reason}" in result.output
    assert var not in result.output


def test_a_data_dir_from_the_environment_that_is_a_file(a_file: str) -> None:
    result = cli("stats", env={"GSK_IDMAP__DATA_DIR": a_file})
    assert result.exit_code == 2
    assert "Invalid value for 'GSK_IDMAP__DATA_DIR' (environment variable)" in result.output
    assert "--data-dir" not in result.output.split("Error:")[1]


# --- a path once ------------------------------------------------------------------------------


def test_backup_names_its_file_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert cli("--data-dir", str(data), "--app-id", "1", "identity", "resolve", "A11CE"
               ).exit_code == 0
    dest = tmp_path / "b.db"
    result = cli("--data-dir", str(data), "backup", str(dest))
    assert result.exit_code == 0, result.output
    assert result.output.count(str(dest)) == 1, result.output
    assert result.output.strip().endswith("verified: 1 identities, 1 vuins, 0 aliases, "
                                          "0 last_seen")


@pytest.mark.parametrize("command", [["recover", "msgid"], ["recover", "outbox"]])
def test_recover_names_each_file_once(tmp_path: Path, command: list[str]) -> None:
    """The result line says what was done; the log line saying the same is not printed."""
    result = cli("--data-dir", str(tmp_path), *command)
    assert result.exit_code == 0, result.output
    name = "msgid-map.db" if command[1] == "msgid" else "outbox.db"
    assert result.output.count(str(tmp_path / name)) == 1, result.output


# --- --json where the README says ---------------------------------------------------------------


def _leaves(command: click.Command, path: tuple[str, ...] = ()) -> dict[str, click.Command]:
    if isinstance(command, click.Group):
        found: dict[str, click.Command] = {}
        for name, sub in command.commands.items():
            found.update(_leaves(sub, (*path, name)))
        return found
    return {" ".join(path): command}


def test_json_is_on_every_command_but_those_the_readme_names() -> None:
    without = {name for name, command in _leaves(main).items()
               if not any("--json" in param.opts for param in command.params)}
    assert without == {"serve", "demo"}
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert ("`--json` (machine-readable output) goes before the command or after it, on "
            "every command but `serve` and `demo`") in text


@pytest.mark.parametrize("where", ["before", "after"])
def test_json_before_or_after_the_command_prints_json(tmp_path: Path, where: str) -> None:
    data = str(tmp_path / "data")
    assert cli("--data-dir", data, "--app-id", "1", "identity", "resolve", "A11CE"
               ).exit_code == 0
    for command in (["recover", "msgid"], ["stats"], ["msgid", "stats"], ["verify"]):
        args = (["--json", *command] if where == "before" else [*command, "--json"])
        result = cli("--data-dir", data, *args)
        assert result.exit_code == 0, (command, result.output)
        json.loads(result.stdout)
