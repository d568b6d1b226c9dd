"""``gensokyo-idmap``: one command line tool for the daemon and its stores.

Human output by default, ``--json`` for scripts. Bad input exits 2 with the reason and
writes nothing; other failures exit 1.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import click

from gensokyo_idmap.config import Config, load_config
from gensokyo_idmap.data_dir import IDENTITY_DB, MSGID_DB, DataDir
from gensokyo_idmap.errors import BadInputError, IdmapError, NotFoundError, StoreError
from gensokyo_idmap.identity import IdentityKey, RUin, parse_identity_input, parse_vuin
from gensokyo_idmap.identity_backend import cached_identity_store, open_identity_store
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.logging import configure_logging
from gensokyo_idmap.redaction import redact_url
from gensokyo_idmap.reports import (
    bind_data,
    rebind_data,
    record_data,
    resolution_data,
    stats_data,
    vuin_data,
)
from gensokyo_idmap.runtime.base import MsgIdCounts, MsgRecord
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore, open_msgid_store
from gensokyo_idmap.runtime.msgid import (
    DEFAULT_MSGID_TTL_SECONDS,
    MsgContext,
    MsgIdMap,
    check_virtual_id,
)
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore

if TYPE_CHECKING:
    from gensokyo_idmap.runtime.redis.scripts import RedisMsgIds
    from gensokyo_idmap.store.identity_cache import CachedIdentityStore
    from gensokyo_idmap.store.postgres.identity import PgIdentityStore

__all__ = ["main"]


@dataclass(frozen=True, slots=True)
class _Context:
    data_dir: Path
    app_id: str | None
    as_json: bool
    config: Config | None = None  # the global --config, when given

    @property
    def files(self) -> DataDir:
        return DataDir(self.data_dir)

    @property
    def on_postgres(self) -> bool:
        return self.config is not None and self.config.idmap.backend == "postgres"

    def lmdb_only(self, command: str, instead: str = "") -> None:
        """Refuse a command that works on openid-map.db when the graph is in PostgreSQL
        (it would read or write a file the daemon does not use); ``instead`` says what
        does the job there."""
        if self.on_postgres:
            raise BadInputError("idmap.backend", "postgres",
                                f"`{command}` works on openid-map.db (idmap.backend lmdb) only"
                                + (f"; {instead}" if instead else ""))

    @property
    def on_redis(self) -> bool:
        return self.config is not None and self.config.idmap.runtime_backend == "redis"

    def lmdb_runtime_only(self, command: str) -> None:
        """Refuse a command on msgid-map.db when the runtime state is in Redis (the daemon
        neither reads nor writes that file then)."""
        if self.on_redis:
            raise BadInputError("idmap.runtime_backend", "redis",
                                f"`{command}` works on msgid-map.db (idmap.runtime_backend "
                                "lmdb) only: the daemon keeps message ids in Redis")


class _ReportsErrors(click.Group):
    """The root command, where the project's errors end, once for every command below it:
    ``error: <message>`` on stderr and the error's exit code (2 for bad input, else 1).
    Commands just raise; anything else (a bug) keeps its traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except IdmapError as err:
            click.echo(f"error: {err.message}", err=True)
            sys.exit(err.exit_code)


def _emit(ctx: _Context, data: dict[str, Any], human: Callable[[], str]) -> None:
    click.echo(json.dumps(data, ensure_ascii=False) if ctx.as_json else human())


def _existing(ctx: _Context, name: str) -> Path:
    """The path of store ``name`` for a read-only command, which must find it, not create it."""
    if not ctx.data_dir.is_dir():
        raise NotFoundError(f"no data dir at {ctx.data_dir} (give --data-dir or set "
                            "GSK_IDMAP__DATA_DIR)")
    return ctx.data_dir / name


@contextmanager
def _graph(ctx: _Context, *, readonly: bool = False) -> Iterator[IdentityGraph]:
    """The identity graph (the --config's backend, else openid-map.db of the data dir);
    ``readonly`` opens an existing one without writing."""
    store: LmdbIdentityStore | PgIdentityStore | CachedIdentityStore
    if ctx.on_postgres:
        assert ctx.config is not None
        store = open_identity_store(ctx.config, readonly=readonly)
        if not readonly:  # the daemons' identity caches hear of this command's binds
            store = cached_identity_store(ctx.config, store, listen=False)
    else:
        path = _existing(ctx, IDENTITY_DB) if readonly else ctx.files.identity_db
        store = LmdbIdentityStore(path, readonly=readonly)
    try:
        yield IdentityGraph(store)
    finally:
        store.close()


