"""``serve`` and ``demo``: the commands that run the daemon."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gensokyo_idmap.cli.context import RootConfigOption
from gensokyo_idmap.config import Config, load_config
from gensokyo_idmap.logging import configure_logging

if TYPE_CHECKING:
    from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore
    from gensokyo_idmap.store.base import IdentityStore

__all__ = ["demo", "serve"]


@click.command()
@click.option("--config", "config_path", cls=RootConfigOption,
              type=click.Path(dir_okay=False, path_type=Path),
              required=True, help="YAML config file (`gensokyo-idmap init` writes one).")
def serve(config_path: Path) -> None:
    """Run the daemon."""
    from gensokyo_idmap.app import run_daemon
    from gensokyo_idmap.executor import DaemonThreadExecutor
    from gensokyo_idmap.memory import (
        OPENING_MMAP_THRESHOLD,
        RUNNING_MMAP_THRESHOLD,
        collect_less_often,
        set_malloc_thresholds,
    )
    from migrate.startup import migrate_if_found

    async def prepare(config: Config, store: IdentityStore, msgids: LmdbMsgIdStore) -> None:
        await migrate_if_found(config, store, msgids)
        # the stores are open: glibc's thresholds for the run (memory.py says why)
        set_malloc_thresholds(RUNNING_MMAP_THRESHOLD, 2 * RUNNING_MMAP_THRESHOLD)

    config: Config = load_config(config_path)
    configure_logging(config.log.level, config.log.format, zone=config.log.time)
    collect_less_often()  # sends in flight hold more than the default lets live
    set_malloc_thresholds(OPENING_MMAP_THRESHOLD)  # LMDB's page lists mapped, not cleared
    with asyncio.Runner() as runner:
        # blocking calls (name lookups, sweeps) on daemon threads: one still waiting at
        # the end must not keep the process alive after [app] stopped
        runner.get_loop().set_default_executor(DaemonThreadExecutor())
        runner.run(run_daemon(config, prepare=prepare))


@click.command()
@click.option("--config", "config_path", cls=RootConfigOption,
              type=click.Path(dir_okay=False, path_type=Path),
              default=None,
              help="YAML config file: its listeners, OneBot and log settings (the bot's "
                   "credentials, platform and stores are the demo's own). Default: the "
                   "example config that `init` writes.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("data-demo"), show_default=True,
              help="The demo's data dir (never the config's, unless given here).")
@click.option("--seed", type=int, default=None,
              help="Seed of the users' script (default: a new one each run, printed).")
@click.option("--pace", type=click.FloatRange(min=0.0), default=2.0, show_default=True,
              help="Mean seconds between two things the users do.")
def demo(config_path: Path | None, data_dir: Path, seed: int | None, pace: float) -> None:
    """Run the daemon fed by an emulated QQ platform: simulated users chat, join and leave;
    a bot connected to it answers them (no QQ credentials needed; docs/demo.md)."""
    import secrets

    from gensokyo_idmap.config_example import example_path
    from gensokyo_idmap.demo.run import DemoOptions, run_demo
    from gensokyo_idmap.executor import DaemonThreadExecutor

    if config_path is None:  # from any directory: the example shipped in the package
        with example_path() as path:
            config: Config = load_config(path)
    else:
        config = load_config(config_path)
    configure_logging(config.log.level, config.log.format, zone=config.log.time)
    options = DemoOptions(data_dir=data_dir, pace=pace,
                          seed=secrets.randbelow(10_000) if seed is None else seed)
    with asyncio.Runner() as runner:
        runner.get_loop().set_default_executor(DaemonThreadExecutor())
        runner.run(run_demo(config, options, click.echo))
