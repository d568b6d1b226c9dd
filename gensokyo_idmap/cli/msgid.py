"""``msgid``: the virtual message ids of msgid-map.db (or, read only, of Redis)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from gensokyo_idmap.cli.context import CliContext, EnvOption, open_msgids
from gensokyo_idmap.cli.output import emit
from gensokyo_idmap.errors import StoreError
from gensokyo_idmap.redaction import redact_url
from gensokyo_idmap.reports import record_data
from gensokyo_idmap.runtime.base import MsgIdCounts, MsgRecord
from gensokyo_idmap.runtime.msgid import DEFAULT_MSGID_TTL_SECONDS, MsgContext, check_virtual_id

if TYPE_CHECKING:
    from gensokyo_idmap.runtime.redis.scripts import RedisMsgIds

__all__ = ["msgid"]


@contextmanager
def _redis_msgids(ctx: CliContext) -> Iterator[RedisMsgIds]:
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


def _positive(_ctx: click.Context, _param: click.Parameter, value: float) -> float:
    if value <= 0:
        raise click.BadParameter(f"must be positive (got {value:g})")
    return value


@click.group()
@click.option("--ttl-seconds", cls=EnvOption, type=float, default=DEFAULT_MSGID_TTL_SECONDS,
              show_default=True, envvar="GSK_IDMAP__MSGID_TTL_SECONDS", callback=_positive,
              help="Lifetime of a stored message id.")
@click.pass_context
def msgid(click_ctx: click.Context, ttl_seconds: float) -> None:
    """Store, look up and sweep virtual message ids in msgid-map.db (on Redis, with
    idmap.runtime_backend redis: lookup and stats, which write nothing)."""
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
    ctx: CliContext = click_ctx.obj
    ctx.lmdb_runtime_only("msgid store")  # the daemons store their own ids on Redis
    context = MsgContext(ctx.app_id or "", chat_kind, target, direction)  # type: ignore[arg-type]
    with open_msgids(ctx, click_ctx.meta["ttl_seconds"]) as msgids:
        virtual_id = msgids.store_real_sync(real_id, context)
    emit(ctx, {"virtual_id": virtual_id, "real_id": real_id}, lambda: str(virtual_id))


@msgid.command("lookup")
@click.argument("virtual_id")
@click.pass_context
def msgid_lookup(click_ctx: click.Context, virtual_id: str) -> None:
    """Print the real id of VIRTUAL_ID (exit 1 when unknown or expired)."""
    ctx: CliContext = click_ctx.obj
    number = check_virtual_id(virtual_id, "VIRTUAL_ID")
    record: MsgRecord | None
    if ctx.on_redis:
        with _redis_msgids(ctx) as ids:
            record = ids.record(number)
        if record is not None and record.expires_ms <= int(time.time() * 1000):
            record = None  # expired: invisible, as to the daemons, whether or not Redis
            # dropped it yet
    else:
        with open_msgids(ctx, click_ctx.meta["ttl_seconds"], readonly=True) as msgids:
            record = msgids.lookup(number)
    if record is None:
        emit(ctx, {"virtual_id": number, "real_id": None},
              lambda: f"{number}: unknown or expired")
        sys.exit(1)
    emit(ctx, record_data(record), lambda: record.real_id)


@msgid.command("sweep")
@click.pass_context
def msgid_sweep(click_ctx: click.Context) -> None:
    """Delete expired message ids now."""
    ctx: CliContext = click_ctx.obj
    ctx.lmdb_runtime_only("msgid sweep")  # Redis drops expired ids by itself
    with open_msgids(ctx, click_ctx.meta["ttl_seconds"]) as msgids:
        swept = msgids.sweep_sync()
    emit(ctx, {"swept": swept}, lambda: f"swept {swept}")


@msgid.command("stats")
@click.pass_context
def msgid_stats(click_ctx: click.Context) -> None:
    """Entries held (live or not yet swept) and the allocation counter."""
    ctx: CliContext = click_ctx.obj
    counts: MsgIdCounts
    if ctx.on_redis:
        with _redis_msgids(ctx) as ids:
            counts = ids.counts()
    else:
        with open_msgids(ctx, click_ctx.meta["ttl_seconds"], readonly=True) as msgids:
            counts = msgids.counts()
    emit(ctx, {"entries": counts.live_or_unswept, "counter": counts.counter},
          lambda: f"entries {counts.live_or_unswept}\ncounter {counts.counter}")
