"""Every invariant of the identity graph, checked over a raw snapshot of openid-map.db (pure).

The snapshot holds the tables' raw bytes (``lmdb_files.read_snapshot`` takes it in one read
transaction); decoding happens here, so a value of the wrong shape is a finding, not a crash.
What must hold (docs/stores.md, docs/identities.md, the rules block of ``idmap.py``):

1. ``identity_to_vuin`` and ``vuin_to_identity`` are exact inverses: every forward key is in
   the set of its vUIN, every set member points back at that vUIN (so no identity sits in
   two sets).
2. A vUIN names one person: a number is either an identity set or an alias, never both.
3. Aliases end at a live vUIN (one with identities), without loops, within the hop limit
   the reverse path follows.
4. ``last_seen`` entries name an identity of their own vUIN.
5. ``meta.vuin_counter`` is an integer from 0 to MAX_VUIN. It need not reach the highest
   vUIN in use: allocation starts above the counter and skips every number that has an
   identity set or is an alias (``idmap.allocate_vuin``), so a bind or rebind to a number
   far above the counter (a real QQ number, say) is sound, and nothing is ever handed out
   twice however low the counter is.
6. ``meta.schema_version`` is one this code knows; every key is a typed identity key, every
   vUIN in 1..MAX_VUIN.
7. ``seen_by_scene`` (openid-map.db's scene index of ``last_seen``, where the snapshot has
   it) holds exactly the (scene, vUIN) pairs of ``last_seen``: no chat missing from the
   console's lists, none listed that nobody is seen in.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.identity import MAX_VUIN, parse_key
from gensokyo_idmap.idmap import MAX_ALIAS_HOPS
from gensokyo_idmap.store.lmdb.codec import decode_u64, decode_value

__all__ = ["GraphSnapshot", "VerifyReport", "Violation", "check_graph"]

#: Each kind of finding is listed at most this often; the count is always complete.
MAX_LISTED_PER_KIND: Final = 50

Pair = tuple[bytes, bytes]


@dataclass(frozen=True, slots=True)
class GraphSnapshot:
    """Raw entries of the graph tables, read in one transaction."""

    meta: dict[bytes, bytes]
    forward: Sequence[Pair]  # identity_to_vuin
    reverse: Sequence[Pair]  # vuin_to_identity (one pair per set member)
    aliases: Sequence[Pair]  # vuin_alias
    last_seen: Sequence[Pair]
    missing_tables: tuple[str, ...] = ()
    #: ``seen_by_scene`` (scene → vUIN, one pair per entry); None where the store keeps no
    #: such table (PostgreSQL's index is the database's to keep)
    scene_index: Sequence[Pair] | None = None


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message}


@dataclass(frozen=True, slots=True)
class VerifyReport:
    path: str
    violations: tuple[Violation, ...]
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations

    def by_kind(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for v in self.violations:
            found[v.kind] = found.get(v.kind, 0) + 1
        return found

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "ok": self.ok, "counts": self.counts,
                "violation_counts": self.by_kind(),
                "violations": [v.to_json() for v in self._listed()]}

    def _listed(self) -> Iterator[Violation]:
        shown: dict[str, int] = {}
        for v in self.violations:
            shown[v.kind] = shown.get(v.kind, 0) + 1
            if shown[v.kind] <= MAX_LISTED_PER_KIND:
                yield v

    def lines(self) -> list[str]:
        if self.ok:
            return [f"ok: {self.path} (" + ", ".join(f"{n} {k}" for k, n in self.counts.items())
                    + ")"]
        out = [f"{len(self.violations)} violation(s) in {self.path}:"]
        out += [f"  {v.kind}: {v.message}" for v in self._listed()]
        for kind, total in self.by_kind().items():
            if total > MAX_LISTED_PER_KIND:
                out.append(f"  … {kind}: {total - MAX_LISTED_PER_KIND} more not listed")
        return out


def _vuin(raw: bytes) -> int | None:
    if len(raw) != 8:
        return None
    value = decode_u64(raw)
    return value if 0 < value <= MAX_VUIN else None


def _key(raw: bytes) -> str | None:
    try:
        text = raw.decode("utf-8")
        parse_key(text)
    except (UnicodeDecodeError, BadInputError):
        return None
    return text


class _Checker:
    def __init__(self, snap: GraphSnapshot, schema_versions: frozenset[int]) -> None:
        self.snap = snap
        self.schema_versions = schema_versions
        self.found: list[Violation] = []
        self.forward: dict[str, int] = {}
        self.sets: dict[int, set[str]] = {}
        self.aliases: dict[int, int] = {}

    def add(self, kind: str, message: str) -> None:
        self.found.append(Violation(kind, message))

    def run(self) -> list[Violation]:
        for name in self.snap.missing_tables:
            self.add("table_missing", f"table {name} does not exist")
        self.schema()
        self.decode_identities()
        self.inverses()
        self.alias_chains()
        self.last_seen()
        self.scene_index()
        self.counter()
        return self.found

    def schema(self) -> None:
        raw = self.snap.meta.get(b"schema_version")
        if raw is None:
            if self.snap.forward or self.snap.reverse or self.snap.aliases:
                self.add("schema_version", "meta.schema_version is missing")
            return
        try:
            version = decode_value(raw)
        except Exception:  # noqa: BLE001 - any undecodable bytes are the finding below
            version = None
        if not isinstance(version, int) or isinstance(version, bool) \
                or version not in self.schema_versions:
            known = ", ".join(str(v) for v in sorted(self.schema_versions))
            self.add("schema_version", f"meta.schema_version is {version!r}; known: {known}")

    def decode_identities(self) -> None:
        for raw_key, raw_vuin in self.snap.forward:
            key, vuin = _key(raw_key), _vuin(raw_vuin)
            if key is None:
                self.add("bad_key", f"identity_to_vuin key {raw_key!r} is not a typed identity")
            if vuin is None:
                self.add("bad_vuin", f"identity_to_vuin[{raw_key!r}] = {raw_vuin.hex()} is not "
                         f"a vUIN (8-byte big-endian 1..{MAX_VUIN})")
            if key is not None and vuin is not None:
                self.forward[key] = vuin
        for raw_vuin, raw_key in self.snap.reverse:
            key, vuin = _key(raw_key), _vuin(raw_vuin)
            if vuin is None:
                self.add("bad_vuin", f"vuin_to_identity key {raw_vuin.hex()} is not a vUIN")
            elif key is None:
                self.add("bad_key", f"vuin_to_identity[{vuin}] holds {raw_key!r}, not a typed "
                         "identity")
            else:
                self.sets.setdefault(vuin, set()).add(key)
        for raw_old, raw_new in self.snap.aliases:
            old, new = _vuin(raw_old), _vuin(raw_new)
            if old is None or new is None:
                self.add("bad_alias", f"vuin_alias {raw_old.hex()} → {raw_new.hex()} is not a "
                         "pair of vUINs")
                continue
            self.aliases[old] = new

    def inverses(self) -> None:
        for key, vuin in self.forward.items():
            if key not in self.sets.get(vuin, ()):
                self.add("forward_without_reverse",
                         f"{key} → {vuin}, but vUIN {vuin}'s set does not list it")
        for vuin, keys in self.sets.items():
            for key in sorted(keys):
                points = self.forward.get(key)
                if points != vuin:
                    where = "nothing" if points is None else f"vUIN {points}"
                    self.add("reverse_without_forward",
                             f"vUIN {vuin}'s set lists {key}, but {key} → {where}")
            if vuin in self.aliases:
                self.add("alias_with_identities",
                         f"vUIN {vuin} is an alias of {self.aliases[vuin]} and also has "
                         f"{len(keys)} identities of its own: it names two people")

    def alias_chains(self) -> None:
        loops: set[frozenset[int]] = set()
        for start in sorted(self.aliases):
            path = [start]
            current = self.aliases[start]
            while current in self.aliases and current not in path \
                    and len(path) <= MAX_ALIAS_HOPS:
                path.append(current)
                current = self.aliases[current]
            if current in path:
                loop = frozenset(path[path.index(current):])
                if loop not in loops:
                    loops.add(loop)
                    shown = " → ".join(str(v) for v in [*path[path.index(current):], current])
                    self.add("alias_loop", f"aliases form a loop: {shown}")
            elif len(path) > MAX_ALIAS_HOPS:
                self.add("alias_chain_too_long",
                         f"alias {start} needs more than {MAX_ALIAS_HOPS} hops to resolve")
            elif current not in self.sets:
                self.add("alias_dead_end", f"alias {start} resolves to vUIN {current}, "
                         "which has no identities")

    def last_seen(self) -> None:
        for raw_key, raw_value in self.snap.last_seen:
            vuin = _vuin(raw_key[:8]) if len(raw_key) > 8 else None
            try:
                scene = raw_key[8:].decode("utf-8")
                identity, since = decode_value(raw_value)
                well_formed = isinstance(identity, str) and isinstance(since, int | float)
            except Exception:  # noqa: BLE001 - any undecodable entry is a finding
                well_formed = False
            if vuin is None or not well_formed:
                self.add("bad_last_seen", f"last_seen entry {raw_key!r} cannot be read")
                continue
            points = self.forward.get(identity)
            if points != vuin:
                where = "nothing" if points is None else f"vUIN {points}"
                self.add("last_seen_foreign", f"last_seen of vUIN {vuin} in scene {scene!r} "
                         f"names {identity}, which → {where}")

    def scene_index(self) -> None:
        if self.snap.scene_index is None:
            return
        expected = {(key[8:], key[:8]) for key, _ in self.snap.last_seen if len(key) > 8}
        indexed = set(self.snap.scene_index)
        for scene, vuin in sorted(expected - indexed):
            self.add("scene_index_missing", f"vUIN {decode_u64(vuin)} is last seen in scene "
                     f"{scene.decode('utf-8', 'replace')!r}, which seen_by_scene does not list")
        for scene, vuin in sorted(indexed - expected):
            shown = decode_u64(vuin) if len(vuin) == 8 else vuin.hex()
            self.add("scene_index_stray", f"seen_by_scene lists vUIN {shown} in scene "
                     f"{scene.decode('utf-8', 'replace')!r}, where last_seen has no entry")

    def counter(self) -> None:
        raw = self.snap.meta.get(b"vuin_counter")
        try:
            counter = 0 if raw is None else decode_value(raw)
        except Exception:  # noqa: BLE001 - any undecodable bytes are the finding below
            counter = None
        if not isinstance(counter, int) or isinstance(counter, bool):
            self.add("counter", f"meta.vuin_counter is not an integer: {raw!r}")
        elif not 0 <= counter <= MAX_VUIN:
            self.add("counter", f"meta.vuin_counter is {counter}, outside 0..{MAX_VUIN}: "
                     "allocation cannot start above it")


def check_graph(snapshot: GraphSnapshot, schema_versions: frozenset[int]) -> list[Violation]:
    """Every violation of the graph invariants in ``snapshot`` (empty: the store is sound)."""
    return _Checker(snapshot, schema_versions).run()