def _identity_arg(ctx: _Context, value: str, field: str = "KEY") -> IdentityKey:
    return parse_identity_input(value, ctx.app_id, field)


def _describe(key: IdentityKey) -> str:
    return f"{key.key} ({key.text})" if isinstance(key, RUin) else key.key


@click.group(cls=_ReportsErrors)
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("data"),
              show_default=True, envvar="GSK_IDMAP__DATA_DIR",
              help="Directory holding openid-map.db.")
@click.option("--app-id", default=None, envvar="GSK_BOT__APP_ID",
              help="Serving AppID: bare OpenIDs belong to it.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None,
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
        app_id = app_id or config.bot.app_id or None
    click_ctx.obj = _Context(data_dir, app_id, as_json, config)
    if click_ctx.invoked_subcommand != "serve":
        configure_logging("warning")


@main.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
              required=True, help="YAML config file (see examples/config.yml).")
def serve(config_path: Path) -> None:
    """Run the daemon."""
    from gensokyo_idmap.app import run_daemon
    from gensokyo_idmap.executor import DaemonThreadExecutor
    from gensokyo_idmap.memory import collect_less_often
    from migrate.startup import migrate_if_found

    config: Config = load_config(config_path)
    configure_logging(config.log.level, config.log.format)
    collect_less_often()  # sends in flight hold more than the default lets live
    with asyncio.Runner() as runner:
        # blocking calls (name lookups, sweeps) on daemon threads: one still waiting at
        # the end must not keep the process alive after [app] stopped
        runner.get_loop().set_default_executor(DaemonThreadExecutor())
        runner.run(run_daemon(config, prepare=migrate_if_found))


@main.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("examples/config.yml"), show_default=True,
              help="YAML config file: its listeners, OneBot and log settings (the bot's "
                   "credentials, platform and stores are the demo's own).")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("data-demo"), show_default=True,
              help="The demo's data dir (never the config's, unless given here).")
@click.option("--seed", type=int, default=None,
              help="Seed of the users' script (default: a new one each run, printed).")
@click.option("--pace", type=click.FloatRange(min=0.0), default=2.0, show_default=True,
              help="Mean seconds between two things the users do.")
def demo(config_path: Path, data_dir: Path, seed: int | None, pace: float) -> None:
    """Run the daemon fed by an emulated QQ platform: simulated users chat, join and leave;
    a bot connected to it answers them (no QQ credentials needed; docs/demo.md)."""
    import secrets

    from gensokyo_idmap.demo.run import DemoOptions, run_demo
    from gensokyo_idmap.executor import DaemonThreadExecutor

    config: Config = load_config(config_path)
    configure_logging(config.log.level, config.log.format)
    options = DemoOptions(data_dir=data_dir, pace=pace,
                          seed=secrets.randbelow(10_000) if seed is None else seed)
    with asyncio.Runner() as runner:
        runner.get_loop().set_default_executor(DaemonThreadExecutor())
        runner.run(run_demo(config, options, click.echo))


@main.group()
def identity() -> None:
    """Resolve, look up, show and bind identities in openid-map.db."""


@identity.command()
@click.argument("keys", nargs=-1, required=True)
@click.option("--scene", default=None, help="Record the first key as last seen in this scene.")
@click.pass_obj
def resolve(ctx: _Context, keys: tuple[str, ...], scene: str | None) -> None:
    """Resolve KEYS seen together to one vUIN (allocating one if none is known)."""
    parsed = [_identity_arg(ctx, k) for k in keys]
    with _graph(ctx) as graph:
        result = asyncio.run(graph.resolve(parsed, scene=scene))
    _emit(ctx, resolution_data(result),
          lambda: f"{result.vuin}" + (" (new)" if result.created else "")
          + "".join(f"\nconflict: {k} stays on {v}" for k, v in result.conflicts))


@identity.command()
@click.argument("key")
@click.pass_obj
def lookup(ctx: _Context, key: str) -> None:
    """Print the vUIN of KEY (exit 1 when it is unknown)."""
    parsed = _identity_arg(ctx, key)
    with _graph(ctx, readonly=True) as graph:
        vuin = graph.lookup(parsed)
    _emit(ctx, {"key": parsed.key, "vuin": vuin},
          lambda: f"{vuin}" if vuin is not None else f"{parsed.key}: not found")
    if vuin is None:
        sys.exit(1)


