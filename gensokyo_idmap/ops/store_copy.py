"""Moving the identity graph between backends: ``store copy``, and ``backup`` / ``verify``
of a PostgreSQL graph (docs/stores.md, "Moving data between backends").

A copy reads the whole source from one snapshot (:class:`GraphRows`), names every record
the target could not hold (:func:`graph_rows.uncarriable`) and then either writes nothing
(``refused``: the report lists them all) or writes everything in one transaction into an
empty target (``copied``). The two formats:

- openid-map.db (LMDB): read raw through a read-only handle, so it may be the daemon's
  live file or a backup; written through :class:`LmdbIdentityStore` into a new file.
- PostgreSQL: :mod:`gensokyo_idmap.store.postgres.copy` (``COPY``, one transaction, one snapshot).

A PostgreSQL graph's backup is an openid-map.db file: the one format every backup has, so
``verify FILE`` checks it and ``store copy --from FILE --to postgres`` restores it (or the
file is used as it is by an LMDB daemon).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lmdb

from gensokyo_idmap.errors import ConflictError, StoreError
from gensokyo_idmap.ops.lmdb_files import (
    KNOWN_SCHEMA_VERSIONS,
    BackupResult,
    check_dest,
    open_readonly,
    verify_store,
)
from gensokyo_idmap.ops.verify import GraphSnapshot, VerifyReport, check_graph
from gensokyo_idmap.store.base import MIGRATION_MARKER, LastSeen
from gensokyo_idmap.store.graph_rows import GraphRows, Uncarried, uncarriable
from gensokyo_idmap.store.lmdb.codec import decode_u64, decode_value, encode_u64, encode_value
from gensokyo_idmap.store.lmdb.identity import TABLES, LmdbIdentityStore, LmdbView
from gensokyo_idmap.store.lmdb.opening import begin_read, fsync_path, lock_path

__all__ = ["CopyReport", "backup_postgres", "copy_graph", "read_lmdb_rows", "verify_postgres",
           "write_lmdb_rows"]


@dataclass(slots=True)
class CopyReport:
    """What a copy read, wrote, and could not carry (``refused``: then it wrote nothing)."""

    source: str
    target: str
    status: str = "copied"  # copied | refused
    read: dict[str, int] = field(default_factory=dict)
    written: dict[str, int] = field(default_factory=dict)
    uncarried: list[Uncarried] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "copied"

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "status": self.status,
                "read": self.read, "written": self.written,
                "uncarried": [u.to_json() for u in self.uncarried],
                "seconds": round(self.seconds, 3)}

    def lines(self) -> list[str]:
        rows = sum(self.read.values())
        rate = f", {rows / self.seconds:,.0f} rows/s" if self.seconds > 0 and rows else ""
        out = [f"source        {self.source}", f"target        {self.target}",
               f"status        {self.status}"
               + (" (nothing was written)" if not self.ok else "")]
        out += [f"{table:<17} read {self.read.get(table, 0):>9}  written "
                f"{self.written.get(table, 0):>9}" for table in self.read]
        out.append(f"not carried   {len(self.uncarried)}")
        out += [f"  {u.table} {u.record}: {u.reason}" for u in self.uncarried]
        out.append(f"seconds       {self.seconds:.3f}{rate}")
        return out


def copy_graph(read: Callable[[], GraphRows], write: Callable[[GraphRows], dict[str, int]],
               source: str, target: str) -> CopyReport:
    """Read the source whole, then write it all or nothing (see the module)."""
    started = time.perf_counter()
    rows = read()
    report = CopyReport(source, target, read=_counts(rows))
    report.uncarried = uncarriable(rows)
    if report.uncarried:
        report.status = "refused"
    else:
        report.written = write(rows)
    report.seconds = time.perf_counter() - started
    return report


def _counts(rows: GraphRows) -> dict[str, int]:
    counts = rows.counts()
    counts["meta"] = len(rows.graph_meta())
    return counts


# --- openid-map.db ---------------------------------------------------------------------------


def _shown(raw: bytes) -> str:
    try:
        return repr(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return "0x" + raw.hex()


def read_lmdb_rows(path: Path) -> GraphRows:
    """Every row of the openid-map.db at ``path`` from one read transaction, through a
    read-only handle (safe beside a running daemon). Entries that do not decode go to
    ``unreadable``."""
    rows = GraphRows()
    bad = rows.unreadable.append
    try:
        with open_readonly(path) as env, begin_read(env) as txn:
            tables: dict[str, list[tuple[bytes, bytes]]] = {}
            for table in TABLES:
                try:
                    db = env.open_db(table.name, txn=txn, create=False, dupsort=table.dupsort)
                except lmdb.NotFoundError:
                    tables[table.attr] = []
                    continue
                tables[table.attr] = [(bytes(k), bytes(v)) for k, v in txn.cursor(db)]
    except lmdb.Error as exc:
        raise StoreError(f"cannot read {path}: {exc}") from exc
    for name, raw in tables["meta"]:
        try:
            rows.meta[name.decode("utf-8")] = decode_value(raw)
        except Exception:  # noqa: BLE001 - any undecodable entry is reported, not carried
            bad(Uncarried("meta", _shown(name), "the value does not decode"))
    for key, value in tables["identity_to_vuin"]:
        try:
            rows.identities.append((key.decode("utf-8"), _u64(value)))
        except ValueError:
            bad(Uncarried("identity_to_vuin", _shown(key), "not UTF-8 text → 8-byte vUIN"))
    for vuin, key in tables["vuin_to_identity"]:
        try:
            rows.sets.append((_u64(vuin), key.decode("utf-8")))
        except ValueError:
            bad(Uncarried("vuin_to_identity", "0x" + vuin.hex(), "not 8-byte vUIN → UTF-8"))
    for key, value in tables["last_seen"]:
        try:
            identity, since = decode_value(value)
            if not isinstance(identity, str) or not isinstance(since, int | float):
                raise ValueError("not [identity, since]")
            rows.last_seen.append((_u64(key[:8]), key[8:].decode("utf-8"),
                                   LastSeen(identity, float(since))))
        except Exception:  # noqa: BLE001 - any undecodable entry is reported, not carried
            bad(Uncarried("last_seen", "0x" + key.hex(), "not vUIN+scene → [identity, since]"))
    for old, new in tables["vuin_alias"]:
        try:
            rows.aliases.append((_u64(old), _u64(new)))
        except ValueError:
            bad(Uncarried("vuin_alias", "0x" + old.hex(), "not a pair of 8-byte vUINs"))
    rows.config = tables["config"]
    rows.user_info = tables["user_info"]
    return rows


def _u64(raw: bytes) -> int:
    if len(raw) != 8:
        raise ValueError(f"{len(raw)} bytes, not 8")
    return decode_u64(raw)


def write_lmdb_rows(path: Path, rows: GraphRows) -> dict[str, int]:
    """Write ``rows`` into the openid-map.db at ``path`` (created; an existing one must be
    empty) in one transaction, durable on return; the rows each table then holds."""
    def fill(view: LmdbView) -> dict[str, int]:
        counts, legacy = view.counts(), view.legacy_counts()
        if (counts.identities or counts.aliases or counts.last_seen or legacy.config
                or legacy.user_info or view.get_meta(MIGRATION_MARKER) is not None):
            raise ConflictError(f"{path} is not empty ({counts.identities} identities): a "
                                "copy goes into an empty store only, so nothing was written")
        for key, vuin in rows.identities:
            view.set_vuin(key, vuin)
        for vuin, key in rows.sets:
            view.add_identity(vuin, key)
        for vuin, scene, seen in rows.last_seen:
            view.set_last_seen(vuin, scene, seen)
        for old, new in rows.aliases:
            view.set_alias(old, new)
        for raw, value in rows.config:
            view.put_config(raw, value)
        for raw, value in rows.user_info:
            view.put_user_info(raw, value)
        for name, value in rows.graph_meta().items():
            if name != "vuin_counter":
                view.set_meta(name, value)
        view.set_vuin_counter(rows.vuin_counter)
        return {}

    store = LmdbIdentityStore(path)
    try:
        store.transact(fill)
    finally:
        store.close()
    return _counts(read_lmdb_rows(path))


# --- a PostgreSQL graph: verify and backup ---------------------------------------------------


def snapshot_of(rows: GraphRows) -> GraphSnapshot:
    """``rows`` in openid-map.db's encoding, for the graph checks of :mod:`ops.verify`."""
    return GraphSnapshot(
        meta={name.encode("utf-8"): encode_value(value) for name, value in rows.meta.items()},
        forward=[(k.encode("utf-8"), encode_u64(v)) for k, v in rows.identities],
        reverse=[(encode_u64(v), k.encode("utf-8")) for v, k in rows.sets],
        aliases=[(encode_u64(o), encode_u64(n)) for o, n in rows.aliases],
        last_seen=[(encode_u64(v) + s.encode("utf-8"), encode_value([seen.identity, seen.since]))
                   for v, s, seen in rows.last_seen])


