"""Inbound bridge: a parsed QQ event → durable identities → OneBot v11 events.

Rules:

1. **Identities first, durably.** Every OpenID of the event is resolved through the
   identity graph (which returns only after its commit is durable) before any OneBot event
   is built, so a vUIN a framework sees can never be handed to someone else after a crash.
   The new people of an event, or of a whole batch of events, resolve concurrently and
   share one group commit.
2. **One person, one vUIN across bots.** With ``link_union_openid`` the author's
   ``union_openid`` is resolved together with the OpenID, so the operator's other AppIDs
   land on the same vUIN.
3. **Real message ids become int32 virtual ids** in the msgid map (inbound, with the chat),
   which is also what the reply path reads back for passive replies; the author's vUIN and
   the OneBot content go beside it (cut to the map's bound), for ``get_msg``, and so does
   a group or C2C message's ``msg_idx``, under which a later quote finds it.
4. **Unknown or non-chat events produce no OneBot event**; they are logged, never raised.

5. **Non-message events a reply may name** (``event_id``: GROUP_ADD_ROBOT,
   GROUP_MSG_RECEIVE, FRIEND_ADD, C2C_MSG_RECEIVE, INTERACTION_CREATE) keep their envelope id
   in the msgid map too, under the chat's ``group-event`` / ``c2c-event`` kind.
6. **``op_userid_type``** (docs/identities.md) decides what ``user_id`` / ``group_id`` /
   ``operator_id`` carry: the vUIN (default), the platform's own OpenID (``raw``: text, for
   frameworks that take string ids), or the person's QQ number when an rUIN is bound
   (``ruin``, else the vUIN).
7. **Guild-side events** (channels, guild DMs, their recalls, guild members) name ``raw:``
   ids and are shown as Gensokyo shows them (:mod:`gensokyo_idmap.bridge.guild_inbound`);
   where each channel and DM lives is recorded in the legacy config table
   (:mod:`gensokyo_idmap.bridge.guilds`) before their events go out, so a reply finds it.
8. **A quote becomes a ``reply`` segment, first**, naming the quoted message's virtual id
   when the map still holds it (a framework fetches it with ``get_msg``); a quote of a
   message the map does not know (expired, from before, sent by the bot) adds nothing: the
   quoted text is never made up. A group or C2C quote names the quoted message by its
   ``msg_idx``; a channel or guild DM message's ``message_reference`` by its platform id,
   which finds the bot's own messages there too (only in the same chat).
9. **Names and roles come with messages**: a message's author, with the name and role the
   platform gave (:mod:`gensokyo_idmap.bridge.members`), is kept per chat in memory for the
   member actions, after the author's identity, never instead of it.

What each kind of event contributes to those steps (whom it names, its content and quote,
its real id, where its channel lives, its OneBot events) is its translator's
(:mod:`gensokyo_idmap.bridge.translators`): the bridge batches the steps and never tests an
event's type.

Transports and the platform clients live elsewhere and call :meth:`InboundPipeline.process_batch`
(the gateway: every frame of one read) or the pipeline itself (the webhook: one delivery).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, cast, runtime_checkable

import structlog

from gensokyo_idmap import counters
from gensokyo_idmap.bridge.chat import Chat, ChatKind
from gensokyo_idmap.bridge.chat_turns import ChatTurns, wait_all
from gensokyo_idmap.bridge.dedup import delivery_key
from gensokyo_idmap.bridge.guilds import directory_of
from gensokyo_idmap.bridge.members import profiles_of
from gensokyo_idmap.bridge.message_filter import MessageFilter
from gensokyo_idmap.bridge.outbox import TrackedSink
from gensokyo_idmap.bridge.translators import TRANSLATORS, Scope, Translator, attachment_segment
from gensokyo_idmap.bridge.turn_batches import TurnBatches
from gensokyo_idmap.errors import BadInputError, IdmapError, StoreError
from gensokyo_idmap.identity import IdentityKey, OpenId, RawId
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.onebot import events as ob
from gensokyo_idmap.onebot.event_queue import EventBacklog
from gensokyo_idmap.onebot.message import Segment
from gensokyo_idmap.qq.events import Interaction, QQEvent
from gensokyo_idmap.recent_cache import RecentCache
from gensokyo_idmap.runtime.claims import DeliveryLog
from gensokyo_idmap.runtime.msgid import MessageIds, MsgContext
from gensokyo_idmap.tables import Named

__all__ = ["BridgeSettings", "EventSink", "InboundBridge", "InboundPipeline", "SharedBatches",
           "attachment_segment", "process_together"]

log = structlog.get_logger("gensokyo_idmap.bridge")


@dataclass(frozen=True, slots=True)
class BridgeSettings:
    app_id: str
    self_id: int
    message_format: ob.MessageFormat = "array"
    link_union_openid: bool = True
    extensions: bool = False
    op_userid_type: Literal["vuin", "raw", "ruin"] = "vuin"
    #: :mod:`~gensokyo_idmap.bridge.message_filter`: which messages reach the frameworks
    white_prefixes: tuple[str, ...] = ()
    black_prefixes: tuple[str, ...] = ()
    remove_at: bool = False
    #: the message ids are on a server (Redis): a quote's lookup waits on a worker thread,
    #: never on the event loop
    reads_off_loop: bool = False


_ID_FIELDS: Final = ("user_id", "group_id", "operator_id")
_CONTEXTS_MAX: Final = 65_536


class InboundBridge:
    """Turns platform events into OneBot events; the identity and msgid stores are shared."""

    def __init__(
        self,
        graph: IdentityGraph,
        msgids: MessageIds,
        settings: BridgeSettings,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.graph = graph
        self.msgids = msgids
        self.settings = settings
        self._clock = clock
        self._log = log.bind()
        self.guilds = directory_of(graph)
        self.members = profiles_of(graph)
        # (chat kind, target, of an event) → its inbound MsgContext: the same chats come back
        # event after event, and building one checks every field again (chats gone quiet
        # are forgotten)
        self._contexts: RecentCache[tuple[ChatKind, str, bool], MsgContext] = RecentCache(
            _CONTEXTS_MAX)
        self._filter = MessageFilter(settings.self_id, settings.white_prefixes,
                                     settings.black_prefixes, settings.remove_at)
        self._scope = Scope(settings.app_id, settings.self_id, settings.message_format,
                            settings.extensions, settings.link_union_openid, self._context,
                            self._log)

    def memory_tables(self) -> list[Named]:
        """Its in-memory tables and those it shares with the daemon's other bots (the
        graph's member profiles and guild directory): :mod:`gensokyo_idmap.tables`."""
        return [("inbound_contexts", self._contexts), *self.members.memory_tables(),
                *self.guilds.memory_tables(), *self.graph.memory_tables()]

    async def _resolve_people(self, events: Sequence[QQEvent],
                              kinds: Sequence[Translator[Any]]) -> list[list[int]]:
        """The vUINs of everyone in ``events`` (rule 1), each event's in the order its
        translator names them: known ones straight from the store, the others resolved
        concurrently, so the new people of a whole batch share one group commit."""
        people = self._look_up_people(events, kinds)
        if people.unknown:
            await self._resolve_unknown(events, people)
        return people.vuins()

    def _look_up_people(self, events: Sequence[QQEvent],
                        kinds: Sequence[Translator[Any]]) -> _People:
        """Everyone in ``events`` and the vUINs of those the graph knows (from memory on a
        networked store: the misses are asked together by :meth:`_resolve_unknown`)."""
        people = [kind.people(event, self._scope) for event, kind in zip(events, kinds,
                                                                          strict=True)]
        found: list[list[int | None]] = []
        unknown: dict[tuple[tuple[IdentityKey, ...], str | None], int] = {}
        for event, persons in zip(events, people, strict=True):
            scene = event.scene
            vuins = [self.graph.known(keys, scene, ask_store=False) for keys in persons]
            for keys, vuin in zip(persons, vuins, strict=True):
                if vuin is None:
                    unknown[(tuple(keys), scene)] = 0
            found.append(vuins)
        return _People(people, found, unknown)

    async def _resolve_unknown(self, events: Sequence[QQEvent], people: _People) -> None:
        """The vUINs :meth:`_look_up_people` did not find, resolved concurrently (the new
        ones share one group commit), filled in."""
        unknown = people.unknown
        resolutions = await asyncio.gather(
            *(self.graph.resolve(keys, scene=scene, missed=True) for keys, scene in unknown))
        for wanted, resolution in zip(unknown, resolutions, strict=True):
            unknown[wanted] = resolution.vuin
        for event, persons, vuins in zip(events, people.keys, people.found, strict=True):
            for i, keys in enumerate(persons):
                if vuins[i] is None:
                    vuins[i] = unknown[(tuple(keys), event.scene)]
        await self._last_identity_wins(events, people.keys, people.vuins())

    async def _last_identity_wins(self, events: Sequence[QQEvent],
                                  people: list[list[list[IdentityKey]]],
                                  vuins: list[list[int]]) -> None:
        """A scene's ``last_seen`` names the identity the batch used there last.

        One vUIN can speak in one scene under two identities within a batch (M1, M3, M1).
        The resolutions above ran once per identity, in the order each first appeared, and
        the known ones were read before any write; so the scene may now name an earlier one.
        Resolving the last one again sets it (rare: a batch in which every person was known
        needs no write, and cannot get here with two identities for one vUIN and scene).
        """
        last: dict[tuple[int, str], list[IdentityKey]] = {}
        mixed: set[tuple[int, str]] = set()
        for event, persons, found in zip(events, people, vuins, strict=True):
            scene = event.scene
            if scene is None:
                continue
            for keys, vuin in zip(persons, found, strict=True):
                before = last.get((vuin, scene))
                if before is not None and before[0] != keys[0]:
                    mixed.add((vuin, scene))
                last[(vuin, scene)] = keys
        for vuin, scene in mixed:
            await self.graph.resolve(last[(vuin, scene)], scene=scene)

    async def _with_quotes(self, events: Sequence[QQEvent], kinds: Sequence[Translator[Any]],
                           contents: list[list[Segment] | None]) -> list[list[Segment] | None]:
        """Each message's segments with the ``reply`` of the message it quotes first, when
        the map knows that one (rule 8); the lookups of a batch in one go, off the loop
        when the map is on a server."""
        asked: list[tuple[int, bool, str, str, str]] = []  # (index, by id?, chat, name)
        for index, event in enumerate(events):
            if contents[index] is None:
                continue
            quote = kinds[index].quoted(event)
            if quote is not None:
                asked.append((index, False, *quote))
                continue
            reference = kinds[index].referenced(event)
            if reference is not None:
                asked.append((index, True, *reference))
        if not asked:
            return contents

        def look_up() -> list[int | None]:
            return [self._referenced(kind, target, name) if by_id else
                    self.msgids.quoted(self.settings.app_id, kind, target, name)
                    for _, by_id, kind, target, name in asked]

        found = await asyncio.to_thread(look_up) if self.settings.reads_off_loop else look_up()
        quoted = list(contents)
        for (index, _, _, _, idx), virtual_id in zip(asked, found, strict=True):
            self._log.debug("[message] quote", quoted_idx=idx, message_id=virtual_id)
            segments = quoted[index]
            if virtual_id is not None and segments is not None:
                quoted[index] = [Segment("reply", (("id", str(virtual_id)),)), *segments]
        return quoted

    def _referenced(self, chat_kind: str, target: str, real_id: str) -> int | None:
        """The live virtual id of the message of this chat a guild message's
        ``message_reference`` names by its platform id (one the bot sent there too), or
        None: unknown, expired, or of another chat."""
        try:
            virtual_id = self.msgids.virtual_of(real_id)
        except BadInputError:  # no id the map could hold (too long, not text)
            return None
        record = None if virtual_id is None else self.msgids.lookup(virtual_id)
        if record is None or (record.app_id, record.chat_kind, record.target) != (
                self.settings.app_id, chat_kind, target):
            return None
        return virtual_id

    def _context(self, chat_kind: ChatKind, target: str, of_event: bool = False) -> MsgContext:
        """The inbound context of a message (or a reply-able event) of a chat of this AppID
        (kept: contexts are never changed)."""
        asked = (chat_kind, target, of_event)
        context = self._contexts.young.get(asked) or self._contexts.get(asked)
        if context is None:
            chat = Chat(self.settings.app_id, chat_kind, target)
            context = chat.event_context() if of_event else chat.context("in")
            self._contexts.offer(asked, context)
        return context

    async def translate(self, event: QQEvent) -> list[dict[str, Any]]:
        """The OneBot events for one platform event (empty for lifecycle or unknown ones)."""
        [events] = await self.translate_many([event])
        return events

    async def translate_many(self, events: Sequence[QQEvent]) -> list[list[dict[str, Any]]]:
        """:meth:`translate` for a batch, in order: one wait for the identities of all (one
        group commit for the new ones) and one for their message ids, instead of one each.
        If any of it fails the batch raises and no OneBot event of it is built (identities
        already committed stay: the graph only ever adds)."""
        [translated] = await translate_together([(self, events)])
        return translated

    async def _prepared(self, events: Sequence[QQEvent], kinds: Sequence[Translator[Any]],
                        vuins: list[list[int]]) -> _Prepared:
        """What building ``events`` needs once their people are known: their content (a
        quote's ``reply`` first) and what each stores in the message-id map."""
        scope = self._scope
        contents = await self._with_quotes(events, kinds, [
            kind.content(event, people, scope)
            for event, kind, people in zip(events, kinds, vuins, strict=True)])
        wanted = [kind.real_id(event, people, segments, scope) for event, kind, people, segments
                  in zip(events, kinds, vuins, contents, strict=True)]
        return _Prepared(events, kinds, vuins, contents, wanted)

    async def _built(self, prepared: _Prepared, stored: Iterator[int]
                     ) -> list[list[dict[str, Any]]]:
        """The OneBot events of a prepared batch, its message ids taken from ``stored`` in
        order (one for each item it wanted stored)."""
        events, kinds, vuins = prepared.events, prepared.kinds, prepared.vuins
        scope = self._scope
        entries = [entry for event, kind, people in zip(events, kinds, vuins, strict=True)
                   for entry in kind.config_entries(event, people)]
        if entries:  # where a channel or DM lives, before a framework can answer it
            await self.guilds.record(entries)
        for event, kind, people in zip(events, kinds, vuins, strict=True):
            for chat, vuin, profile in kind.members(event, people):
                self.members.record(chat, vuin, profile)  # names and roles, in memory
        now = int(self._clock())
        translated = []
        for event, kind, people, item, segments in zip(events, kinds, vuins, prepared.wanted,
                                                       prepared.contents, strict=True):
            virtual_id = next(stored) if item else 0
            onebot = kind.onebot(event, people, virtual_id, now, segments, scope)
            if onebot and self._filter.active:
                onebot = self._filter.events(onebot)
            if onebot and self.settings.op_userid_type != "vuin":
                ids = self._downstream_ids(event)
                onebot = [_with_ids(item, ids) for item in onebot]
            translated.append(onebot)
        return translated

    def _downstream_ids(self, event: QQEvent) -> dict[int, int | str]:
        """vUIN → what ``op_userid_type`` sends instead, for the OpenIDs of ``event``."""
        ids: dict[int, int | str] = {}
        for key in event.identities():
            if isinstance(key, RawId) and self.settings.op_userid_type == "raw":
                vuin = self.graph.lookup(key)
                if vuin is not None:
                    ids.setdefault(vuin, key.value)  # a guild-side id: the platform's own
                continue
            if not isinstance(key, OpenId):
                continue
            vuin = self.graph.lookup(key)
            if vuin is None or vuin in ids:
                continue
            if self.settings.op_userid_type == "raw":
                ids[vuin] = key.openid
            else:
                ids[vuin] = _qq_number(self.graph.show(vuin).identities) or vuin
        return ids