@identity.command()
@click.argument("vuin")
@click.pass_obj
def show(ctx: _Context, vuin: str) -> None:
    """Show VUIN: its identities, last seen per scene, aliases."""
    number = parse_vuin(vuin, "VUIN")
    with _graph(ctx, readonly=True) as graph:
        view = graph.show(number)
    data = vuin_data(view)

    def human() -> str:
        lines = [f"vUIN {view.vuin}" + (f" (alias {view.requested} resolves here)"
                                        if view.requested != view.vuin else "")]
        lines += [f"  identity  {key}" for key in view.identities]
        lines += [f"  seen      {scene}: {s.identity}" for scene, s in view.last_seen]
        lines += [f"  alias     {alias}" for alias in view.aliases]
        return "\n".join(lines)

    _emit(ctx, data, human)


@identity.command()
@click.argument("key")
@click.argument("vuin")
@click.pass_obj
def bind(ctx: _Context, key: str, vuin: str) -> None:
    """Bind KEY to VUIN (added to its identity set)."""
    parsed = _identity_arg(ctx, key)
    number = parse_vuin(vuin, "VUIN")
    with _graph(ctx) as graph:
        result = asyncio.run(graph.bind(parsed, number))
    _emit(ctx, bind_data(result),
          lambda: f"{result.outcome}: {_describe(parsed)} → {result.vuin} ({result.reason})")


@identity.command()
@click.argument("old")
@click.argument("new")
@click.pass_obj
def rebind(ctx: _Context, old: str, new: str) -> None:
    """Move every identity of OLD to NEW; OLD keeps resolving to NEW."""
    old_vuin = parse_vuin(old, "OLD")
    new_vuin = parse_vuin(new, "NEW")
    with _graph(ctx) as graph:
        result = asyncio.run(graph.rebind(old_vuin, new_vuin))
    _emit(ctx, rebind_data(result),
          lambda: f"{result.outcome}: {result.old} → {result.new} ({result.reason})")


@contextmanager
def _msgids(ctx: _Context, ttl_seconds: float, *, readonly: bool = False
            ) -> Iterator[MsgIdMap]:
    """The message-id map. ``readonly`` opens an existing msgid-map.db as it is: a damaged
    one is an error here, not moved aside (that is the daemon's and the writers' job)."""
    if readonly:
        store = LmdbMsgIdStore(_existing(ctx, MSGID_DB), readonly=True)
    else:
        store = open_msgid_store(ctx.files.msgid_db)
    try:
        yield MsgIdMap(store, ttl_seconds=ttl_seconds)
    finally:
        store.close()


@contextmanager
def _redis_msgids(ctx: _Context) -> Iterator[RedisMsgIds]:
    """The message ids on the Redis of ``--config`` (its prefix), for reads only: the
    daemons share these keys, and ``lookup`` and ``stats`` send ``HMGET``, ``GET`` and
    ``SCAN``, never a write. A Redis that does not answer is an error naming it (the
    daemon's soft fallback, "unknown", would be a wrong answer here)."""
    import redis

    from gensokyo_idmap.runtime.redis.connection import RedisRuntime
    from gensokyo_idmap.runtime.redis.scripts import RedisMsgIds

    assert ctx.config is not None
    runtime = RedisRuntime(ctx.config.idmap.redis_url, ctx.config.idmap.redis_prefix)
    try:
        yield RedisMsgIds(runtime)
    except redis.RedisError as exc:
        raise StoreError(f"{runtime.server}: {redact_url(str(exc))}") from None
    finally:
        runtime.sync.close()


@main.group()
@click.option("--ttl-seconds", type=float, default=DEFAULT_MSGID_TTL_SECONDS, show_default=True,
              envvar="GSK_IDMAP__MSGID_TTL_SECONDS", help="Lifetime of a stored message id.")
@click.pass_context
def msgid(click_ctx: click.Context, ttl_seconds: float) -> None:
    """Store, look up and sweep virtual message ids in msgid-map.db (on Redis, with
    idmap.runtime_backend redis: lookup and stats, which write nothing)."""
    if ttl_seconds <= 0:
        raise BadInputError("--ttl-seconds", ttl_seconds, "must be positive")
    click_ctx.meta["ttl_seconds"] = ttl_seconds


