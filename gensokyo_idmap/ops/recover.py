"""Recoveries (docs/stores.md, failure and recovery): reset the disposable msgid-map.db,
re-migrate openid-map.db from the old idmap.db, start an empty outbox.db in place of one that
is refused.

Neither runs while another process (the daemon) has the file open, and neither deletes a
store: the file it replaces is moved aside under a timestamped name. A failed re-migration
puts the old file back, so a refused or broken recovery leaves things as they were.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import structlog

from gensokyo_idmap.data_dir import IDENTITY_DB, MSGID_DB, OUTBOX_DB
from gensokyo_idmap.errors import BadInputError, ConflictError, IdmapError, StoreError
from gensokyo_idmap.identity import check_app_id
from gensokyo_idmap.ops.lmdb_files import (
    held_by_another_process,
    lock_path,
    move_aside,
    owed_per_sink,
)
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore, open_msgid_store
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.store.lmdb.outbox import LmdbOutboxStore

__all__ = ["IdentityRecovery", "Migration", "MigrationSummary", "MsgIdReset", "OutboxReset",
           "recover_identities", "reset_msgids", "reset_outbox"]

#: What each recovery did is logged at info: the command that ran it prints the same as its
#: result (a warning would print every path twice on the terminal).
log = structlog.get_logger("gensokyo_idmap.ops")


def _refuse_if_open(*paths: Path) -> None:
    for path in paths:
        if held_by_another_process(path):
            raise ConflictError(f"{path} is open in another process (is the daemon running?); "
                                "stop it first")


@dataclass(frozen=True, slots=True)
class MsgIdReset:
    path: str
    moved_to: str | None
    counter: int  # carried over, so numbers clients still hold are not handed out again

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "moved_to": self.moved_to, "counter": self.counter}


def _old_msg_counter(path: Path) -> int:
    """The allocation counter of the old file, or 0 when it cannot be read."""
    try:
        store = LmdbMsgIdStore(path)
    except Exception:  # noqa: BLE001 - damaged: that is why it is being reset
        return 0
    try:
        with store.read() as view:
            return view.msg_counter()
    except Exception:  # noqa: BLE001 - as above: whatever is wrong, the count starts at 0
        return 0
    finally:
        store.close()


def reset_msgids(data_dir: Path, clock: Callable[[], float] = time.time) -> MsgIdReset:
    """Move msgid-map.db aside and start an empty one (reply context is lost, never ids)."""
    path = data_dir / MSGID_DB
    _refuse_if_open(path)
    counter = 0
    moved: Path | None = None
    if path.exists():
        counter = _old_msg_counter(path)
        moved = move_aside(path, "reset", clock)
        lock_path(path).unlink(missing_ok=True)
    store = open_msgid_store(path)
    try:
        if counter:
            store.write_sync(lambda view: view.set_msg_counter(counter))
    finally:
        store.close()
    log.info("[idmap] msgid-map.db reset", path=str(path),
             moved_to=str(moved) if moved else None, counter=counter)
    return MsgIdReset(str(path), str(moved) if moved else None, counter)


class MigrationSummary(Protocol):
    """What a migration reports (``migrate.legacy.MigrationReport``)."""

    legacy_path: str

    def to_json(self) -> dict[str, Any]: ...
    def summary_lines(self) -> list[str]: ...


#: Migrates an old idmap.db into the stores for an AppID, all or nothing. The CLI hands in
#: ``migrate.legacy.migrate_legacy``: ops/ never imports ``migrate``, which imports the
#: package (so the two never form a cycle).
Migration = Callable[[Path, LmdbIdentityStore, LmdbMsgIdStore, str], MigrationSummary]


@dataclass(frozen=True, slots=True)
class IdentityRecovery:
    path: str
    moved_to: str | None
    report: MigrationSummary

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "moved_to": self.moved_to, "migration": self.report.to_json()}


def recover_identities(data_dir: Path, legacy: Path, app_id: str | None, migrate: Migration,
                       clock: Callable[[], float] = time.time) -> IdentityRecovery:
    """Move openid-map.db aside and ``migrate`` ``legacy`` into a fresh one (all or
    nothing)."""
    if not app_id:
        raise BadInputError("--app-id", None, "the AppID the old OpenIDs belong to is needed")
    check_app_id(app_id, "--app-id")
    if not legacy.is_file():
        raise BadInputError("--from-legacy", str(legacy),
                            "no such file: recovery re-migrates from the old idmap.db")
    path = data_dir / IDENTITY_DB
    msgid_path = data_dir / MSGID_DB
    _refuse_if_open(path, msgid_path)
    moved = move_aside(path, "before-recover", clock) if path.exists() else None
    try:
        store = LmdbIdentityStore(path, recreate=True)  # on purpose: that is the recovery
        try:
            msgid_store = open_msgid_store(msgid_path)
            try:
                report = migrate(legacy, store, msgid_store, app_id)
            finally:
                msgid_store.close()
        finally:
            store.close()
    except BaseException as exc:
        path.unlink(missing_ok=True)
        if moved is not None:
            moved.replace(path)
        log.error("[idmap] recovery failed; the previous openid-map.db is back in place",
                  path=str(path), reason=exc.message if isinstance(exc, IdmapError) else
                  f"{type(exc).__name__}: {exc}")
        if isinstance(exc, IdmapError | KeyboardInterrupt):
            raise
        raise StoreError(f"recovery failed: {type(exc).__name__}: {exc}") from exc
    log.info("[idmap] openid-map.db re-migrated from the legacy file", path=str(path),
             legacy=str(legacy), moved_to=str(moved) if moved else None)
    return IdentityRecovery(str(path), str(moved) if moved else None, report)


@dataclass(frozen=True, slots=True)
class OutboxReset:
    path: str
    moved_to: str | None
    reason: str  # why the old one could not serve

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "moved_to": self.moved_to, "reason": self.reason}


def reset_outbox(data_dir: Path, clock: Callable[[], float] = time.time) -> OutboxReset:
    """Start an empty outbox.db in place of one that is refused (missing after use, empty,
    damaged): the events it owed are lost, and that is what this command accepts.

    A whole outbox.db is left alone (it may owe events: the daemon sends them when the
    frameworks come back). A damaged one is moved aside, never deleted.
    """
    path = data_dir / OUTBOX_DB
    _refuse_if_open(path)
    try:
        owed = owed_per_sink(path)
    except StoreError as exc:
        reason = exc.message
    else:
        if path.exists():
            raise ConflictError(
                f"{path} is whole ({sum(owed.values())} events owed): nothing to recover")
        reason = f"{path} is missing"
    moved = move_aside(path, "before-reset", clock) if path.exists() else None
    lock_path(path).unlink(missing_ok=True)
    LmdbOutboxStore(path, recreate=True).close()
    log.info("[idmap] outbox.db started empty: the events it owed are lost", path=str(path),
             moved_to=str(moved) if moved else None, reason=reason)
    return OutboxReset(str(path), str(moved) if moved else None, reason)
