"""Child process for tests/crash/test_migration_crash.py: migrate one legacy file, once.

    python tests/crash/migration_child.py LEGACY DATADIR APPID

Opens ``DATADIR/openid-map.db`` and ``DATADIR/msgid-map.db`` as the daemon does and runs
:func:`migrate.legacy.migrate_legacy` on ``LEGACY`` with the AppID ``APPID``. It plays a
daemon start that the parent kills (SIGKILL) at a random moment.

Stdout carries nothing but phase lines ``<phase> <time.monotonic()>``, each written with a
single ``os.write`` so that a line is either printed whole or not at all:

- ``imported T``: the modules are loaded (before that, the kill hits the interpreter start),
- ``opened T``: both stores are open; the migration starts right after,
- ``migrated T <status>``: ``migrate_legacy`` returned (its transaction is committed),
- ``closed T``: both stores are closed; the process exits right after.

``time.monotonic()`` is CLOCK_MONOTONIC on Linux, the same clock in every process, so the
parent can place its kill times inside the migration window of an earlier run. Logs go to
stderr (warnings and up only).
"""

from __future__ import annotations

import os
import sys
import time


def _emit(*parts: object) -> None:
    data = (" ".join(str(p) for p in parts) + "\n").encode()
    while data:
        written = os.write(1, data)
        data = data[written:]


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    legacy, data_dir, app_id = argv

    import logging
    from pathlib import Path

    import structlog

    from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
    from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore
    from migrate.legacy import migrate_legacy

    structlog.configure(
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
    )
    _emit("imported", time.monotonic())
    root = Path(data_dir)
    identity = LmdbIdentityStore(root / "openid-map.db")
    try:
        msgid = LmdbMsgIdStore(root / "msgid-map.db")
        try:
            _emit("opened", time.monotonic())
            report = migrate_legacy(legacy, identity, msgid, app_id)
            _emit("migrated", time.monotonic(), report.status)
        finally:
            msgid.close()
    finally:
        identity.close()
    _emit("closed", time.monotonic())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
