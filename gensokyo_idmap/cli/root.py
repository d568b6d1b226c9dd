"""The root command ``gensokyo-idmap``: its options, and every command group under it."""

from __future__ import annotations

from pathlib import Path

import click

from gensokyo_idmap import __version__
from gensokyo_idmap.cli.config import config_group, init_command
from gensokyo_idmap.cli.context import ROOT_CONFIG, CliContext, EnvOption, check_app_id_option
from gensokyo_idmap.cli.daemon import demo, serve
from gensokyo_idmap.cli.identity import identity
from gensokyo_idmap.cli.migration import migrate_command
from gensokyo_idmap.cli.msgid import msgid
from gensokyo_idmap.cli.ops import backup_command, recover_group, stats_command, verify_command
from gensokyo_idmap.cli.output import ReportsErrors, add_json_option
from gensokyo_idmap.cli.store import db_group, store_group
from gensokyo_idmap.config import load_config
from gensokyo_idmap.logging import configure_logging

__all__ = ["main"]


@click.group(cls=ReportsErrors)
@click.version_option(__version__, prog_name="gensokyo-idmap")
@click.option("--data-dir", cls=EnvOption, type=click.Path(file_okay=False, path_type=Path),
              default=Path("data"), show_default=True, envvar="GSK_IDMAP__DATA_DIR",
              help="Directory holding openid-map.db.")
@click.option("--app-id", cls=EnvOption, default=None, envvar="GSK_BOT__APP_ID",
              callback=check_app_id_option,
              help="Serving AppID: bare OpenIDs belong to it (default: the config's bot, or "
                   "the first of its bots).")
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
    if config is not None:
        if click_ctx.get_parameter_source("data_dir") == click.core.ParameterSource.DEFAULT:
            data_dir = config.idmap.data_dir
        app_id = app_id or config.first_bot.app_id or None
    click_ctx.obj = CliContext(data_dir, app_id, as_json, config)
    if click_ctx.invoked_subcommand != "serve":
        configure_logging("warning")


for command in (serve, demo, init_command, identity, msgid, migrate_command, stats_command,
                config_group, backup_command, verify_command, recover_group, db_group,
                store_group):
    main.add_command(command)
add_json_option(main)