@dataclass(slots=True)
class _People:
    """The people of a batch (their identity keys, per event) and their vUINs: found, or
    None until :meth:`InboundBridge._resolve_unknown` resolves the ``unknown`` ones."""

    keys: list[list[list[IdentityKey]]]
    found: list[list[int | None]]
    unknown: dict[tuple[tuple[IdentityKey, ...], str | None], int]

    def vuins(self) -> list[list[int]]:
        return cast(list[list[int]], self.found)


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A batch of one bot whose people are known, before its message ids are stored."""

    events: Sequence[QQEvent]
    kinds: Sequence[Translator[Any]]
    vuins: list[list[int]]
    contents: list[list[Segment] | None]
    wanted: list[tuple[str, Any] | None]


async def translate_together(parts: Sequence[tuple[InboundBridge, Sequence[QQEvent]]]
                             ) -> list[list[list[dict[str, Any]]]]:
    """:meth:`InboundBridge.translate_many` of several bots' batches (bridges over one graph
    and one message-id map) at the price of one: the people every bot knows looked up, the
    new ones of all resolved at once, the message ids of all stored by one write, then each
    bot's events built; per part, in order."""
    looked: list[tuple[list[Translator[Any]], _People]] = []
    for bridge, events in parts:
        kinds = [TRANSLATORS[type(event)] for event in events]
        looked.append((kinds, bridge._look_up_people(events, kinds)))
    if any(people.unknown for _, people in looked):
        await asyncio.gather(*(bridge._resolve_unknown(events, people)
                               for (bridge, events), (_, people) in zip(parts, looked,
                                                                        strict=True)
                               if people.unknown))
    prepared = [await bridge._prepared(events, kinds, people.vuins())
                for (bridge, events), (kinds, people) in zip(parts, looked, strict=True)]
    items = [item for batch in prepared for item in batch.wanted if item]
    stored = iter(await parts[0][0].msgids.store_many(items)) if parts else iter(())
    return [await bridge._built(batch, stored)
            for (bridge, _), batch in zip(parts, prepared, strict=True)]


