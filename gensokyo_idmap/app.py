"""The daemon process: open the stores, run until told to stop, close cleanly.

Today the daemon holds both stores open, sweeps expired message ids, and serves nothing over
the network yet; the platform side, the OneBot transports and the HTTP API attach here.
"""

from __future__ import annotations

import asyncio
import signal

import structlog

from gensokyo_idmap.config import Config
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.msgid import MsgIdMap
from gensokyo_idmap.store.lmdb_identity import LmdbIdentityStore
from gensokyo_idmap.store.lmdb_msgid import LmdbMsgIdStore, open_msgid_store

__all__ = ["run_daemon"]

log = structlog.get_logger("gensokyo_idmap.app")


async def _migrate_if_found(
    config: Config, store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore
) -> None:
    """DESIGN §6: an old idmap.db is migrated before anything else happens (blocking)."""
    legacy = config.legacy_db_path
    if legacy is None or not legacy.is_file():
        return
    from migrate.legacy import MARKER, migrate_legacy

    with store.read() as view:
        if view.get_meta(MARKER) is not None:
            return  # migrated before: the old file is never read again

    def progress(stage: str, count: int) -> None:
        log.info("[migrate] progress", stage=stage, entries=count)

    await asyncio.to_thread(
        migrate_legacy, legacy, store, msgid_store, config.bot.app_id, progress=progress
    )


async def run_daemon(config: Config, stop: asyncio.Event | None = None) -> None:
    """Run until SIGINT/SIGTERM (or ``stop`` is set)."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    store = LmdbIdentityStore(
        config.identity_db_path, map_size=config.idmap.map_size_mb * 1024 * 1024
    )
    try:
        msgid_store = open_msgid_store(config.msgid_db_path)
    except BaseException:
        store.close()
        raise
    try:
        await _migrate_if_found(config, store, msgid_store)
    except BaseException:
        msgid_store.close()
        store.close()
        raise
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    sweeper: asyncio.Task[None] | None = None
    try:
        graph = IdentityGraph(store)
        msgids = MsgIdMap(msgid_store, ttl_seconds=config.idmap.msgid_ttl_seconds)
        with store.read() as view:
            counts = view.counts()
        log.info(
            "[idmap] store open",
            path=str(config.identity_db_path),
            identities=counts.identities,
            vuins=counts.vuins,
            app_id=config.bot.app_id or None,
        )
        log.info(
            "[idmap] msgid store open",
            path=str(config.msgid_db_path),
            entries=msgids.counts().live_or_unswept,
            ttl_seconds=config.idmap.msgid_ttl_seconds,
        )
        sweeper = asyncio.create_task(
            msgids.run_sweeper(stop, config.idmap.msgid_sweep_interval_seconds)
        )
        log.info(
            "[app] ready",
            listeners="none yet: platform and OneBot transports are not built in this release",
            cli="gensokyo-idmap identity --help",
        )
        del graph
        await stop.wait()
        log.info("[app] stopping")
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        if sweeper is not None:
            stop.set()
            await sweeper
        msgid_store.close()
        store.close()
        log.info("[app] stopped")