@msgid.command("store")
@click.argument("real_id")
@click.option("--chat-kind", default="", help="group, c2c, … (for reply context).")
@click.option("--target", default="", help="The chat's OpenID (for reply context).")
@click.option("--direction", type=click.Choice(["in", "out"]), default="in", show_default=True)
@click.pass_context
def msgid_store(click_ctx: click.Context, real_id: str, chat_kind: str, target: str,
                direction: str) -> None:
    """Map REAL_ID to a virtual id (the same one while it lives)."""
    ctx: _Context = click_ctx.obj
    ctx.lmdb_runtime_only("msgid store")  # the daemons store their own ids on Redis
    context = MsgContext(ctx.app_id or "", chat_kind, target, direction)  # type: ignore[arg-type]
    with _msgids(ctx, click_ctx.meta["ttl_seconds"]) as msgids:
        virtual_id = msgids.store_real_sync(real_id, context)
    _emit(ctx, {"virtual_id": virtual_id, "real_id": real_id}, lambda: str(virtual_id))


@msgid.command("lookup")
@click.argument("virtual_id")
@click.pass_context
def msgid_lookup(click_ctx: click.Context, virtual_id: str) -> None:
    """Print the real id of VIRTUAL_ID (exit 1 when unknown or expired)."""
    ctx: _Context = click_ctx.obj
    number = check_virtual_id(virtual_id, "VIRTUAL_ID")
    record: MsgRecord | None
    if ctx.on_redis:
        with _redis_msgids(ctx) as ids:
            record = ids.record(number)
        if record is not None and record.expires_ms <= int(time.time() * 1000):
            record = None  # expired: invisible, as to the daemons, whether or not Redis
            # dropped it yet
    else:
        with _msgids(ctx, click_ctx.meta["ttl_seconds"], readonly=True) as msgids:
            record = msgids.lookup(number)
    if record is None:
        _emit(ctx, {"virtual_id": number, "real_id": None},
              lambda: f"{number}: unknown or expired")
        sys.exit(1)
    _emit(ctx, record_data(record), lambda: record.real_id)


@msgid.command("sweep")
@click.pass_context
def msgid_sweep(click_ctx: click.Context) -> None:
    """Delete expired message ids now."""
    ctx: _Context = click_ctx.obj
    ctx.lmdb_runtime_only("msgid sweep")  # Redis drops expired ids by itself
    with _msgids(ctx, click_ctx.meta["ttl_seconds"]) as msgids:
        swept = msgids.sweep_sync()
    _emit(ctx, {"swept": swept}, lambda: f"swept {swept}")


@msgid.command("stats")
@click.pass_context
def msgid_stats(click_ctx: click.Context) -> None:
    """Entries held (live or not yet swept) and the allocation counter."""
    ctx: _Context = click_ctx.obj
    counts: MsgIdCounts
    if ctx.on_redis:
        with _redis_msgids(ctx) as ids:
            counts = ids.counts()
    else:
        with _msgids(ctx, click_ctx.meta["ttl_seconds"], readonly=True) as msgids:
            counts = msgids.counts()
    _emit(ctx, {"entries": counts.live_or_unswept, "counter": counts.counter},
          lambda: f"entries {counts.live_or_unswept}\ncounter {counts.counter}")


