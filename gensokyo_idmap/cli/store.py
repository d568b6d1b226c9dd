"""``db`` (the PostgreSQL schema of the graph) and ``store`` (the graph moved between
backends)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import click

from gensokyo_idmap.cli.context import CliContext, EnvOption, existing
from gensokyo_idmap.cli.output import emit
from gensokyo_idmap.config import Config, load_config
from gensokyo_idmap.data_dir import IDENTITY_DB
from gensokyo_idmap.errors import BadInputError, NotFoundError

__all__ = ["db_group", "store_group"]


# --- db: the PostgreSQL schema of the identity graph ----------------------------------------


@dataclass(frozen=True, slots=True)
class _Database:
    """What ``db`` was given; the DSN is found when a command needs it (not for --help)."""

    postgres_dsn: str | None
    config_path: Path | None
    schema: str | None

    def dsn(self, global_config: Config | None) -> str:
        """--postgres-dsn, else the DSN of db's --config, else of the global --config."""
        config = load_config(self.config_path) if self.config_path else global_config
        dsn = self.postgres_dsn or (config.idmap.postgres_dsn if config else "")
        if not dsn:
            raise BadInputError("postgres_dsn", "", "give --postgres-dsn, or --config with "
                                "idmap.postgres_dsn set")
        return dsn


def _postgres_url(_ctx: click.Context, _param: click.Parameter, value: str | None
                  ) -> str | None:
    """Checked where it is read, so a bad one is named by where it came from (the flag,
    or ``GSK_IDMAP__POSTGRES_DSN``)."""
    if value and not value.startswith(("postgresql://", "postgres://")):
        raise click.BadParameter("must be a postgresql:// URL")
    return value


@click.group("db")
@click.option("--postgres-dsn", cls=EnvOption, default=None, envvar="GSK_IDMAP__POSTGRES_DSN",
              callback=_postgres_url,
              help="PostgreSQL URL of the identity graph (default: the --config file's "
                   "idmap.postgres_dsn).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="YAML config file whose idmap.postgres_dsn to use.")
@click.option("--schema", default=None,
              help="PostgreSQL schema holding the graph (default: the server's search_path).")
@click.pass_context
def db_group(click_ctx: click.Context, postgres_dsn: str | None, config_path: Path | None,
             schema: str | None) -> None:
    """Upgrade or show the schema of a PostgreSQL identity graph (idmap.backend: postgres)."""
    from gensokyo_idmap.store.postgres.connect import check_schema_name

    click_ctx.meta["gsk.database"] = _Database(
        postgres_dsn, config_path, None if schema is None else check_schema_name(schema))


def _database(click_ctx: click.Context) -> _Database:
    found: _Database = click_ctx.meta["gsk.database"]
    return found


@db_group.command("upgrade")
@click.pass_context
def db_upgrade(click_ctx: click.Context) -> None:
    """Apply the migrations the database has not run yet (each once, in one transaction)."""
    from gensokyo_idmap.store.postgres.connect import connect
    from gensokyo_idmap.store.postgres.migrate import migration_status, upgrade

    database = _database(click_ctx)
    ctx: CliContext = click_ctx.obj
    with connect(database.dsn(ctx.config), database.schema) as conn:
        applied = upgrade(conn, database.schema)
        current = migration_status(conn).current
    emit(ctx, {"applied": [m.label for m in applied], "version": current},
          lambda: "\n".join([*(f"applied {m.label}" for m in applied),
                             f"schema at version {current:04d}"
                             + ("" if applied else " (nothing to do)")]))


@db_group.command("status")
@click.pass_context
def db_status(click_ctx: click.Context) -> None:
    """The migrations applied (with their SHA-256) and pending; refuses a database whose
    migrations this gensokyo-idmap does not know or whose checksums differ (exit 1)."""
    from gensokyo_idmap.store.postgres.connect import connect
    from gensokyo_idmap.store.postgres.migrate import migration_status

    database = _database(click_ctx)
    ctx: CliContext = click_ctx.obj
    with connect(database.dsn(ctx.config), database.schema) as conn:
        status = migration_status(conn)
    rows = [{"version": m.version, "name": m.name, "sha256": m.sha256, "state": "applied"}
            for m in status.applied]
    rows += [{"version": m.version, "name": m.name, "sha256": m.sha256, "state": "pending"}
             for m in status.pending]
    emit(ctx, {"version": status.current, "migrations": rows},
          lambda: "\n".join([*(f"{r['version']:04d} {r['name']:<24} {r['state']:<8} "
                               f"{str(r['sha256'])[:12]}" for r in rows),
                             f"schema at version {status.current:04d}, "
                             f"{len(status.pending)} pending"]))


# --- store: moving the identity graph between backends -------------------------------------


@click.group("store")
def store_group() -> None:
    """Move the identity graph between openid-map.db (LMDB) and PostgreSQL."""


@store_group.command("copy")
@click.option("--to", "to", type=click.Choice(["postgres", "lmdb"]), required=True,
              help="postgres: openid-map.db into an empty PostgreSQL graph; lmdb: the "
                   "PostgreSQL graph into a new openid-map.db of the data dir.")
@click.option("--from", "source_file", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="With --to postgres: this openid-map.db file (a backup, "
                                 "say) instead of the data dir's.")
@click.option("--postgres-dsn", cls=EnvOption, default=None, envvar="GSK_IDMAP__POSTGRES_DSN",
              callback=_postgres_url,
              help="PostgreSQL URL (default: the --config file's idmap.postgres_dsn).")
@click.option("--schema", default=None,
              help="PostgreSQL schema of the graph (default: the server's search_path).")
@click.pass_obj
def store_copy(ctx: CliContext, to: str, source_file: Path | None, postgres_dsn: str | None,
               schema: str | None) -> None:
    """Copy the whole identity graph (identities, vUIN sets, last_seen, aliases, meta, and
    the old config/UserInfo tables) into an empty target, in one transaction.

    Every record the target could not hold is listed; if there is any, nothing is
    written (exit 1). A non-empty target is refused. The source is only read: copy the
    daemon's live openid-map.db while it runs, or stop it for a graph that stays current.
    """
    from gensokyo_idmap.ops.store_copy import copy_graph, read_lmdb_rows, write_lmdb_rows
    from gensokyo_idmap.store.postgres.connect import check_schema_name, describe
    from gensokyo_idmap.store.postgres.copy import load_rows, read_rows

    if schema is not None:
        check_schema_name(schema)
    dsn = _Database(postgres_dsn, None, schema).dsn(ctx.config)
    if to == "postgres":
        source = source_file or existing(ctx, IDENTITY_DB)
        if not source.is_file():
            raise NotFoundError(f"no openid-map.db at {source}")
        report = copy_graph(lambda: read_lmdb_rows(source),
                            lambda rows: load_rows(dsn, rows, schema), str(source),
                            describe(dsn))
    else:
        if source_file is not None:
            raise BadInputError("--from", str(source_file), "goes with --to postgres; "
                                "--to lmdb reads the PostgreSQL graph")
        target = ctx.files.identity_db
        if target.exists():
            raise BadInputError("--to", "lmdb", f"{target} exists already: a copy goes into "
                                "a new openid-map.db (move the old one aside, or give "
                                "another --data-dir)")
        ctx.data_dir.mkdir(parents=True, exist_ok=True)
        report = copy_graph(lambda: read_rows(dsn, schema),
                            lambda rows: write_lmdb_rows(target, rows), describe(dsn),
                            str(target))
    emit(ctx, report.to_json(), lambda: "\n".join(report.lines()))
    if not report.ok:
        sys.exit(1)
