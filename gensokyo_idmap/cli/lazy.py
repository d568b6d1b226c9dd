"""A command group whose commands are imported at their first use (issue 36.2).

``gensokyo-idmap serve`` runs for months; the other commands (the stores' tools, the
config's, the migration's) run once and exit. Imported with the root command, their
modules, and what only they import, stayed in every daemon's memory. Here each of them is
named by ``module:attribute`` and imported when the command line names it, or when the
group lists its commands (``--help``, shell completion): the help lists every command with
its own short help, as before, from the command itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import click

__all__ = ["LazyGroup"]


class LazyGroup(click.Group):
    """A :class:`click.Group` with commands added as they are (``commands``) and commands
    named by where they are (``lazy``: command name → ``"module:attribute"``), imported at
    their first :meth:`get_command`; ``prepare`` is run on each one so imported (what
    the group does to every command of its own, once it is there)."""

    def __init__(self, *args: object, lazy: Mapping[str, str] | None = None,
                 prepare: Callable[[click.Command], None] | None = None,
                 **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy = dict(lazy or {})
        self.prepare = prepare

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            self.add_command(self._load(cmd_name))
        return super().get_command(ctx, cmd_name)

    def _load(self, name: str) -> click.Command:
        module, _, attribute = self.lazy[name].partition(":")
        # __import__, not importlib.import_module: -X importtime (the tests' and the
        # benchmark's view of what a process imported) shows only the former's imports
        command = getattr(__import__(module, fromlist=[attribute]), attribute)
        if not isinstance(command, click.Command) or command.name != name:
            raise TypeError(f"{self.lazy[name]} is not the command {name!r}")
        if self.prepare is not None:
            self.prepare(command)
        return command
