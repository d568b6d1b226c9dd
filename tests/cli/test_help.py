"""Every command's ``--help`` text, byte for byte as in ``help_texts.json``: a change of
the CLI's code (the move of cli.py into a package, issue 31.4) leaves what users read alone.
A deliberate change of a text rewrites the file: ``python tests/cli/test_help.py --write``,
and the diff shows in review what users will read."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from click.testing import CliRunner

from gensokyo_idmap.cli import main

SNAPSHOT = Path(__file__).with_name("help_texts.json")
#: click wraps help at the terminal's width: one fixed width, whatever runs the test
WIDTH = 80


def _paths(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command below ``group``, as the help lists them (the root's imported at their
    first use: ``list_commands`` and ``get_command``, not ``commands``)."""
    found = [path]
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            found += _paths(command, (*path, name))
        else:
            found.append((*path, name))
    return found


def help_texts() -> dict[str, str]:
    runner = CliRunner(env={"GSK_IDMAP__DATA_DIR": None, "GSK_BOT__APP_ID": None,
                            "GSK_IDMAP__MSGID_TTL_SECONDS": None,
                            "GSK_IDMAP__POSTGRES_DSN": None})
    texts = {}
    for path in _paths(main):
        result = runner.invoke(main, [*path, "--help"], prog_name="gensokyo-idmap",
                               terminal_width=WIDTH, catch_exceptions=False)
        assert result.exit_code == 0, (path, result.output)
        texts[" ".join(path)] = result.stdout
    return texts


def test_every_help_text_is_unchanged() -> None:
    expected = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    actual = help_texts()
    assert sorted(actual) == sorted(expected)  # the same commands
    for command, text in expected.items():
        assert actual[command] == text, f"`gensokyo-idmap {command} --help` changed"


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    SNAPSHOT.write_text(json.dumps(help_texts(), ensure_ascii=False, indent=1) + "\n",
                        encoding="utf-8")