def _written(future: asyncio.Future[bool]) -> bool:
    return (future.done() and not future.cancelled() and future.exception() is None
            and future.result() is True)


def _qq_number(identities: Sequence[str]) -> int | None:
    """The lowest-index QQ rUIN of an identity set, as a number (None if there is none)."""
    numbers = []
    for key in identities:
        if key.startswith("ruin:QQ:"):
            _, _, index, value = key.split(":", 3)
            if value.isascii() and value.isdigit():
                numbers.append((int(index), int(value)))
    return min(numbers)[1] if numbers else None


def _with_ids(event: dict[str, Any], ids: Mapping[int, int | str]) -> dict[str, Any]:
    """``event`` with its id fields (and ``sender.user_id``) swapped by ``ids``."""
    swapped = dict(event)
    for name in _ID_FIELDS:
        value = swapped.get(name)
        if isinstance(value, int) and value in ids:
            swapped[name] = ids[value]
    sender = swapped.get("sender")
    if isinstance(sender, dict) and sender.get("user_id") in ids:
        swapped["sender"] = {**sender, "user_id": ids[sender["user_id"]]}
    return swapped


class EventSink(Protocol):
    """A downstream connection: takes a OneBot event without waiting (it queues), and may
    return a future that resolves once the framework confirmed the event."""

    def publish(self, event: dict[str, Any]) -> asyncio.Future[Any] | None: ...


