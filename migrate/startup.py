"""The daemon's start-up migration: an old idmap.db found in the data dir is migrated
before anything else happens, once.

The daemon (``app.run_daemon``) does not know migration: the CLI's ``serve`` hands this
function in as the preparation of the freshly opened stores, so the package never imports
``migrate`` and a daemon built without it simply never reads an old file.

The reader of old files (:mod:`migrate.legacy`, :mod:`migrate.bbolt`) is imported only when
there is one to migrate: most starts find none, and it need not sit in every daemon's memory.
"""

from __future__ import annotations

import asyncio

from gensokyo_idmap.config import Config
from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore
from gensokyo_idmap.store.base import MIGRATION_MARKER, IdentityStore
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore

__all__ = ["migrate_if_found"]


async def migrate_if_found(
    config: Config, store: IdentityStore, msgid_store: LmdbMsgIdStore
) -> None:
    """Migrate ``idmap.legacy_db`` when it is there and no migration happened before
    (blocking the start: in a worker thread, the loop serving nothing yet). Into a
    PostgreSQL graph the daemon does not migrate (``gensokyo-idmap migrate`` does, with the
    same --config): the start is refused, rather than the old identities silently left
    behind."""
    legacy = config.legacy_db_path
    if legacy is None or not legacy.is_file():
        return
    with store.read() as view:
        if view.get_meta(MIGRATION_MARKER) is not None:
            return  # migrated before: the old file is never read again
    if not isinstance(store, LmdbIdentityStore):
        raise BadInputError(
            "idmap.legacy_db", str(legacy),
            "an old idmap.db is here, and the daemon does not migrate into PostgreSQL by "
            "itself: run `gensokyo-idmap --config <this file> migrate` first (it migrates "
            "into the PostgreSQL graph), or set idmap.legacy_db to \"\" to start without it")
    from migrate.legacy import migrate_legacy
    from migrate.progress import LogProgress

    await asyncio.to_thread(
        migrate_legacy, legacy, store, msgid_store, config.bot.app_id, progress=LogProgress()
    )