@contextmanager
def _migration_stores(ctx: _Context, dry_run: bool
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


@main.command("migrate")
@click.option("--legacy", "legacy_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="The old idmap.db (default: <data-dir>/idmap.db).")
@click.option("--dry-run", is_flag=True, help="Convert and verify, then write nothing.")
@click.pass_obj
def migrate_command(ctx: _Context, legacy_path: Path | None, dry_run: bool) -> None:
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
    _emit(ctx, report.to_json(), lambda: "\n".join(report.summary_lines()))


def _migrate_into_postgres(ctx: _Context, legacy: Path, dry_run: bool) -> None:
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
        _emit(ctx, {**done.to_json(), "target": describe(dsn), "copy": None},
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
    _emit(ctx, {**report.to_json(), "target": describe(dsn),
                "copy": None if copy is None else copy.to_json()},
          lambda: "\n".join([*report.summary_lines(),
                             *([f"target        {describe(dsn)}"] if copy is None else
                               copy.lines())]))
    if copy is not None and not copy.ok:
        sys.exit(1)


def _owed(ctx: _Context) -> dict[str, int]:
    from gensokyo_idmap.ops.lmdb_files import owed_per_sink

    return owed_per_sink(ctx.files.outbox_db)


@main.command("stats")
@click.pass_obj
def stats_command(ctx: _Context) -> None:
    """Counts per table, file sizes, schema versions and the migration marker (of the
    PostgreSQL graph with idmap.backend postgres in --config)."""
    identity: Path | str = ctx.files.identity_db
    msgid_path = ctx.files.msgid_db
    if ctx.on_postgres:
        from gensokyo_idmap.identity_backend import identity_store_location

        assert ctx.config is not None
        identity = identity_store_location(ctx.config)
    with _graph(ctx, readonly=True) as graph, ExitStack() as stack:
        msgids = (stack.enter_context(_msgids(ctx, DEFAULT_MSGID_TTL_SECONDS, readonly=True))
                  if msgid_path.is_file() else None)  # disposable: made by the daemon
        data = stats_data(graph, identity, msgids, msgid_path)
    if ctx.on_postgres:
        assert ctx.config is not None
        data["openid_map"]["schema_version"] = _postgres_schema_version(ctx.config)
    data["outbox"] = {"path": str(ctx.files.outbox_db), "owed": _owed(ctx)}
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
        owed = data["outbox"]["owed"]
        lines.append("outbox.db      " + (", ".join(f"{n} owed to {sink}"
                                                    for sink, n in sorted(owed.items()))
                                          or "nothing owed"))
        return "\n".join(lines)

    _emit(ctx, data, human)


def _postgres_schema_version(config: Config) -> int:
    """The migration the PostgreSQL graph is at (``stats``; ``db status`` lists them)."""
    from gensokyo_idmap.store.postgres.connect import connect
    from gensokyo_idmap.store.postgres.migrate import migration_status

    with connect(config.idmap.postgres_dsn) as conn:
        return migration_status(conn).current


# --- operations: config, backup, verify, recover -------------------------------------------


@main.group("config")
def config_group() -> None:
    """Check a config file; convert an old Go Gensokyo config.yml."""


@config_group.command("check")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--connect", is_flag=True,
              help="Also reach the PostgreSQL and Redis the file configures (exit 1 if one "
                   "cannot be used).")
@click.pass_obj
def config_check(ctx: _Context, file: Path, connect: bool) -> None:
    """Validate FILE (with GSK_<SECTION>__<KEY> overrides) without starting anything."""
    import os

    from gensokyo_idmap.config_env import env_overrides
    from gensokyo_idmap.ops.config_check import refuse_bad_startup, summary
    from gensokyo_idmap.ops.connect_check import reach_servers

    config = load_config(file)
    checked = refuse_bad_startup(config)
    for warning in checked.warnings:
        click.echo(f"warning: {warning}", err=True)
    overrides = [o.var for o in env_overrides(os.environ)]
    line = summary(config)
    servers = reach_servers(config) if connect else []
    ok = all(server.ok for server in servers)
    _emit(ctx, {"ok": ok, "file": str(file), "summary": line,
                "warnings": list(checked.warnings), "env_overrides": overrides,
                "servers": [server.to_json() for server in servers]},
          lambda: "\n".join([f"{'ok' if ok else 'error'}: {file}: {line}"
                             + (f" ({len(overrides)} set by GSK_* variables)"
                                if overrides else ""),
                             *(f"  {server.line()}" for server in servers)]))
    if not ok:
        sys.exit(1)


@config_group.command("import-gensokyo")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the new config here (secrets included, mode 0600).")
@click.option("--force", is_flag=True, help="Replace an existing --out file.")
@click.pass_obj
def config_import_gensokyo(ctx: _Context, file: Path, out: Path | None, force: bool) -> None:
    """Convert an old Go Gensokyo config.yml FILE into this daemon's config.

    Without --out the result is printed with secrets hidden. Old keys without an
    equivalent are listed.
    """
    import os

    import yaml
    from pydantic import ValidationError

    from gensokyo_idmap.config_env import is_secret_path
    from gensokyo_idmap.ops.gensokyo_config import convert_gensokyo, masked

    try:
        old = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BadInputError("FILE", str(file), f"cannot read: {exc.strerror}") from None
    except (UnicodeDecodeError, yaml.YAMLError):
        raise BadInputError("FILE", str(file), "not a UTF-8 YAML file") from None
    result = convert_gensokyo(old)
    try:
        Config.model_validate(result.config)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        shown = "<hidden>" if is_secret_path(where) else first.get("input")
        raise BadInputError(where, shown, f"{first['msg']} (converted from {file})") from None
    if out is not None and out.exists() and not force:
        raise BadInputError("--out", str(out), "exists already (--force replaces it)")
    header = (f"# gensokyo-idmap config, converted from the Go Gensokyo config {file.name}.\n"
              "# Every key and its default: examples/config.yml.\n")
    shown = masked(result.config)
    if out is not None:
        text = header + yaml.safe_dump(result.config, sort_keys=False, allow_unicode=True)
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)

    def report() -> str:
        lines = [f"wrote {out}" if out is not None else
                 "# secrets are shown as <hidden>: use --out FILE to write them"]
        lines += [f"note: {note}" for note in result.notes]
        lines += [f"no equivalent: {key} ({why})" for key, why in result.unmapped]
        return "\n".join(lines)

    if ctx.as_json:
        click.echo(json.dumps({**result.to_json(shown), "out": str(out) if out else None},
                              ensure_ascii=False))
    elif out is not None:
        click.echo(report())
    else:
        click.echo(header + yaml.safe_dump(shown, sort_keys=False, allow_unicode=True), nl=False)
        click.echo(report(), err=True)


@main.command("backup")
@click.argument("dest", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Replace an existing DEST.")
@click.pass_obj
def backup_command(ctx: _Context, dest: Path, force: bool) -> None:
    """Copy openid-map.db to DEST: consistent and compacted, while the daemon runs (a
    PostgreSQL graph: its snapshot written as an openid-map.db file)."""
    from gensokyo_idmap.ops.lmdb_files import backup_store
    from gensokyo_idmap.ops.store_copy import backup_postgres

    if ctx.on_postgres:  # the graph's snapshot as an openid-map.db file (docs/stores.md)
        assert ctx.config is not None
        result = backup_postgres(ctx.config.idmap.postgres_dsn, dest, force=force)
    else:
        result = backup_store(ctx.files.identity_db, dest, force=force)
    _emit(ctx, result.to_json(), lambda: "\n".join(
        [f"backup {result.dest}: {result.bytes} bytes"
         + (f" (store {result.source_bytes})" if result.source_bytes else
            f" (from {result.source})")
         if result.written else
         f"no backup written: the copy of {result.source} fails verify ({result.dest} untouched)",
         *result.verify.lines()]))
    if not result.written:
        sys.exit(1)


@main.command("verify")
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.pass_obj
def verify_command(ctx: _Context, file: Path | None) -> None:
    """Check every invariant of the identity graph (openid-map.db, the PostgreSQL graph of
    --config, or FILE, e.g. a backup); exit 1 on a violation."""
    from gensokyo_idmap.ops.lmdb_files import verify_store
    from gensokyo_idmap.ops.store_copy import verify_postgres

    if file is None and ctx.on_postgres:
        assert ctx.config is not None
        report = verify_postgres(ctx.config.idmap.postgres_dsn)
    else:
        report = verify_store(file or ctx.files.identity_db)
    _emit(ctx, report.to_json(), lambda: "\n".join(report.lines()))
    if not report.ok:
        sys.exit(1)


@main.group("recover")
def recover_group() -> None:
    """Recover a damaged store (stop the daemon first; see docs/stores.md)."""


@recover_group.command("msgid")
@click.pass_obj
def recover_msgid(ctx: _Context) -> None:
    """Reset msgid-map.db: the old file is moved aside, an empty one takes its place."""
    from gensokyo_idmap.ops.recover import reset_msgids

    ctx.lmdb_runtime_only("recover msgid")
    result = reset_msgids(ctx.data_dir)
    _emit(ctx, result.to_json(), lambda: (
        f"msgid-map.db reset: {result.path} is empty (counter {result.counter} kept)"
        + (f"; the old file is {result.moved_to}" if result.moved_to else "")))


@recover_group.command("outbox")
@click.pass_obj
def recover_outbox(ctx: _Context) -> None:
    """Start an empty outbox.db in place of a refused one (the events it owed are lost)."""
    from gensokyo_idmap.ops.recover import reset_outbox

    result = reset_outbox(ctx.data_dir)
    _emit(ctx, result.to_json(), lambda: (
        f"outbox.db started empty: {result.path} (was: {result.reason})"
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
def recover_identities_command(ctx: _Context, legacy: str | None) -> None:
    """Re-migrate openid-map.db from the old idmap.db (the current file is moved aside)."""
    from gensokyo_idmap.ops.recover import recover_identities
    from migrate.legacy import migrate_legacy

    ctx.lmdb_only("recover identities", RECOVER_ON_POSTGRES)
    if legacy is None:
        raise BadInputError("--from-legacy", None,
                            "the old idmap.db is the only source to recover from")
    result = recover_identities(ctx.data_dir, Path(legacy) if legacy else
                                ctx.files.legacy_db, ctx.app_id, migrate_legacy)
    _emit(ctx, result.to_json(), lambda: "\n".join(
        [f"openid-map.db re-migrated from {result.report.legacy_path}"
         + (f"; the previous file is {result.moved_to}" if result.moved_to else ""),
         *result.report.summary_lines()]))


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


@main.group("db")
@click.option("--postgres-dsn", default=None, envvar="GSK_IDMAP__POSTGRES_DSN",
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
    ctx: _Context = click_ctx.obj
    with connect(database.dsn(ctx.config), database.schema) as conn:
        applied = upgrade(conn, database.schema)
        current = migration_status(conn).current
    _emit(ctx, {"applied": [m.label for m in applied], "version": current},
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
    ctx: _Context = click_ctx.obj
    with connect(database.dsn(ctx.config), database.schema) as conn:
        status = migration_status(conn)
    rows = [{"version": m.version, "name": m.name, "sha256": m.sha256, "state": "applied"}
            for m in status.applied]
    rows += [{"version": m.version, "name": m.name, "sha256": m.sha256, "state": "pending"}
             for m in status.pending]
    _emit(ctx, {"version": status.current, "migrations": rows},
          lambda: "\n".join([*(f"{r['version']:04d} {r['name']:<24} {r['state']:<8} "
                               f"{str(r['sha256'])[:12]}" for r in rows),
                             f"schema at version {status.current:04d}, "
                             f"{len(status.pending)} pending"]))


# --- store: moving the identity graph between backends -------------------------------------


@main.group("store")
def store_group() -> None:
    """Move the identity graph between openid-map.db (LMDB) and PostgreSQL."""


@store_group.command("copy")
@click.option("--to", "to", type=click.Choice(["postgres", "lmdb"]), required=True,
              help="postgres: openid-map.db into an empty PostgreSQL graph; lmdb: the "
                   "PostgreSQL graph into a new openid-map.db of the data dir.")
@click.option("--from", "source_file", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="With --to postgres: this openid-map.db file (a backup, "
                                 "say) instead of the data dir's.")
@click.option("--postgres-dsn", default=None, envvar="GSK_IDMAP__POSTGRES_DSN",
              help="PostgreSQL URL (default: the --config file's idmap.postgres_dsn).")
@click.option("--schema", default=None,
              help="PostgreSQL schema of the graph (default: the server's search_path).")
@click.pass_obj
def store_copy(ctx: _Context, to: str, source_file: Path | None, postgres_dsn: str | None,
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
        source = source_file or _existing(ctx, IDENTITY_DB)
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
    _emit(ctx, report.to_json(), lambda: "\n".join(report.lines()))
    if not report.ok:
        sys.exit(1)


# --- --json after the subcommand too ---------------------------------------------------------

#: Commands without JSON output: no ``--json`` of their own.
_NO_JSON_OUTPUT = frozenset({"serve", "demo"})


def _json_after_subcommand(click_ctx: click.Context, _param: click.Parameter,
                           value: bool) -> None:
    if value:
        click_ctx.obj = replace(click_ctx.obj, as_json=True)


def _add_json_option(group: click.Group) -> None:
    """Give every command with JSON output a ``--json`` of its own, so that
    ``gensokyo-idmap verify --json`` works as well as ``gensokyo-idmap --json verify`` (the
    README shows both). Done once over the whole tree, so a command added later has it too.
    """
    for command in group.commands.values():
        if isinstance(command, click.Group):
            _add_json_option(command)
        elif command.name not in _NO_JSON_OUTPUT:
            command.params.append(click.Option(
                ["--json"], is_flag=True, expose_value=False,
                callback=_json_after_subcommand, help="Machine-readable output."))


_add_json_option(main)
