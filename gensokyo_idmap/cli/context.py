"""What every command is handed: the root options (data dir, AppID, --json, the config) and
the stores they point at, opened as a command needs them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from gensokyo_idmap.config import Config
from gensokyo_idmap.data_dir import IDENTITY_DB, MSGID_DB, DataDir
from gensokyo_idmap.errors import BadInputError, NotFoundError
from gensokyo_idmap.identity_backend import cached_identity_store, open_identity_store
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore, open_msgid_store
from gensokyo_idmap.runtime.msgid import MsgIdMap
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore

if TYPE_CHECKING:
    from gensokyo_idmap.store.identity_cache import CachedIdentityStore
    from gensokyo_idmap.store.postgres.identity import PgIdentityStore

__all__ = ["ROOT_CONFIG", "CliContext", "EnvOption", "RootConfigOption", "check_app_id_option",
           "existing", "open_graph", "open_msgids"]

#: The name of the root command's ``--config`` parameter, read by :class:`RootConfigOption`.
ROOT_CONFIG = "config_path"


@dataclass(frozen=True, slots=True)
class CliContext:
    """The root command's options, as every command below it reads them (``click``'s
    ``obj``): the data dir and AppID, from ``--config`` unless given."""

    data_dir: Path
    app_id: str | None
    as_json: bool
    config: Config | None = None  # the global --config, when given
    #: whether ``--app-id`` (or ``GSK_BOT__APP_ID``) named the AppID (not the config's
    #: first bot): per-bot figures are then that bot's alone
    app_id_given: bool = False

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


def existing(ctx: CliContext, name: str) -> Path:
    """The path of store ``name`` for a read-only command, which must find it, not create it."""
    if not ctx.data_dir.is_dir():
        raise NotFoundError(f"no data dir at {ctx.data_dir} (give --data-dir or set "
                            "GSK_IDMAP__DATA_DIR)")
    return ctx.data_dir / name


@contextmanager
def open_graph(ctx: CliContext, *, readonly: bool = False) -> Iterator[IdentityGraph]:
    """The identity graph (the --config's backend, else openid-map.db of the data dir);
    ``readonly`` opens an existing one without writing."""
    store: LmdbIdentityStore | PgIdentityStore | CachedIdentityStore
    if ctx.on_postgres:
        assert ctx.config is not None
        store = open_identity_store(ctx.config, readonly=readonly)
        if not readonly:  # the daemons' identity caches hear of this command's binds
            store = cached_identity_store(ctx.config, store, listen=False)
    else:
        path = existing(ctx, IDENTITY_DB) if readonly else ctx.files.identity_db
        store = LmdbIdentityStore(path, readonly=readonly)
    try:
        yield IdentityGraph(store)
    finally:
        store.close()


@contextmanager
def open_msgids(ctx: CliContext, ttl_seconds: float, *, readonly: bool = False
                ) -> Iterator[MsgIdMap]:
    """The message-id map. ``readonly`` opens an existing msgid-map.db as it is: a damaged
    one is an error here, not moved aside (that is the daemon's and the writers' job)."""
    if readonly:
        store = LmdbMsgIdStore(existing(ctx, MSGID_DB), readonly=True)
    else:
        store = open_msgid_store(ctx.files.msgid_db)
    try:
        yield MsgIdMap(store, ttl_seconds=ttl_seconds)
    finally:
        store.close()


class RootConfigOption(click.Option):
    """The ``--config`` of a command that has one of its own (``serve``, ``demo``): not
    given there, the root's ``--config`` is taken, so ``gensokyo-idmap --config FILE serve``
    runs as ``gensokyo-idmap serve --config FILE`` does; given in both places, the
    command's wins. Only when neither is given does the option's default apply (or, for a
    required one, click's "Missing option '--config'"). The help text stays the option's
    own."""

    def consume_value(self, ctx: click.Context, opts: Mapping[str, Any]
                      ) -> tuple[Any, ParameterSource]:
        value, source = super().consume_value(ctx, opts)
        if source in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT):
            return value, source
        given = ctx.find_root().params.get(ROOT_CONFIG)
        return (given, ParameterSource.COMMANDLINE) if given is not None else (value, source)


class EnvOption(click.Option):
    """An option that may come from a ``GSK_*`` variable (``envvar``): an error about a
    value taken from the environment names that variable, not a flag the user never typed
    (``Invalid value for 'GSK_IDMAP__DATA_DIR' (environment variable): …``)."""

    def get_error_hint(self, ctx: click.Context | None) -> str:
        if (ctx is not None and self.name is not None and isinstance(self.envvar, str)
                and ctx.get_parameter_source(self.name) == ParameterSource.ENVIRONMENT):
            return f"'{self.envvar}' (environment variable)"
        return super().get_error_hint(ctx)


def check_app_id_option(_ctx: click.Context, _param: click.Parameter,
                        value: str | None) -> str | None:
    """``--app-id`` (or ``GSK_BOT__APP_ID``) checked where it is read, so a bad one is
    named by where it came from."""
    from gensokyo_idmap.identity import check_app_id

    if value is None:
        return None
    try:
        return check_app_id(value)
    except BadInputError as err:
        raise click.BadParameter(f"{err.reason} (got {value!r})") from None
