"""The one place where commands end: their output (human, or JSON with ``--json`` before or
after the command's name) and the project's errors (``error: <message>``, exit 2 for bad
input, else 1)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import click

from gensokyo_idmap.cli.context import CliContext
from gensokyo_idmap.errors import IdmapError

__all__ = ["ReportsErrors", "add_json_option", "emit"]


class ReportsErrors(click.Group):
    """The root command, where the project's errors end, once for every command below it:
    ``error: <message>`` on stderr and the error's exit code (2 for bad input, else 1).
    Commands just raise; anything else (a bug) keeps its traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except IdmapError as err:
            click.echo(f"error: {err.message}", err=True)
            sys.exit(err.exit_code)


def emit(ctx: CliContext, data: dict[str, Any], human: Callable[[], str]) -> None:
    """A command's result: ``data`` as one JSON line with ``--json``, else ``human()``."""
    click.echo(json.dumps(data, ensure_ascii=False) if ctx.as_json else human())


# --- --json after the subcommand too ---------------------------------------------------------

#: Commands without JSON output: no ``--json`` of their own.
_NO_JSON_OUTPUT = frozenset({"serve", "demo"})


def _json_after_subcommand(click_ctx: click.Context, _param: click.Parameter,
                           value: bool) -> None:
    if value:
        click_ctx.obj = replace(click_ctx.obj, as_json=True)


def add_json_option(command: click.Command) -> None:
    """Give ``command`` (or every command below it, for a group) a ``--json`` of its own if
    it has JSON output, so that ``gensokyo-idmap verify --json`` works as well as
    ``gensokyo-idmap --json verify`` (the README shows both). Done over the whole tree
    (the root's commands as each is imported: :class:`~.lazy.LazyGroup`'s ``prepare``), so
    a command added later has it too."""
    if isinstance(command, click.Group):
        for below in command.commands.values():
            add_json_option(below)
    elif command.name not in _NO_JSON_OUTPUT:
        command.params.append(click.Option(
            ["--json"], is_flag=True, expose_value=False,
            callback=_json_after_subcommand, help="Machine-readable output."))