@runtime_checkable
class FanOutSink(Protocol):
    """A sink that hands each event to every connection it has at the moment (the forward
    WS server): none when no framework is connected. The events-out counter counts what was
    handed over, so an event it had nobody to hand to is not counted."""

    @property
    def connections(self) -> int: ...


#: An event published to a tracked framework: (its backlog, entry id, future)
_Owed = tuple[EventBacklog, int, "asyncio.Future[bool]"]


class InboundPipeline:
    """Platform event → bridge → every sink, keeping each chat's events in arrival order.

    Deliveries (single events, or batches) are processed concurrently (one slow chat must
    not hold up the others), but two of the same chat take turns in the order they arrived
    (:mod:`gensokyo_idmap.bridge.chat_turns`): the one that came first translates and publishes
    first. A delivery already processed (webhook retry, gateway replay, both sources at
    once; before a restart too, when the log keeps durable claims) is skipped.

    A delivery is done (the source may acknowledge it to the platform) once every framework
    has each of its events confirmed or durably owed (docs/delivery.md): the pipeline waits up to
    ``delivery_wait`` for the confirmations of frameworks that are connected and answering,
    then writes what is still unconfirmed to the outbox of the tracked ones (reverse WS,
    HTTP POST: sinks with a :class:`~gensokyo_idmap.bridge.outbox.Backlog`); events a backlog
    spilled are durable once their future is True.

    One pipeline is one bot's; the bots of a daemon share its delivery log and chat turns,
    and :class:`SharedBatches` processes a batch holding several bots' events at the price
    of one (:func:`process_together`).
    """

    def __init__(self, bridge: InboundBridge, sinks: Sequence[EventSink],
                 deliveries: DeliveryLog | None = None,
                 acknowledge: Callable[[Interaction], Awaitable[None]] | None = None, *,
                 key_scope: str = "", turns: ChatTurns | None = None) -> None:
        """``key_scope``: what each delivery's key starts with, so that bots sharing one
        delivery log each keep their own (``<AppID>:`` in a daemon of several; one bot's
        keys are as they always were). ``turns``: the chat turns, shared by the bots of a
        daemon (their chats never meet: a chat's scene names its AppID)."""
        self.bridge = bridge
        self._scope = key_scope
        self.sinks = list(sinks)
        self._acknowledge = acknowledge
        self._turns = turns if turns is not None else ChatTurns()
        self._deliveries = deliveries if deliveries is not None else DeliveryLog()
        # decided once: a runtime protocol check per event and sink costs more than the rest
        self._tracked = [isinstance(sink, TrackedSink) and sink.backlog is not None
                         for sink in self.sinks]
        bot = bridge.settings.app_id
        self._sent = [(counters.EVENTS_OUT.labels(counters.transport_of(s), bot),
                       s if isinstance(s, FanOutSink) else None) for s in self.sinks]
        self.duplicates = 0
        self.delivery_wait = 2.0

    async def _acknowledge_quietly(self, event: Interaction) -> None:
        """The platform wants every interaction acknowledged; a failure is logged, not
        raised (the event itself was processed and must not be redelivered for it)."""
        assert self._acknowledge is not None
        try:
            await self._acknowledge(event)
        except IdmapError as err:
            log.warning("[qq] interaction not acknowledged", id=event.interaction_id,
                        reason=err.message)

    async def __call__(self, event: QQEvent) -> None:
        """Process ``event`` once; raise if it could not be (the source must redeliver)."""
        await self.process_batch([event])

    async def process_batch(self, events: Sequence[QQEvent]) -> None:
        """Process each of ``events`` once, in order; raise if they could not all be (the
        source must redeliver them: those that were processed are then skipped).

        A batch (the gateway hands over every frame it read in one turn of the loop) costs
        one task, one wait for its identities and message ids and one wait for the sockets,
        where one event at a time cost each of them per event: most of an event's price
        when the users are known.
        """
        await process_together([(self, event) for event in events])


