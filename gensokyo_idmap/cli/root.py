"""The root command ``gensokyo-idmap``: its options, and every command group under it.

``serve`` and ``demo`` (:mod:`.daemon`) are the root's own; every other command is named in
:data:`ON_FIRST_USE` and imported when a command line names it (or the help lists them):
a daemon does not hold the other commands' code for its life (:mod:`.lazy`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import click

from gensokyo_idmap import __version__
from gensokyo_idmap.bots import resolve_bots
from gensokyo_idmap.cli.context import ROOT_CONFIG, CliContext, EnvOption, check_app_id_option
from gensokyo_idmap.cli.daemon import demo, serve
from gensokyo_idmap.cli.lazy import LazyGroup
from gensokyo_idmap.cli.output import ReportsErrors, add_json_option
from gensokyo_idmap.config import Config, load_config
from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.identity import served_app_id
from gensokyo_idmap.logging import configure_logging

__all__ = ["ON_FIRST_USE", "main"]

#: The commands imported at their first use: name → ``module:attribute``.
ON_FIRST_USE: Final = {
    "init": "gensokyo_idmap.cli.config:init_command",
    "config": "gensokyo_idmap.cli.config:config_group",
    "identity": "gensokyo_idmap.cli.identity:identity",
    "msgid": "gensokyo_idmap.cli.msgid:msgid",
    "migrate": "gensokyo_idmap.cli.migration:migrate_command",
    "stats": "gensokyo_idmap.cli.ops:stats_command",
    "backup": "gensokyo_idmap.cli.ops:backup_command",
    "verify": "gensokyo_idmap.cli.ops:verify_command",
    "recover": "gensokyo_idmap.cli.ops:recover_group",
    "db": "gensokyo_idmap.cli.store:db_group",
    "store": "gensokyo_idmap.cli.store:store_group",
}


class RootGroup(ReportsErrors, LazyGroup):
    """The root: it reports the project's errors (:class:`~.output.ReportsErrors`), and
    imports its commands at their first use (:class:`~.lazy.LazyGroup`), each given its
    ``--json`` then."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, lazy=ON_FIRST_USE, prepare=add_json_option, **kwargs)


@click.group(cls=RootGroup)
@click.version_option(__version__, prog_name="gensokyo-idmap")
@click.option("--data-dir", cls=EnvOption, type=click.Path(file_okay=False, path_type=Path),
              default=Path("data"), show_default=True, envvar="GSK_IDMAP__DATA_DIR",
              help="Directory holding openid-map.db.")
@click.option("--app-id", cls=EnvOption, default=None, envvar="GSK_BOT__APP_ID",
              callback=check_app_id_option,
              help="Serving AppID: bare OpenIDs belong to it, and stats shows it alone "
                   "(default: the config's bot, or the first of its bots; with --config, "
                   "one of its bots).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--config", ROOT_CONFIG, type=click.Path(dir_okay=False, path_type=Path),
              default=None,  # serve and demo take it too, when not given their own
              help="YAML config file (with GSK_* overrides): its data dir, AppID and identity "
                   "backend, unless --data-dir / --app-id say otherwise.")
@click.pass_context
def main(click_ctx: click.Context, data_dir: Path, app_id: str | None, as_json: bool,
         config_path: Path | None) -> None:
    """gensokyo-idmap: QQ bot platform ↔ OneBot v11 identity bridge."""
    config = None if config_path is None else load_config(config_path)
    given = app_id is not None
    if config is not None:
        if click_ctx.get_parameter_source("data_dir") == click.core.ParameterSource.DEFAULT:
            data_dir = config.idmap.data_dir
        app_id = _served(click_ctx, app_id, config)
    click_ctx.obj = CliContext(data_dir, app_id, as_json, config, app_id_given=given)
    if click_ctx.invoked_subcommand != "serve":
        configure_logging("warning")


def _served(click_ctx: click.Context, app_id: str | None, config: Config) -> str | None:
    """``--app-id`` when it names a bot of ``config``, else the first bot's AppID (none
    given); one naming no bot of it is refused naming its AppIDs (as ``?app_id=`` is)."""
    served = [bot.app_id for bot in resolve_bots(config) if bot.app_id]
    try:
        return served_app_id(app_id, served, "--app-id")
    except BadInputError as err:
        param = next(p for p in click_ctx.command.params if p.name == "app_id")
        raise click.BadParameter(f"{err.reason} (got {app_id!r})", click_ctx,
                                 param) from None


for command in (serve, demo):
    main.add_command(command)
add_json_option(main)
