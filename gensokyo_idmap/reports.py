"""JSON shapes of graph and message-id results: one shape for ``--json`` and the HTTP API.

Pure functions from result objects to plain dicts; the CLI prints them, the HTTP API sends
them, so a script written against one reads the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gensokyo_idmap.identity import openid_prefix
from gensokyo_idmap.idmap import BindResult, IdentityGraph, RebindResult, Resolution, VuinView
from gensokyo_idmap.runtime.base import MsgRecord
from gensokyo_idmap.runtime.msgid import MessageIds
from gensokyo_idmap.store.base import MIGRATION_MARKER, legacy_counts
from gensokyo_idmap.tables import TableFigures

__all__ = [
    "bind_data",
    "bots_data",
    "memory_data",
    "rebind_data",
    "record_data",
    "resolution_data",
    "stats_data",
    "vuin_data",
]


def resolution_data(result: Resolution) -> dict[str, Any]:
    return {"vuin": result.vuin, "created": result.created, "added": list(result.added),
            "conflicts": [{"key": k, "vuin": v} for k, v in result.conflicts]}


def vuin_data(view: VuinView) -> dict[str, Any]:
    return {
        "vuin": view.vuin,
        "requested": view.requested,
        "identities": list(view.identities),
        "last_seen": {scene: {"identity": s.identity, "since": s.since}
                      for scene, s in view.last_seen},
        "aliases": list(view.aliases),
    }


def bind_data(result: BindResult) -> dict[str, Any]:
    return {"outcome": result.outcome, "key": result.key, "vuin": result.vuin,
            "previous": result.previous, "reason": result.reason, "aliased": result.aliased}


def rebind_data(result: RebindResult) -> dict[str, Any]:
    return {"outcome": result.outcome, "old": result.old, "new": result.new,
            "moved": list(result.moved), "reason": result.reason}


def record_data(record: MsgRecord) -> dict[str, Any]:
    return {"virtual_id": record.virtual_id, "real_id": record.real_id, "app_id": record.app_id,
            "chat_kind": record.chat_kind, "target": record.target,
            "direction": record.direction, "created_ms": record.created_ms,
            "expires_ms": record.expires_ms}


def stats_data(graph: IdentityGraph, identity_path: Path | str, msgids: MessageIds | None,
               msgid_path: Path) -> dict[str, Any]:
    """Counts per table, file sizes, schema version, counters and the migration marker.

    ``identity_path`` is openid-map.db, or where a graph that is no file is (a PostgreSQL
    URL, no password): then ``bytes`` is None. ``msgids`` None: msgid-map.db does not exist
    yet (the daemon creates it at start; the CLI's read-only ``stats`` does not), shown as
    ``"exists": false``.
    """
    with graph.store.read() as view:
        counts = view.counts()
        schema = view.get_meta("schema_version")
        marker = view.get_meta(MIGRATION_MARKER)
        counter = view.vuin_counter()
    legacy = legacy_counts(graph.store)
    msgid_map: dict[str, Any] = {"path": str(msgid_path), "exists": msgids is not None}
    if msgids is not None:
        msg_counts = msgids.counts()
        msgid_map.update({
            "bytes": msgid_path.stat().st_size,
            # opened with writemap the file is as long as its map, but sparse
            "bytes_on_disk": msgid_path.stat().st_blocks * 512,
            "entries": msg_counts.live_or_unswept, "counter": msg_counts.counter})
    return {
        "openid_map": {"path": str(identity_path),
                       "bytes": identity_path.stat().st_size
                       if isinstance(identity_path, Path) else None,
                       "schema_version": schema, "vuin_counter": counter,
                       "identities": counts.identities, "vuins": counts.vuins,
                       "last_seen": counts.last_seen, "aliases": counts.aliases,
                       "config": legacy.config, "user_info": legacy.user_info,
                       "migrated_from_legacy": marker},
        "msgid_map": msgid_map,
    }


def bots_data(graph: IdentityGraph, served: Sequence[tuple[str, int | None]]
              ) -> dict[str, Any]:
    """Per AppID, how many OpenIDs (users and groups) the graph holds of it: first each bot
    ``served`` ((AppID, self_id), in the config's order), then every other AppID the graph
    has OpenIDs of, in order (a bot removed from the config keeps its identities), each
    with ``served`` false and no ``self_id``. One walk of the OpenID keys."""
    counts: dict[str, int] = {}
    prefix = openid_prefix("").removesuffix(":")  # openid:QQ: (then AppID, ":", OpenID)
    with graph.store.read() as view:
        for key, _ in view.iter_identities(prefix):
            app_id = key[len(prefix):].partition(":")[0]
            counts[app_id] = counts.get(app_id, 0) + 1
    bots: dict[str, Any] = {app_id: {"served": True, "self_id": self_id,
                                     "openids": counts.pop(app_id, 0)}
                            for app_id, self_id in served}
    bots.update({app_id: {"served": False, "self_id": None, "openids": n}
                 for app_id, n in sorted(counts.items())})
    return bots


def memory_data(rss: tuple[int | None, int | None],
                tables: Sequence[TableFigures]) -> dict[str, Any]:
    """``/v1/stats``'s ``memory``: the resident memory, anonymous and file-backed (None
    where the system does not say), and each in-memory table's entries and estimated bytes
    (:mod:`gensokyo_idmap.tables`)."""
    anon, file = rss
    return {"rss_anon_bytes": anon, "rss_file_bytes": file,
            "tables": [{"name": table.name, "entries": table.entries, "bytes": table.bytes}
                       for table in tables]}