async def process_together(items: Sequence[tuple[InboundPipeline, QQEvent]]) -> None:
    """:meth:`InboundPipeline.process_batch` of events of one or several bots (each with
    its bot's pipeline; they share one delivery log and one set of chat turns), in order:
    one look at the claims, one turn of the chats, each bot's translation at once (their
    writes share a commit), one wait for every framework's confirmation, one claims commit,
    however many bots the events are of. Raise if they could not all be processed."""
    first = items[0][0] if items else None
    if first is None:
        return
    deliveries = first._deliveries
    keys: list[str | None] = []
    fresh: list[tuple[InboundPipeline, QQEvent]] = []
    repeats: list[tuple[str, asyncio.Future[None]]] = []
    all_keys: list[str | None] = []
    for pipeline, event in items:
        key = delivery_key(event)
        all_keys.append(None if key is None else pipeline._scope + key)
    claims = await deliveries.claim_all(all_keys)
    for (pipeline, event), key, earlier in zip(items, all_keys, claims, strict=True):
        if earlier is not None:
            assert key is not None
            pipeline.duplicates += 1
            repeats.append((key, earlier))
            continue
        keys.append(key)
        fresh.append((pipeline, event))
    try:
        if fresh:
            await _deliver(first._turns, fresh, keys)
            await deliveries.commit(keys)  # durable claims, before the source's ack
    except BaseException as exc:
        deliveries.finish_all(keys, exc)
        raise
    deliveries.finish_all(keys, None)
    for key, earlier in repeats:
        await earlier  # a repeat: the first delivery's outcome is this one's too
        log.info("[message] duplicate delivery skipped", key=key)


