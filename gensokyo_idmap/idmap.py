"""The identity graph: write path, bind / rebind, reverse path (pure logic over IdentityStore).

Rules, and how this module keeps them:

1. **A vUIN never names two people.** vUINs come from ``meta.vuin_counter``, which only
   grows, and allocation skips every number that has an identity set or is an alias. A number
   leaves use only by becoming an alias (rebind, or a bind that empties its set), and an
   alias is never allocated again: it keeps resolving to the person it named.
2. **``identity_to_vuin`` and ``vuin_to_identity`` are exact inverses.** Every write that
   points a key at a vUIN removes it from the set it left, in the same transaction.
3. **Nothing is returned before it is durable.** Writes go through ``IdentityStore.write``,
   which returns after the commit (group commit: one fsync for many callers). Hits are read
   from committed snapshots only, so they are durable already.
4. **The hot path for a known identity is read-only.** ``last_seen`` is rewritten only when
   the identity used in a scene changes, so a known user in a known chat costs two gets.
5. **Aliases resolve, they do not chain into loops.** Targets are always followed to the end
   before an alias is written, so alias chains are acyclic; rebind re-points aliases of the
   moved vUIN, so chains stay one hop long.
6. **Reverse lookups return one identity**, never the whole set.
7. **The reverse path picks the identity that spoke last, and the hot path stays
   read-only.** ``last_seen`` keeps, per vUIN and scene, the identity used there (exact: it
   is rewritten whenever it changes) and ``since``, the time it became that scene's
   identity; rule 4 means ``since`` is *not* the time of the latest event. When to use which
   identity of a kind of chat (a vUIN with C2C OpenIDs UA and UB, a group vUIN with G1 and
   G2) is decided by recency, which lives in the disposable message-id store, not here: it
   already records every inbound message and reply-able event with its chat and time, in the
   one write per batch it makes anyway, so recency costs the inbound path nothing, not even
   a get, and is exact to the event. :meth:`IdentityGraph.pick_identity` takes it as a
   :data:`Recency` function (scene, identity → when that identity last spoke there). A
   coarse refresh of ``since`` in this durable store (once a minute per vUIN and scene) was
   the alternative; it would cost the hot path a check per event and a durable write per
   minute and user, and still order two identities that spoke within one minute wrongly.
   When the disposable store no longer knows a chat (its TTL ran out, or it was flushed or
   lost), the choice falls back to ``since``; a send cannot be a passive reply there anyway,
   the reply ids being gone with it. Whatever the order, a candidate is taken only if the
   caller's :class:`Usable` accepts it, so no fallback picks an OpenID of another AppID.

Write functions (``_apply_*``) validate before their first write: a typed error leaves the
batch they share untouched (the store's contract).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Final, Literal, NamedTuple

import structlog

from gensokyo_idmap import counters
from gensokyo_idmap.errors import (
    BadInputError,
    IdmapError,
    NotFoundError,
    NoUsableIdentityError,
    StoreError,
)
from gensokyo_idmap.identity import (
    MAX_SCENE_BYTES,
    MAX_VUIN,
    UTF8_MAX_BYTES_PER_CHAR,
    IdentityKey,
    OpenId,
    parse_key,
)
from gensokyo_idmap.recent_cache import RecentCache
from gensokyo_idmap.store.base import (
    IdentityReader,
    IdentityStore,
    IdentityWriter,
    LastSeen,
    ProbesTogether,
)
from gensokyo_idmap.tables import HasTables, Named

__all__ = [
    "ANY_IDENTITY",
    "MAX_ALIAS_HOPS",
    "BindResult",
    "IdentityGraph",
    "RebindResult",
    "Recency",
    "Resolution",
    "Usable",
    "VuinView",
    "openid_of_app",
]

log = structlog.get_logger("gensokyo_idmap.idmap")

#: Parsed keys the reverse path keeps: about the people sent to within the last minutes of a
#: busy bot (a few MB); those not sent to lately are forgotten first.
_PARSED_KEYS_KEPT: Final = 65_536
#: AppIDs whose :class:`Usable` is kept: a daemon serves one, the API asks about a few.
_APPS_KEPT: Final = 256
#: Alias hops followed before a chain counts as a loop. Rule 5 keeps chains one hop long,
#: so any number above a handful only stops a damaged store from looping forever.
MAX_ALIAS_HOPS: Final = 64
#: A scene of at most this many characters is within MAX_SCENE_BYTES whatever they are: the
#: hot path takes it as checked without encoding it (longer ones take the checked path).
_HOT_SCENE_CHARS: Final = MAX_SCENE_BYTES // UTF8_MAX_BYTES_PER_CHAR

#: Stored keys are immutable text; parsing one is pure, so the reverse path caches it.
_PARSED_KEYS: Final[RecentCache[str, IdentityKey]] = RecentCache(_PARSED_KEYS_KEPT)


def _parse_stored_key(text: str) -> IdentityKey:
    key = _PARSED_KEYS.young.get(text) or _PARSED_KEYS.get(text)
    if key is None:
        key = parse_key(text)
        _PARSED_KEYS.offer(text, key)
    return key


_IDENTITY_HIT: Final = counters.IDENTITY_HIT  # a module global: the hot path's one extra call


class Resolution(NamedTuple):
    """The vUIN a set of keys seen together resolved to.

    A NamedTuple rather than a frozen dataclass: it is built on every hot-path call, and
    costs a fifth as much to build while being just as immutable.
    """

    vuin: int
    created: bool = False
    added: tuple[str, ...] = ()
    conflicts: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class BindResult:
    outcome: Literal["moved", "skipped"]
    key: str
    vuin: int
    previous: int | None
    reason: str
    aliased: int | None = None


@dataclass(frozen=True, slots=True)
class RebindResult:
    outcome: Literal["moved", "skipped"]
    old: int
    new: int
    moved: tuple[str, ...]
    reason: str


@dataclass(frozen=True, slots=True)
class VuinView:
    requested: int
    vuin: int
    identities: tuple[str, ...]
    last_seen: tuple[tuple[str, LastSeen], ...]
    aliases: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Usable:
    """Which identities a target API can use, and how to say so in an error."""

    description: str
    accepts: Callable[[IdentityKey], bool]


ANY_IDENTITY: Final = Usable("any identity", lambda key: True)


@lru_cache(maxsize=_APPS_KEPT)
def openid_of_app(app_id: str, platform: str = "QQ") -> Usable:
    """A QQ send needs an OpenID of the AppID that sends it."""
    return Usable(
        f"an OpenID of {platform} AppID {app_id}",
        lambda key: isinstance(key, OpenId) and key.app_id == app_id and key.platform == platform,
    )


#: (scene, identity key) → (unix ms, order) of the latest event of that identity in that
#: scene that the disposable store still knows, or None (rule 7). ``order`` ranks events of
#: one millisecond.
Recency = Callable[[str, str], tuple[int, int] | None]


def _latest_first(entries: Sequence[tuple[str, LastSeen]],
                 recency: Recency | None) -> list[LastSeen]:
    """``last_seen`` entries (scene, seen), the one that spoke last first (rule 7): by
    ``recency`` where it knows the scene, else by ``since``, which it never predates. Ties
    keep the given order. A single entry needs no ordering, nor its recency read (a
    group's vUIN has one identity: the send to it pays nothing for the rule)."""
    if len(entries) < 2:
        return [seen for _, seen in entries]

    def latest(entry: tuple[str, LastSeen]) -> tuple[int, int]:
        scene, seen = entry
        durable = (int(seen.since * 1000), -1)
        recent = None if recency is None else recency(scene, seen.identity)
        return durable if recent is None or recent < durable else recent

    return [seen for _, seen in sorted(entries, key=latest, reverse=True)]


def _hit(vuin: int) -> Resolution:
    """``Resolution(vuin)`` without the NamedTuple's Python-level ``__new__`` (hot path)."""
    return tuple.__new__(Resolution, (vuin, False, (), ()))


# --- pure rules over a store view -------------------------------------------------------


def follow_alias(view: IdentityReader, vuin: int) -> int:
    """The vUIN that ``vuin`` stands for today (itself unless it is an alias)."""
    current = vuin
    for _ in range(MAX_ALIAS_HOPS):
        target = view.alias_target(current)
        if target is None:
            return current
        current = target
    raise StoreError(f"vUIN {vuin}: alias chain longer than {MAX_ALIAS_HOPS} hops (loop?)")


def vuin_in_use(view: IdentityReader, vuin: int) -> bool:
    return view.has_identities(vuin) or view.alias_target(vuin) is not None


def allocate_vuin(view: IdentityWriter) -> int:
    """The next free vUIN above the counter; the counter moves past it."""
    candidate = view.vuin_counter() + 1
    unused = view.unused_from()
    if unused is None or candidate < unused:
        while vuin_in_use(view, candidate):
            candidate += 1
    if candidate > MAX_VUIN:
        raise StoreError("vUIN space exhausted")
    view.set_vuin_counter(candidate)
    return candidate


class _Plan(NamedTuple):
    """What a resolution needs to do (a NamedTuple: built once per write, on the writer)."""

    chosen: int | None
    missing: tuple[str, ...]
    conflicts: tuple[tuple[str, int], ...]
    write_last_seen: bool

    @property
    def read_only(self) -> bool:
        return self.chosen is not None and not self.missing and not self.write_last_seen


def _plan_resolution(
    view: IdentityReader, keys: Sequence[str], scene: str | None, scene_key: str
) -> _Plan:
    chosen: int | None = None
    missing: list[str] = []
    conflicts: list[tuple[str, int]] = []
    for key in keys:
        found = view.vuin_of(key)
        if found is None:
            missing.append(key)
        elif chosen is None:
            chosen = found
        elif found != chosen:
            conflicts.append((key, found))
    write_last_seen = False
    if scene is not None and all(key != scene_key for key, _ in conflicts):
        if chosen is None:
            write_last_seen = True
        else:
            seen = view.last_seen(chosen, scene)
            write_last_seen = seen is None or seen.identity != scene_key
    return _Plan(chosen, tuple(missing), tuple(conflicts), write_last_seen)


def _apply_resolution(
    view: IdentityWriter, keys: Sequence[str], scene: str | None, scene_key: str, now: float
) -> Resolution:
    if len(keys) == 1 and scene_key == keys[0] and (vuin := view.vuin_of(scene_key)) is None:
        # One key nobody has: a new person, what the writer does most under load. It is
        # the plan below for that case (all missing, no conflict, last_seen written where
        # there is a scene), without building the plan.
        vuin = allocate_vuin(view)
        view.add_person(scene_key, vuin, scene, now)
        return tuple.__new__(Resolution, (vuin, True, (scene_key,), ()))
    plan = _plan_resolution(view, keys, scene, scene_key)
    created = plan.chosen is None
    vuin = allocate_vuin(view) if plan.chosen is None else plan.chosen
    for key in plan.missing:
        view.set_vuin(key, vuin)
        view.add_identity(vuin, key)
    if plan.write_last_seen and scene is not None:
        view.set_last_seen(vuin, scene, LastSeen(scene_key, now))
    return Resolution(vuin, created, plan.missing, plan.conflicts)


def _forget_last_seen_of(view: IdentityWriter, vuin: int, key: str) -> None:
    for scene, seen in view.last_seen_all(vuin):
        if seen.identity == key:
            view.delete_last_seen(vuin, scene)


def _apply_bind(view: IdentityWriter, key: str, vuin: int) -> BindResult:
    target = follow_alias(view, vuin)
    previous = view.vuin_of(key)
    if previous == target:
        return BindResult("skipped", key, target, previous, f"{key} is already bound to {target}")
    aliased: int | None = None
    if previous is not None:
        view.remove_identity(previous, key)
        _forget_last_seen_of(view, previous, key)
        if not view.has_identities(previous):
            # Its last identity left: the number keeps naming the same person.
            view.set_alias(previous, target)
            _repoint_aliases(view, previous, target)
            aliased = previous
    view.set_vuin(key, target)
    view.add_identity(target, key)
    reason = "new identity" if previous is None else f"moved from {previous}"
    return BindResult("moved", key, target, previous, reason, aliased)


def _repoint_aliases(view: IdentityWriter, old: int, new: int) -> None:
    for alias in view.aliases_to(old):
        view.set_alias(alias, new)


def _apply_rebind(view: IdentityWriter, old: int, new: int) -> RebindResult:
    source = follow_alias(view, old)
    target = follow_alias(view, new)
    keys = view.identities_of(source)
    if not keys:
        raise NotFoundError(f"vUIN {old} has no identities to move")
    if source == target:
        return RebindResult("skipped", old, target, (), f"{old} already resolves to {target}")
    for key in keys:
        view.remove_identity(source, key)
        view.set_vuin(key, target)
        view.add_identity(target, key)
    for scene, seen in view.last_seen_all(source):
        view.delete_last_seen(source, scene)
        if view.last_seen(target, scene) is None:
            view.set_last_seen(target, scene, seen)
    view.set_alias(source, target)
    _repoint_aliases(view, source, target)
    return RebindResult("moved", old, target, tuple(keys), f"{len(keys)} identities moved")


# --- the service --------------------------------------------------------------------------


def _check_vuin(vuin: int, field: str) -> int:
    if isinstance(vuin, bool) or not isinstance(vuin, int) or not 0 < vuin <= MAX_VUIN:
        raise BadInputError(field, vuin, f"vUIN must be an integer between 1 and {MAX_VUIN}")
    return vuin


def _check_scene(scene: str | None) -> None:
    if scene is not None and (not scene or len(scene.encode("utf-8")) > MAX_SCENE_BYTES):
        raise BadInputError("scene", scene, f"scene must be 1 to {MAX_SCENE_BYTES} bytes")


class IdentityGraph:
    """Resolve, bind and look up identities over one IdentityStore."""

    def __init__(self, store: IdentityStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self._clock = clock
        # Bound once: a concrete filtering logger; hits are logged only when debug is on,
        # decided here so the hot path does not even build the call.
        self._log = log.bind()
        self._log_hits = self._log.is_enabled_for(logging.DEBUG)
        # a store whose probe is a round trip: resolve asks it together with other callers
        self._together = store if isinstance(store, ProbesTogether) else None

    def memory_tables(self) -> list[Named]:
        """The in-memory tables of the graph and its store (:mod:`gensokyo_idmap.tables`):
        the stored keys parsed (shared by every graph of the process) and the store's
        caches, if it keeps any."""
        store = self.store
        return [("parsed_keys", _PARSED_KEYS),
                *(store.memory_tables() if isinstance(store, HasTables) else ())]

    def known(self, keys: Sequence[IdentityKey], scene: str | None = None, *,
              ask_store: bool = True,
              probed: tuple[int | None, bool] | None = None) -> int | None:
        """The vUIN of ``keys`` if resolving them would change nothing (one known key, last
        seen in ``scene`` already), else None: the hot path of :meth:`resolve`, without a
        coroutine, so callers with several people can skip the machinery when all are known.
        ``ask_store=False``: a store whose probe is a round trip (:class:`ProbesTogether`)
        answers from memory only, and a key it does not hold is None; :meth:`resolve` then
        asks for it together with the other callers of the turn, instead of a round trip
        per key blocking the loop here. ``probed``: the probe's answer, already asked for
        (by :meth:`resolve`, with the other callers of its turn).
        """
        if len(keys) != 1 or (scene is not None and not 0 < len(scene) <= _HOT_SCENE_CHARS):
            return None
        key = keys[0].key
        if probed is not None:
            vuin, seen_here = probed
        elif ask_store or self._together is None:
            vuin, seen_here = self.store.probe(key, scene)  # one snapshot, two gets at most
        else:
            cached = self._together.probe_cached(key, scene)
            if cached is None:
                return None
            vuin, seen_here = cached
        if vuin is None or not (scene is None or seen_here):
            return None
        _IDENTITY_HIT.inc()
        if self._log_hits:
            self._log.debug("[idmap] identity hit", key=key, vuin=vuin)
        return vuin

    async def resolve(
        self,
        keys: Sequence[IdentityKey],
        scene: str | None = None,
        scene_identity: IdentityKey | None = None,
        *,
        missed: bool = False,
    ) -> Resolution:
        """The vUIN of keys seen together (durable on return); allocate one if none is known.

        ``scene`` names where they were seen (e.g. ``QQ:<appid>:group:<openid>``); the
        ``scene_identity`` (default: the first key) becomes that scene's ``last_seen``.
        ``missed``: :meth:`known` just answered None for them (the inbound bridge asks it
        first for everyone of a batch), so a store it asked is not asked again: the write
        reads them anyway, in its transaction (a store whose probe is a round trip was
        asked from memory only, and is asked here as usual).
        """
        if len(keys) == 1 and scene_identity is None and (
                scene is None or 0 < len(scene) <= _HOT_SCENE_CHARS):
            if self._together is None:
                vuin = None if missed else self.known(keys, scene)
            else:  # with the other resolves of this turn: one round trip for all
                vuin = self.known(keys, scene, probed=await self._together.probe_soon(
                    keys[0].key, scene))
            if vuin is not None:
                return _hit(vuin)
            texts = [keys[0].key]
            scene_key = texts[0]
        else:
            texts = list(dict.fromkeys(key.key for key in keys))
            if not texts:
                raise BadInputError("keys", keys, "at least one identity key is needed")
            _check_scene(scene)
            scene_key = texts[0] if scene_identity is None else scene_identity.key
            if scene_key not in texts:
                raise BadInputError(
                    "scene_identity", scene_key, "must be one of the keys resolved"
                )
            with self.store.read() as view:
                plan = _plan_resolution(view, texts, scene, scene_key)
            if plan.read_only:
                assert plan.chosen is not None
                _IDENTITY_HIT.inc()
                self._log.debug("[idmap] identity hit", key=texts[0], vuin=plan.chosen)
                return Resolution(plan.chosen, False, (), plan.conflicts)
        result = await self.store.write(
            partial(_apply_resolution, keys=texts, scene=scene, scene_key=scene_key,
                    now=self._clock())
        )
        for key in result.added:
            self._log.info("[idmap] identity create", key=key, vuin=result.vuin)
        counters.IDENTITY_CREATE.inc(len(result.added))
        if not result.added:
            _IDENTITY_HIT.inc()
            self._log.debug("[idmap] identity hit", key=texts[0], vuin=result.vuin)
        for key, other in result.conflicts:
            self._log.warning("[idmap] identity conflict", key=key, vuin=other, kept=result.vuin,
                        reason="keys seen together belong to different vUINs; bind to merge")
        return result

    def version(self) -> int | None:
        """The store's :meth:`~gensokyo_idmap.store.base.IdentityStore.version`: while it
        is unchanged, every answer read after it stands."""
        return self.store.version()

    def lookup(self, key: IdentityKey) -> int | None:
        """The vUIN of one key, or None; never writes."""
        with self.store.read() as view:
            return view.vuin_of(key.key)

    def canonical(self, vuin: int) -> int | None:
        """What ``vuin`` resolves to today (following aliases), or None if it is unknown."""
        _check_vuin(vuin, "vuin")
        with self.store.read() as view:
            target = follow_alias(view, vuin)
            return target if view.has_identities(target) else None

    def show(self, vuin: int) -> VuinView:
        _check_vuin(vuin, "vuin")
        with self.store.read() as view:
            target = follow_alias(view, vuin)
            identities = tuple(view.identities_of(target))
            if not identities and target == vuin:
                raise NotFoundError(f"vUIN {vuin} is not known")
            return VuinView(
                requested=vuin,
                vuin=target,
                identities=identities,
                last_seen=tuple(view.last_seen_all(target)),
                aliases=tuple(sorted(view.aliases_to(target))),
            )

    def seen_in_scenes(
        self, key_prefix: str, scene_of: Callable[[str], str], limit: int
    ) -> list[tuple[str, int, LastSeen]]:
        """(key, vUIN, last_seen) of the keys under ``key_prefix`` that were last seen in
        the scene ``scene_of(key)`` names, at most ``limit`` of them, in key order.

        This is what the graph knows about "the groups of this bot", "its friends" or "the
        members of a group" (the platform has no list API); the cost is one walk of the
        prefix, so callers bound it.
        """
        found: list[tuple[str, int, LastSeen]] = []
        with self.store.read() as view:
            for key, vuin in view.iter_identities(key_prefix):
                seen = view.last_seen(vuin, scene_of(key))
                if seen is not None:
                    found.append((key, vuin, seen))
                    if len(found) >= limit:
                        break
        return found

    def seen_counts(self, key_prefix: str, scene_prefix: str) -> dict[str, int]:
        """For each scene under ``scene_prefix``, how many keys under ``key_prefix`` were
        last seen there, a key whose own id ends the scene (a group's own OpenID in its own
        chat) not counted: how many members of each group the graph knows, in one walk
        (what :meth:`seen_in_scenes` would find for each scene alone, without a walk per
        scene)."""
        counts: dict[str, int] = {}
        with self.store.read() as view:
            for key, vuin in view.iter_identities(key_prefix):
                own = key[len(key_prefix):]
                for scene, _ in view.last_seen_all(vuin):
                    if scene.startswith(scene_prefix) and scene[len(scene_prefix):] != own:
                        counts[scene] = counts.get(scene, 0) + 1
        return counts

    async def bind(self, key: IdentityKey, vuin: int) -> BindResult:
        """Point ``key`` at ``vuin`` (or what it is an alias of), adding it to that set."""
        try:
            _check_vuin(vuin, "vuin")
            result = await self.store.write(partial(_apply_bind, key=key.key, vuin=vuin))
        except IdmapError as err:
            counters.BIND_RESULTS.labels("bind", "failed").inc()
            self._log.warning("[idmap] bind failed", key=key.key, vuin=vuin, reason=err.message)
            raise
        counters.BIND_RESULTS.labels("bind", result.outcome).inc()
        self._log.info(f"[idmap] bind {result.outcome}", key=result.key, vuin=result.vuin,
                 previous=result.previous, reason=result.reason, aliased=result.aliased)
        return result

    async def rebind(self, old: int, new: int) -> RebindResult:
        """Move the whole identity set of ``old`` to ``new``; ``old`` stays as an alias."""
        try:
            _check_vuin(old, "old")
            _check_vuin(new, "new")
            result = await self.store.write(partial(_apply_rebind, old=old, new=new))
        except IdmapError as err:
            counters.BIND_RESULTS.labels("rebind", "failed").inc()
            self._log.warning("[idmap] bind failed", old=old, new=new, reason=err.message)
            raise
        counters.BIND_RESULTS.labels("rebind", result.outcome).inc()
        self._log.info(f"[idmap] bind {result.outcome}", old=result.old, new=result.new,
                 moved=len(result.moved), reason=result.reason)
        return result

    def pick_identity(
        self,
        vuin: int,
        scene: str | None = None,
        explicit: IdentityKey | None = None,
        usable: Usable = ANY_IDENTITY,
        scene_prefix: str | None = None,
        recency: Recency | None = None,
    ) -> IdentityKey:
        """The one identity to use for ``vuin`` (docs/identities.md, reverse path; rule 7).

        Explicit identity > ``last_seen`` in ``scene`` (the chat the send belongs to) > the
        one that spoke last in this kind of chat (``scene_prefix``, e.g. ``QQ:<app>:c2c:``)
        > any usable identity of the set. Who spoke last is ``recency``'s answer where it
        has one, else the durable ``since``.
        """
        if explicit is not None:
            return explicit
        _check_vuin(vuin, "vuin")
        with self.store.read() as view:
            target = follow_alias(view, vuin)

            def still_usable(seen: LastSeen) -> IdentityKey | None:
                if view.vuin_of(seen.identity) == target:
                    key = _parse_stored_key(seen.identity)
                    if usable.accepts(key):
                        return key
                return None

            # the exact scene first, and only without it the ordering of the others (whose
            # recency reads cost more than the rest of a send's choice)
            exact = None if scene is None else view.last_seen(target, scene)
            if exact is not None and (key := still_usable(exact)) is not None:
                return key
            if scene_prefix is not None:
                for seen in _latest_first([(name, seen) for name, seen
                                           in view.last_seen_all(target)
                                           if name.startswith(scene_prefix)], recency):
                    if (key := still_usable(seen)) is not None:
                        return key
            identities = view.identities_of(target)
        if not identities:
            raise NotFoundError(f"vUIN {vuin} is not known")
        keys = [_parse_stored_key(text) for text in identities]
        for key in keys:
            if usable.accepts(key):
                return key
        # a person known to another bot only: say which (that bot can reach them)
        apps = sorted({key.app_id for key in keys if isinstance(key, OpenId)})
        known = f"; its OpenIDs are of AppID {', '.join(apps)}" if apps else ""
        raise NoUsableIdentityError(
            f"vUIN {vuin} has {len(identities)} identities but none is "
            f"{usable.description}{known}")
