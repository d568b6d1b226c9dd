"""The whole identity graph as rows, whichever backend held it: what ``store copy``,
``backup`` and ``verify`` move between openid-map.db (LMDB) and PostgreSQL.

Pure: reading and writing a backend is the job of :mod:`gensokyo_idmap.ops.store_copy`
(LMDB) and :mod:`.postgres.copy` (PostgreSQL). :func:`uncarriable` says which rows a
target could not hold as they are (a NUL in a key, a scene too long, a forward entry whose
vUIN's set does not list it back …), so a copy is refused whole, naming each of them,
rather than half carried or stopped by the database half way.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from gensokyo_idmap.identity import MAX_KEY_BYTES, MAX_SCENE_BYTES, MAX_VUIN
from gensokyo_idmap.store.base import LastSeen

__all__ = ["TABLES", "GraphRows", "Uncarried", "uncarriable"]

#: The tables a copy carries, in the order it reports them (PostgreSQL's names; LMDB calls
#: ``user_info`` ``UserInfo``).
TABLES: Final = ("meta", "identity_to_vuin", "vuin_to_identity", "last_seen", "vuin_alias",
                 "config", "user_info")
#: ``meta`` entries that describe one backend's file, not the graph: never carried
#: (PostgreSQL records its schema in ``schema_migrations``).
BACKEND_META: Final = frozenset({"schema_version"})


@dataclass(frozen=True, slots=True)
class Uncarried:
    """One record a copy could not carry, and why."""

    table: str
    record: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"table": self.table, "record": self.record, "reason": self.reason}


@dataclass(slots=True)
class GraphRows:
    """Every row of the graph's tables, read from one snapshot. ``unreadable`` holds what
    the reader found but could not decode (it is never carried)."""

    meta: dict[str, Any] = field(default_factory=dict)
    identities: list[tuple[str, int]] = field(default_factory=list)
    sets: list[tuple[int, str]] = field(default_factory=list)
    last_seen: list[tuple[int, str, LastSeen]] = field(default_factory=list)
    aliases: list[tuple[int, int]] = field(default_factory=list)
    config: list[tuple[bytes, bytes]] = field(default_factory=list)
    user_info: list[tuple[bytes, bytes]] = field(default_factory=list)
    unreadable: list[Uncarried] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Rows per table (:data:`TABLES`), the unreadable ones not counted."""
        return {"meta": len(self.meta), "identity_to_vuin": len(self.identities),
                "vuin_to_identity": len(self.sets), "last_seen": len(self.last_seen),
                "vuin_alias": len(self.aliases), "config": len(self.config),
                "user_info": len(self.user_info)}

    def graph_meta(self) -> dict[str, Any]:
        """The ``meta`` entries a copy carries (:data:`BACKEND_META` left out)."""
        return {name: value for name, value in self.meta.items() if name not in BACKEND_META}

    @property
    def vuin_counter(self) -> int:
        value = self.meta.get("vuin_counter", 0)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _text_problem(text: str, limit: int, what: str) -> str | None:
    if "\x00" in text:
        return f"{what} holds a NUL character, which PostgreSQL text cannot"
    size = len(text.encode("utf-8"))
    if not 0 < size <= limit:
        return f"{what} is {size} bytes; 1 to {limit} fit"
    return None


def _vuin_problem(*numbers: int) -> str | None:
    for number in numbers:
        if not 0 < number <= MAX_VUIN:
            return f"{number} is not a vUIN (1..{MAX_VUIN})"
    return None


def _row_problems(rows: GraphRows) -> Iterator[Uncarried]:
    """What no backend can hold, row by row (pairs are :func:`uncarriable`'s)."""
    for name, value in rows.graph_meta().items():
        problem = _text_problem(name, MAX_KEY_BYTES, "the name")
        if problem is None:
            try:
                json.dumps(value, allow_nan=False)
            except (TypeError, ValueError):
                problem = "the value is not JSON (PostgreSQL keeps meta as jsonb)"
        if problem is not None:
            yield Uncarried("meta", name, problem)
    for key, vuin in rows.identities:
        problem = _text_problem(key, MAX_KEY_BYTES, "the key") or _vuin_problem(vuin)
        if problem is not None:
            yield Uncarried("identity_to_vuin", f"{key!r} → {vuin}", problem)
    for vuin, key in rows.sets:
        problem = _text_problem(key, MAX_KEY_BYTES, "the key") or _vuin_problem(vuin)
        if problem is not None:
            yield Uncarried("vuin_to_identity", f"{vuin} ∋ {key!r}", problem)
    for vuin, scene, seen in rows.last_seen:
        problem = (_vuin_problem(vuin) or _text_problem(scene, MAX_SCENE_BYTES, "the scene")
                   or _text_problem(seen.identity, MAX_KEY_BYTES, "the identity"))
        if problem is not None:
            yield Uncarried("last_seen", f"{vuin} in {scene!r}", problem)
    for old, new in rows.aliases:
        problem = _vuin_problem(old, new) or ("an alias of itself" if old == new else None)
        if problem is not None:
            yield Uncarried("vuin_alias", f"{old} → {new}", problem)
    for table, entries in (("config", rows.config), ("user_info", rows.user_info)):
        for raw, _value in entries:
            if not 0 < len(raw) <= MAX_KEY_BYTES:
                yield Uncarried(table, raw.hex(), f"the key is {len(raw)} bytes; 1 to "
                                f"{MAX_KEY_BYTES} fit")


def uncarriable(rows: GraphRows) -> list[Uncarried]:
    """Every record of ``rows`` that a copy could not carry as it is (empty: all of them).

    Besides each row's own limits, the two directions of the graph must pair up: PostgreSQL
    holds ``identity_to_vuin`` and ``vuin_to_identity`` to be exact inverses (idmap.py rule
    2), so a forward entry whose vUIN's set lacks it, or a set member pointing elsewhere,
    would fail the whole transaction at commit; here it is named instead.
    """
    found = list(rows.unreadable)
    found.extend(_row_problems(rows))
    bad_forward = {r.record for r in found if r.table == "identity_to_vuin"}
    bad_sets = {r.record for r in found if r.table == "vuin_to_identity"}
    forward = {key: vuin for key, vuin in rows.identities
               if f"{key!r} → {vuin}" not in bad_forward}
    members = {(vuin, key) for vuin, key in rows.sets if f"{vuin} ∋ {key!r}" not in bad_sets}
    for key, vuin in forward.items():
        if (vuin, key) not in members:
            found.append(Uncarried("identity_to_vuin", f"{key!r} → {vuin}",
                                   f"vUIN {vuin}'s set does not list it"))
    for vuin, key in sorted(members):
        if forward.get(key) != vuin:
            points = forward.get(key)
            where = "nothing" if points is None else f"vUIN {points}"
            found.append(Uncarried("vuin_to_identity", f"{vuin} ∋ {key!r}",
                                   f"the key points at {where}"))
    return found
