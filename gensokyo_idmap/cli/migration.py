"""``migrate``: an old Go Gensokyo idmap.db into openid-map.db or the PostgreSQL graph."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import click

from gensokyo_idmap.cli.context import CliContext
from gensokyo_idmap.cli.output import emit
from gensokyo_idmap.data_dir import IDENTITY_DB
from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.logging import configure_logging
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore, open_msgid_store
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore

__all__ = ["migrate_command"]


@contextmanager
def _migration_stores(ctx: CliContext, dry_run: bool
                      ) -> Iterator[tuple[LmdbIdentityStore, LmdbMsgIdStore | None]]:
    """The stores a migration writes. A dry run writes nothing, so it needs no msgid-map.db,
    and with no openid-map.db yet it converts into a throw-away one in a temporary dir
    instead of creating the data dir's."""
    identity_path = ctx.files.identity_db
    with ExitStack() as stack:
        if dry_run and not identity_path.is_file():
            scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="gsk-dry-run-"))
            identity_path = Path(scratch) / IDENTITY_DB
        # a migration may create the store on purpose (re-migration, docs/stores.md); a dry run
        # of a store that is gone converts into the throw-away one above
        store = LmdbIdentityStore(identity_path, recreate=not dry_run)
        stack.callback(store.close)
        msgid_store = None
        if not dry_run:
            msgid_store = open_msgid_store(ctx.files.msgid_db)
            stack.callback(msgid_store.close)
        yield store, msgid_store


@click.command("migrate")
@click.option("--legacy", "legacy_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="The old idmap.db (default: <data-dir>/idmap.db).")
@click.option("--dry-run", is_flag=True, help="Convert and verify, then write nothing.")
@click.pass_obj
def migrate_command(ctx: CliContext, legacy_path: Path | None, dry_run: bool) -> None:
    """Migrate an old Gensokyo idmap.db into openid-map.db, or into the PostgreSQL graph
    of --config (once, all or nothing)."""
    from migrate.legacy import migrate_legacy
    from migrate.progress import progress_reporter

    legacy = legacy_path or ctx.files.legacy_db
    if not sys.stderr.isatty():
        configure_logging("info")  # progress lines instead of a bar
    if ctx.app_id is None:
        raise BadInputError("--app-id", None, "the AppID the old OpenIDs belong to is needed")
    if not legacy.is_file():
        raise BadInputError("--legacy" if legacy_path else "legacy", str(legacy),
                            "no old idmap.db there, so nothing to migrate (put the Go "
                            "daemon's idmap.db there, or give --legacy PATH)")
    if ctx.on_postgres:
        _migrate_into_postgres(ctx, legacy, dry_run)
        return
    with (_migration_stores(ctx, dry_run) as (store, msgid_store),
          progress_reporter(sys.stderr) as progress):
        report = migrate_legacy(legacy, store, msgid_store, ctx.app_id,
                                dry_run=dry_run, progress=progress)
    emit(ctx, report.to_json(), lambda: "\n".join(report.summary_lines()))


def _migrate_into_postgres(ctx: CliContext, legacy: Path, dry_run: bool) -> None:
    """``migrate`` with ``idmap.backend: postgres``: the old file is converted (every rule
    and check of the migration) into a throw-away openid-map.db, which is then copied, the
    marker with it, into the empty PostgreSQL graph in one transaction (``store copy``).
    So the migration code stays on the store interfaces and never learns PostgreSQL, and
    a kill at any moment leaves the graph empty or migrated."""
    from gensokyo_idmap.ops.store_copy import copy_graph, read_lmdb_rows
    from gensokyo_idmap.store.postgres.connect import describe
    from gensokyo_idmap.store.postgres.copy import load_rows, target_state
    from migrate.legacy import MigrationReport, migrate_legacy
    from migrate.progress import progress_reporter

    assert ctx.config is not None and ctx.app_id is not None
    dsn = ctx.config.idmap.postgres_dsn
    state = target_state(dsn)
    if state is not None and state.marker is not None:
        done = MigrationReport(legacy_path=str(legacy), app_id=ctx.app_id,
                               status="already_migrated")
        emit(ctx, {**done.to_json(), "target": describe(dsn), "copy": None},
              lambda: "\n".join(done.summary_lines()))
        return
    if state is not None and not state.empty:
        raise state.refusal(describe(dsn))
    with (tempfile.TemporaryDirectory(prefix="gsk-migrate-") as scratch, ExitStack() as stack,
          progress_reporter(sys.stderr) as progress):
        converted = Path(scratch) / IDENTITY_DB
        store = LmdbIdentityStore(converted)
        stack.callback(store.close)
        msgid_store = None
        if not dry_run and ctx.config.idmap.runtime_backend == "lmdb":
            msgid_store = open_msgid_store(ctx.files.msgid_db)
            stack.callback(msgid_store.close)
        report = migrate_legacy(legacy, store, msgid_store, ctx.app_id,
                                dry_run=dry_run, progress=progress)
        stack.close()
        copy = None if dry_run else copy_graph(
            lambda: read_lmdb_rows(converted), lambda rows: load_rows(dsn, rows),
            f"{legacy} (converted)", describe(dsn))
    emit(ctx, {**report.to_json(), "target": describe(dsn),
                "copy": None if copy is None else copy.to_json()},
          lambda: "\n".join([*report.summary_lines(),
                             *([f"target        {describe(dsn)}"] if copy is None else
                               copy.lines())]))
    if copy is not None and not copy.ok:
        sys.exit(1)