async def _translate(items: list[tuple[InboundPipeline, QQEvent]]
                     ) -> list[list[dict[str, Any]]]:
    """Each event's OneBot events, by its bot's bridge: every bot's at once
    (:func:`translate_together`)."""
    first = items[0][0]
    if all(pipeline is first for pipeline, _ in items):  # one bot: as it always was
        return await first.bridge.translate_many([event for _, event in items])
    places: dict[InboundPipeline, list[int]] = {}
    for place, (pipeline, _) in enumerate(items):
        places.setdefault(pipeline, []).append(place)
    done = await translate_together([(pipeline.bridge, [items[i][1] for i in where])
                                     for pipeline, where in places.items()])
    translated: list[list[dict[str, Any]]] = [[] for _ in items]
    for where, results in zip(places.values(), done, strict=True):
        for place, result in zip(where, results, strict=True):
            translated[place] = result
    return translated


async def _deliver(turns: ChatTurns, items: list[tuple[InboundPipeline, QQEvent]],
                   keys: list[str | None]) -> None:
    written: list[asyncio.Future[Any]] = []
    owed: list[_Owed] = []
    spilled: list[asyncio.Future[bool]] = []
    async with turns.turn(*(event.scene for _, event in items)):
        translated = await _translate(items)
        for (pipeline, _), onebot_events, key in zip(items, translated, keys, strict=True):
            sinks, tracked_sinks = pipeline.sinks, pipeline._tracked
            for onebot_event in onebot_events:
                for sent, fan_out in pipeline._sent:
                    sent.inc(1 if fan_out is None else fan_out.connections)
                for sink, tracked in zip(sinks, tracked_sinks, strict=True):
                    if tracked:
                        durable = cast(TrackedSink, sink)
                        future, wait, entry = durable.publish_tracked(onebot_event, key)
                        if entry:
                            owed.append((cast(EventBacklog, durable.backlog), entry,
                                         future))
                        else:
                            spilled.append(future)
                        if wait:
                            written.append(future)
                        continue
                    published = sink.publish(onebot_event)
                    if published is not None:
                        written.append(published)
    if written:
        # Frameworks that are connected and answering confirm it before the source is
        # told "done" (the webhook's ack); a stuck one delays the ack by at most this.
        await wait_all(written, max(pipeline.delivery_wait for pipeline, _ in items))
    await _keep_owed(owed, spilled)
    for pipeline, event in items:
        if pipeline._acknowledge is not None and isinstance(event, Interaction):
            await pipeline._acknowledge_quietly(event)


