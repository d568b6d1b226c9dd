"""Operations on the stores: ``stats``, ``backup``, ``verify`` and ``recover``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Final

import click

from gensokyo_idmap.bots import BotSettings, orphaned_outboxes, resolve_bots
from gensokyo_idmap.cli.context import CliContext, open_graph, open_msgids
from gensokyo_idmap.cli.output import emit
from gensokyo_idmap.config import Config
from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.reports import bots_data, stats_data
from gensokyo_idmap.runtime.msgid import DEFAULT_MSGID_TTL_SECONDS

__all__ = ["RECOVER_ON_POSTGRES", "backup_command", "recover_group", "stats_command",
           "verify_command"]


def _owed(ctx: CliContext) -> dict[str, int]:
    from gensokyo_idmap.ops.lmdb_files import owed_per_sink

    return owed_per_sink(ctx.files.outbox_db)


@click.command("stats")
@click.pass_obj
def stats_command(ctx: CliContext) -> None:
    """Counts per table, file sizes, schema versions and the migration marker (of the
    PostgreSQL graph with idmap.backend postgres in --config)."""
    identity: Path | str = ctx.files.identity_db
    msgid_path = ctx.files.msgid_db
    if ctx.on_postgres:
        from gensokyo_idmap.identity_backend import identity_store_location

        assert ctx.config is not None
        identity = identity_store_location(ctx.config)
    with open_graph(ctx, readonly=True) as graph, ExitStack() as stack:
        msgids = (stack.enter_context(open_msgids(ctx, DEFAULT_MSGID_TTL_SECONDS, readonly=True))
                  if msgid_path.is_file() else None)  # disposable: made by the daemon
        data = stats_data(graph, identity, msgids, msgid_path)
        bots = [] if ctx.config is None else resolve_bots(ctx.config)
        graph_bots = bots_data(graph, [(bot.app_id, bot.self_id) for bot in bots
                                       if bot.app_id])
    if ctx.on_postgres:
        assert ctx.config is not None
        data["openid_map"]["schema_version"] = _postgres_schema_version(ctx.config)
    owed = _owed(ctx)
    data["outbox"] = {"path": str(ctx.files.outbox_db), "owed": owed}
    if ctx.config is not None:  # owed under a name no connection of the config has
        data["outbox"]["orphaned"] = orphaned_outboxes(owed, bots)
    data["bots"] = _bots(ctx, bots, graph_bots, owed)
    marker = data["openid_map"]["migrated_from_legacy"]

    def human() -> str:
        o, m = data["openid_map"], data["msgid_map"]
        lines = [f"openid-map.db  {o['bytes']} bytes, schema {o['schema_version']}, "
                 f"vuin_counter {o['vuin_counter']}" if o["bytes"] is not None else
                 f"identity graph PostgreSQL at {o['path']}, schema {o['schema_version']:04d}, "
                 f"vuin_counter {o['vuin_counter']}"]
        lines += [f"  {name:<12} {o[name]}" for name in
                  ("identities", "vuins", "last_seen", "aliases", "config", "user_info")]
        lines.append("  migrated     " + ("no" if marker is None else
                                          f"yes, from {marker.get('legacy_path')}"))
        lines.append(f"msgid-map.db   {m['bytes']} bytes ({m['bytes_on_disk']} on disk), "
                     f"{m['entries']} entries, counter {m['counter']}" if m["exists"] else
                     "msgid-map.db   none yet (the daemon creates it)")
        lines.append("outbox.db      " + (", ".join(f"{n} owed to {sink}"
                                                    for sink, n in sorted(owed.items()))
                                          or "nothing owed"))
        lines += [f"  {n} owed to {sink}: no connection of the config has that name"
                  for sink, n in sorted(data["outbox"].get("orphaned", {}).items())]
        lines += _bot_lines(data["bots"])
        return "\n".join(lines)

    emit(ctx, data, human)


def _bots(ctx: CliContext, served: Sequence[BotSettings], bots: dict[str, Any],
          owed: dict[str, int]) -> dict[str, Any]:
    """``bots_data`` with, for each bot ``served`` (of ``--config``), the events its
    framework connections are owed in outbox.db. Only ``--app-id``'s bot when one was
    given."""
    if served:
        settings = {bot.app_id: bot for bot in served if bot.app_id}
        for app_id, figures in bots.items():
            bot = settings.get(app_id)
            if bot is not None:
                figures["owed"] = sum(owed.get(name, 0) for name in bot.outbox_names)
    if ctx.app_id_given and ctx.app_id is not None:
        return {ctx.app_id: bots.get(ctx.app_id, {"served": False, "self_id": None,
                                                  "openids": 0})}
    return bots


def _bot_lines(bots: dict[str, Any]) -> list[str]:
    lines = ["bots" if bots else "bots           no OpenID of any AppID yet"]
    for app_id, figures in bots.items():
        who = (f"self_id {figures['self_id']}" if figures["served"]
               else "not a bot of the config")
        owed = f", {figures['owed']} events owed" if "owed" in figures else ""
        lines.append(f"  {app_id:<12} {who}: {figures['openids']} OpenIDs{owed}")
    return lines


def _postgres_schema_version(config: Config) -> int:
    """The migration the PostgreSQL graph is at (``stats``; ``db status`` lists them)."""
    from gensokyo_idmap.store.postgres.connect import connect
    from gensokyo_idmap.store.postgres.migrate import migration_status

    with connect(config.idmap.postgres_dsn) as conn:
        return migration_status(conn).current


@click.command("backup")
@click.argument("dest", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Replace an existing DEST.")
@click.pass_obj
def backup_command(ctx: CliContext, dest: Path, force: bool) -> None:
    """Copy openid-map.db to DEST: consistent and compacted, while the daemon runs (a
    PostgreSQL graph: its snapshot written as an openid-map.db file)."""
    from gensokyo_idmap.ops.lmdb_files import backup_store
    from gensokyo_idmap.ops.store_copy import backup_postgres

    if ctx.on_postgres:  # the graph's snapshot as an openid-map.db file (docs/stores.md)
        assert ctx.config is not None
        result = backup_postgres(ctx.config.idmap.postgres_dsn, dest, force=force)
    else:
        result = backup_store(ctx.files.identity_db, dest, force=force)
    def human() -> str:
        if not result.written:
            return "\n".join([f"no backup written: the copy of {result.source} fails verify "
                              f"({result.dest} untouched)", *result.verify.lines()])
        counts = ", ".join(f"{n} {kind}" for kind, n in result.verify.counts.items())
        return (f"backup {result.dest}: {result.bytes} bytes"
                + (f" (store {result.source_bytes})" if result.source_bytes else
                   f" (from {result.source})") + f", verified: {counts}")

    emit(ctx, result.to_json(), human)
    if not result.written:
        sys.exit(1)


@click.command("verify")
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.pass_obj
def verify_command(ctx: CliContext, file: Path | None) -> None:
    """Check every invariant of the identity graph (openid-map.db, the PostgreSQL graph of
    --config, or FILE, e.g. a backup); exit 1 on a violation."""
    from gensokyo_idmap.ops.lmdb_files import verify_store
    from gensokyo_idmap.ops.store_copy import verify_postgres

    if file is None and ctx.on_postgres:
        assert ctx.config is not None
        report = verify_postgres(ctx.config.idmap.postgres_dsn)
    else:
        report = verify_store(file or ctx.files.identity_db)
    emit(ctx, report.to_json(), lambda: "\n".join(report.lines()))
    if not report.ok:
        sys.exit(1)


@click.group("recover")
def recover_group() -> None:
    """Recover a damaged store (stop the daemon first; see docs/stores.md)."""


@recover_group.command("msgid")
@click.pass_obj
def recover_msgid(ctx: CliContext) -> None:
    """Reset msgid-map.db: the old file is moved aside, an empty one takes its place."""
    from gensokyo_idmap.ops.recover import reset_msgids

    ctx.lmdb_runtime_only("recover msgid")
    result = reset_msgids(ctx.data_dir)
    emit(ctx, result.to_json(), lambda: (
        f"msgid-map.db reset: {result.path} is empty (counter {result.counter} kept)"
        + (f"; the old file is {result.moved_to}" if result.moved_to else "")))


@recover_group.command("outbox")
@click.pass_obj
def recover_outbox(ctx: CliContext) -> None:
    """Start an empty outbox.db in place of a refused one (the events it owed are lost)."""
    from gensokyo_idmap.ops.recover import reset_outbox

    result = reset_outbox(ctx.data_dir)
    emit(ctx, result.to_json(), lambda: (
        (f"{result.reason}: an empty outbox.db started in its place"  # the reason names it
         if result.path in result.reason else
         f"outbox.db started empty: {result.path} (was: {result.reason})")
        + (f"; the old file is {result.moved_to}" if result.moved_to else "")))


#: Why ``recover identities`` refuses a PostgreSQL graph, and what to run instead. The
#: database is the source of truth and has its own recovery; a graph shared by running
#: daemons on several machines is not rebuilt in place under them (no process can tell
#: that they all stopped, as the LMDB file's lock tells on one machine). What LMDB's
#: recovery does (a fresh graph from a known source) exists for PostgreSQL as commands
#: into an empty schema, each all or nothing, with its report.
RECOVER_ON_POSTGRES: Final = (
    "a PostgreSQL graph is not rebuilt in place. Restore it with PostgreSQL's own tools "
    "(pg_dump / pg_restore, a base backup), or, into an empty schema or database: "
    "`store copy --to postgres --from FILE` (a file `backup` wrote), or `migrate --legacy "
    "PATH` (the old idmap.db); then `verify` (docs/stores.md, Recovery)")


@recover_group.command("identities")
@click.option("--from-legacy", "legacy", is_flag=False, flag_value="", default=None,
              metavar="[PATH]", help="The old idmap.db (default: <data-dir>/idmap.db).")
@click.pass_obj
def recover_identities_command(ctx: CliContext, legacy: str | None) -> None:
    """Re-migrate openid-map.db from the old idmap.db (the current file is moved aside)."""
    from gensokyo_idmap.ops.recover import recover_identities
    from migrate.legacy import migrate_legacy

    ctx.lmdb_only("recover identities", RECOVER_ON_POSTGRES)
    if legacy is None:
        raise BadInputError("--from-legacy", None,
                            "the old idmap.db is the only source to recover from")
    result = recover_identities(ctx.data_dir, Path(legacy) if legacy else
                                ctx.files.legacy_db, ctx.app_id, migrate_legacy)
    emit(ctx, result.to_json(), lambda: "\n".join(
        [f"openid-map.db re-migrated from {result.report.legacy_path}"
         + (f"; the previous file is {result.moved_to}" if result.moved_to else ""),
         *result.report.summary_lines()]))