def verify_postgres(dsn: str, schema: str | None = None) -> VerifyReport:
    """Every graph invariant ``verify`` checks on openid-map.db, on the PostgreSQL graph
    (one snapshot). Its schema version is checked by its migrations instead (reading
    refuses one this gensokyo-idmap does not know)."""
    from gensokyo_idmap.store.postgres.connect import describe
    from gensokyo_idmap.store.postgres.copy import read_rows

    rows = read_rows(dsn, schema)
    violations = [v for v in check_graph(snapshot_of(rows), KNOWN_SCHEMA_VERSIONS)
                  if v.kind != "schema_version"]
    counts = {"identities": len(rows.identities), "vuins": len({v for v, _ in rows.sets}),
              "aliases": len(rows.aliases), "last_seen": len(rows.last_seen)}
    return VerifyReport(describe(dsn), tuple(violations), counts)


def backup_postgres(dsn: str, dest: Path, *, force: bool = False,
                    schema: str | None = None) -> BackupResult:
    """The PostgreSQL graph (one snapshot) as a new openid-map.db at ``dest``, written
    beside it under a temporary name, verified, and only then renamed into place (as the
    LMDB backup)."""
    from gensokyo_idmap.store.postgres.connect import describe
    from gensokyo_idmap.store.postgres.copy import read_rows

    target = check_dest(dest, force)
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    try:
        rows = read_rows(dsn, schema)
        problems = uncarriable(rows)
        if problems:
            shown = "; ".join(f"{p.table} {p.record}: {p.reason}" for p in problems[:5])
            raise StoreError(f"{len(problems)} record(s) of the graph cannot go into a "
                             f"backup file, none was written: {shown}")
        write_lmdb_rows(partial, rows)
        fsync_path(partial)
        verify = verify_store(partial)
        lock_path(partial).unlink(missing_ok=True)
        if verify.ok:
            check_dest(dest, force)  # nothing else took the name meanwhile
            os.replace(partial, target)
            fsync_path(target.parent)
        size = target.stat().st_size if verify.ok else partial.stat().st_size
    except OSError as exc:
        raise StoreError(f"backup of {describe(dsn)} to {dest} failed: {exc.strerror}") from exc
    finally:
        partial.unlink(missing_ok=True)
        lock_path(partial).unlink(missing_ok=True)
    shown_as = str(dest) if verify.ok else describe(dsn)
    report = VerifyReport(shown_as, verify.violations, verify.counts)
    return BackupResult(describe(dsn), str(dest), size, 0, report, written=verify.ok)