async def _keep_owed(owed: list[_Owed], spilled: list[asyncio.Future[bool]]) -> None:
    """Events a framework has not confirmed go to the outbox before the source is told
    "done", with every one published to it before them (rules of the outbox module): a
    crash now costs nothing, and per-chat order survives it."""
    through: dict[EventBacklog, int] = {}
    for backlog, entry, future in owed:
        if not _written(future) and entry > through.get(backlog, 0):
            through[backlog] = entry
    if through:  # concurrent: the outbox's group commit takes them together
        await asyncio.gather(*(backlog.keep_through(entry)
                               for backlog, entry in through.items()))
    for future in spilled:
        if not await future:
            raise StoreError("outbox.db: events a framework is owed could not be written")


class SharedBatches:
    """The daemon's bots' events handed over one at a time (webhook callbacks), or a batch
    at a time (each bot's gateway), processed a turn of the loop at a time together
    (:mod:`~gensokyo_idmap.bridge.turn_batches`, :func:`process_together`): ten bots' events
    of one turn cost one batch, not ten, as one bot's do."""

    def __init__(self) -> None:
        self._batches: TurnBatches[tuple[InboundPipeline, QQEvent]] = TurnBatches(
            process_together)

    def of(self, pipeline: InboundPipeline) -> Callable[[QQEvent], Awaitable[None]]:
        """What hands one event of ``pipeline``'s bot over (a webhook's entry)."""
        batches = self._batches

        def hand_over(event: QQEvent) -> Awaitable[None]:
            return batches((pipeline, event))

        return hand_over

    def batches_of(self, pipeline: InboundPipeline
                   ) -> Callable[[Sequence[QQEvent]], Awaitable[None]]:
        """What hands a batch of ``pipeline``'s bot over (a gateway's entry)."""
        batches = self._batches

        async def hand_over(events: Sequence[QQEvent]) -> None:
            await batches.add_all([(pipeline, event) for event in events])

        return hand_over

    async def drain(self) -> None:
        """Wait for the batches under way (:meth:`TurnBatches.drain`)."""
        await self._batches.drain()
