"""The files of the data dir, named in one place.

Every module that opens, checks, moves or reports one of these files takes its name from
here (or a path from :class:`DataDir`), so a rename is one edit and the fault tests, the
recoveries and the daemon can never disagree about what lives in the directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["GATEWAY_STATE", "IDENTITY_DB", "LEGACY_DB", "MSGID_DB", "OUTBOX_DB",
           "SERVE_LOCK", "STORES_RECORD", "DataDir"]

#: The identity graph (precious: never created afresh once it existed).
IDENTITY_DB: Final = "openid-map.db"
#: Virtual message ids (disposable).
MSGID_DB: Final = "msgid-map.db"
#: Events owed to frameworks (precious).
OUTBOX_DB: Final = "outbox.db"
#: The Go daemon's idmap.db, migrated from once.
LEGACY_DB: Final = "idmap.db"
#: The gateway's session and last seq, for a Resume after a restart.
GATEWAY_STATE: Final = "gateway-session.json"
#: Which precious stores this data dir has held.
STORES_RECORD: Final = "stores.json"
#: Held by ``serve`` while it runs: one daemon per data dir.
SERVE_LOCK: Final = "serve.lock"


@dataclass(frozen=True, slots=True)
class DataDir:
    """The paths of one data dir's files."""

    root: Path

    @property
    def identity_db(self) -> Path:
        return self.root / IDENTITY_DB

    @property
    def msgid_db(self) -> Path:
        return self.root / MSGID_DB

    @property
    def outbox_db(self) -> Path:
        return self.root / OUTBOX_DB

    @property
    def legacy_db(self) -> Path:
        return self.root / LEGACY_DB

    @property
    def gateway_state(self) -> Path:
        return self.root / GATEWAY_STATE

    @property
    def stores_record(self) -> Path:
        return self.root / STORES_RECORD

    @property
    def serve_lock(self) -> Path:
        return self.root / SERVE_LOCK
