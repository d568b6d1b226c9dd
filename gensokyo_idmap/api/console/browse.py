"""The console's lists: identities, chats and messages, a page at a time (reads, no I/O of
its own beyond the stores it is handed).

Every page reads through the stores' interfaces (``store/base.py``, ``runtime/msgid.py``),
the same on every backend, and each reads about as many index entries as it shows: the
identities newest first (``vuins_below``), the chats in scene order (``scenes_after``, with
their member counts from the scene index), the messages newest first
(:meth:`~gensokyo_idmap.runtime.msgid.MessageIds.recent`). A filter is matched against the
rows of the entries read, at most :data:`SCAN` of them per page, never by a walk of the
graph: a page that found fewer rows than it shows says how far it looked, and its "older"
link goes on from there. docs/stores.md ("Browsing the stores") says which index each list
reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.identity import (
    QQ_PLATFORM,
    OpenId,
    RawId,
    chat_scene,
    parse_key,
    parse_scene,
)
from gensokyo_idmap.runtime.base import MsgContent, MsgRecord
from gensokyo_idmap.runtime.msgid import EVENT_KINDS, MessageIds
from gensokyo_idmap.runtime.replies import MAX_REPLIES, REPLY_WINDOW_SECONDS
from gensokyo_idmap.store.base import IdentityReader, IdentityStore, LastSeen

__all__ = [
    "CHAT_KINDS",
    "PAGE",
    "SCAN",
    "ChatPage",
    "ChatRow",
    "IdentityPage",
    "IdentityRow",
    "MessagePage",
    "MessageRow",
    "RepliesUsed",
    "chat_key",
    "chat_of_record",
    "chat_page",
    "chat_row",
    "identity_page",
    "message_page",
    "message_row",
]

#: Rows a page shows.
PAGE: Final = 50
#: Index entries a page reads at most while a filter turns rows down.
SCAN: Final = 500
#: Keys of one vUIN a row of the identities list names (the others are counted).
KEYS_SHOWN: Final = 6
#: Inbound messages of a chat the reply budget looks at, newest first.
BUDGET_MESSAGES: Final = 20
#: The kinds of chat, as scenes name them: groups and guild channels have members.
CHAT_KINDS: Final = ("group", "channel", "c2c", "dms")
_BASE_KIND: Final = {event: kind for kind, event in EVENT_KINDS.items()}
E = TypeVar("E")
R = TypeVar("R")
C = TypeVar("C")

#: How many replies a bot (its AppID) gave a received message (its real id): that bot's reply
#: counts (:class:`~gensokyo_idmap.runtime.replies.ReplyBudget` or its Redis twin: each bot
#: counts its own); None: not known.
RepliesUsed = Callable[[str, str], int]


def _matches(needle: str, *texts: object) -> bool:
    return not needle or any(needle in str(text).casefold() for text in texts)


def chat_key(kind: str, target: str, app_id: str, platform: str = QQ_PLATFORM) -> str | None:
    """The identity key a chat is known by in the graph (its vUIN is the chat's ``group_id``
    or ``user_id``): a group's or C2C user's OpenID, a channel's ``raw:`` id; None for a
    guild DM session (its author is the person, not the session)."""
    try:
        if kind in ("group", "c2c"):
            return OpenId(app_id, target, platform).key
        if kind == "channel":
            return RawId(target).key
    except BadInputError:
        return None
    return None


def chat_of_record(record: MsgRecord) -> tuple[str, str]:
    """(chat kind, scene) of a message record: an event kind (``group-event``) names its
    chat's kind."""
    kind = _BASE_KIND.get(record.chat_kind, record.chat_kind)
    return kind, chat_scene(record.app_id, kind, record.target)


@dataclass(slots=True)
class _Walked(Generic[R, C]):
    rows: list[R]
    last: C | None  # the position of the last entry read
    scanned: int
    ended: bool  # nothing after it


def _walk(fetch: Callable[[C | None, int], Sequence[E]], start: C | None,
          position: Callable[[E], C], row_of: Callable[[E], R],
          texts: Callable[[R], Sequence[object]], needle: str, size: int,
          scan: int) -> _Walked[R, C]:
    """Rows of the entries ``fetch`` gives from ``start`` on (``fetch(at, n)``: up to
    ``n`` entries after the position ``at``), those whose ``texts`` hold ``needle``, until
    ``size`` rows or ``scan`` entries: unfiltered, as many entries as rows (and one to know
    whether more follow)."""
    needle = needle.strip().casefold()
    rows: list[R] = []
    scanned, at = 0, start
    while len(rows) < size and scanned < scan:
        want = size - len(rows) if not needle else min(size, scan - scanned)
        found = fetch(at, want)
        for entry in found:
            scanned += 1
            at = position(entry)
            if len(rows) < size:
                row = row_of(entry)
                if _matches(needle, *texts(row)):
                    rows.append(row)
        if len(found) < want:
            return _Walked(rows, at, scanned, True)
    return _Walked(rows, at, scanned, not fetch(at, 1))


# --- identities -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IdentityRow:
    vuin: int
    keys: tuple[str, ...]
    more_keys: int
    bots: tuple[str, ...]
    #: the newest ``last_seen`` entry: (scene, what was used there and since when)
    seen: tuple[str, LastSeen] | None
    scenes: int


@dataclass(frozen=True, slots=True)
class IdentityPage:
    rows: tuple[IdentityRow, ...]
    #: where the next page starts (the lowest vUIN read); None: nothing below
    below: int | None
    scanned: int


def _identity_row(view: IdentityReader, vuin: int) -> IdentityRow:
    keys = view.identities_of(vuin)
    seen = view.last_seen_all(vuin)
    bots: list[str] = []
    for key in keys:
        try:
            parsed = parse_key(key)
        except BadInputError:
            continue
        if isinstance(parsed, OpenId) and parsed.app_id not in bots:
            bots.append(parsed.app_id)
    newest = max(seen, key=lambda entry: entry[1].since, default=None)
    return IdentityRow(vuin, tuple(keys[:KEYS_SHOWN]), max(0, len(keys) - KEYS_SHOWN),
                       tuple(bots), newest, len(seen))


def identity_page(store: IdentityStore, below: int | None, needle: str = "",
                  size: int = PAGE, scan: int = SCAN) -> IdentityPage:
    """The vUINs below ``below``, newest first, whose vUIN, keys or scenes hold ``needle``
    (any case; empty: every one)."""
    with store.read() as view:
        walked = _walk(view.vuins_below, below, lambda vuin: vuin,
                       lambda vuin: _identity_row(view, vuin),
                       lambda row: (row.vuin, *row.keys, *(row.seen[:1] if row.seen else ())),
                       needle, size, scan)
    return IdentityPage(tuple(walked.rows), None if walked.ended else walked.last,
                        walked.scanned)


# --- chats ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChatRow:
    scene: str
    app_id: str
    kind: str
    target: str
    vuin: int | None
    #: vUINs last seen in the chat, the chat's own identity not counted
    members: int
    last: MsgRecord | None = None
    last_content: MsgContent | None = None
    #: replies the platform would still take in this chat now (None: not known here)
    replies_left: int | None = None
    #: messages still in their reply window (of the newest :data:`BUDGET_MESSAGES`)
    replyable: int = 0

    @property
    def budget_capped(self) -> bool:
        """Whether more messages may be in their window than were looked at (then the
        replies left are at least :attr:`replies_left`)."""
        return self.replyable >= BUDGET_MESSAGES


@dataclass(frozen=True, slots=True)
class ChatPage:
    rows: tuple[ChatRow, ...]
    after: str | None
    scanned: int
    kinds: tuple[str, ...] = field(default=CHAT_KINDS)


def _budget(msgids: MessageIds, app_id: str, kind: str, target: str,
            used: RepliesUsed | None) -> tuple[int | None, int]:
    """(replies left, messages in their window) of a chat, from its newest inbound
    messages (at most :data:`BUDGET_MESSAGES`): each takes :data:`MAX_REPLIES` replies."""
    window = REPLY_WINDOW_SECONDS.get(kind)
    if window is None:
        return None, 0
    found: list[MsgRecord] = []
    with msgids.inbound_walk(app_id, kind, target, window) as below:
        at: tuple[int, int] | None = None
        while len(found) < BUDGET_MESSAGES:
            record = below(at)
            if record is None:
                break
            found.append(record)
            at = (record.created_ms, record.virtual_id)
    if used is None:
        return None, len(found)
    return (sum(max(0, MAX_REPLIES - used(app_id, record.real_id)) for record in found),
            len(found))


def chat_row(view: IdentityReader, msgids: MessageIds, scene: str, members: int,
             used: RepliesUsed | None) -> ChatRow:
    """One chat: its vUIN, members, newest message and reply budget."""
    platform, app_id, kind, target = parse_scene(scene)
    key = chat_key(kind, target, app_id, platform)
    vuin = None if key is None else view.vuin_of(key)
    if vuin is not None and view.last_seen(vuin, scene) is not None:
        members -= 1  # a group's own OpenID is last seen in its own chat: not a member
    last: MsgRecord | None = None
    content: MsgContent | None = None
    kinds = [kind, EVENT_KINDS[kind]] if kind in EVENT_KINDS else [kind]
    newest = msgids.newest_inbound(app_id, kinds, target)
    if newest is not None:
        found = msgids.lookup_content(newest[1])
        if found is not None:
            last, content = found
    left, replyable = _budget(msgids, app_id, kind, target, used)
    return ChatRow(scene, app_id, kind, target, vuin, max(0, members), last, content, left,
                   replyable)


def chat_page(store: IdentityStore, msgids: MessageIds, after: str | None,
              apps: Sequence[str], kinds: Sequence[str] = ("group", "channel"),
              needle: str = "", used: RepliesUsed | None = None,
              size: int = PAGE, scan: int = SCAN) -> ChatPage:
    """The chats seen after the scene ``after``, in scene order: of ``kinds`` and of the
    bots ``apps`` (each kind of each bot is one prefix of the scene index, walked in
    order; no bot named: every scene, the kinds picked out of them), whose scene or vUIN
    holds ``needle``."""
    needle = needle.strip().casefold()
    kinds = tuple(kind for kind in CHAT_KINDS if kind in kinds) or CHAT_KINDS
    prefixes = sorted(chat_scene(app, kind, "") for app in dict.fromkeys(apps)
                      for kind in kinds) or [""]
    rows: list[ChatRow] = []
    scanned = 0
    with store.read() as view:
        for prefix in prefixes:
            if after is not None and prefix and not (after < prefix or after.startswith(prefix)):
                continue  # a prefix the pages before have walked whole
            while len(rows) < size and scanned < scan:
                want = size - len(rows) if not needle and prefix else min(size, scan - scanned)
                scenes = view.scenes_after(prefix, after, want)
                for scene, members in scenes:
                    scanned += 1
                    after = scene
                    try:
                        kind = parse_scene(scene)[2]
                    except BadInputError:
                        continue
                    if kind not in kinds or len(rows) >= size:
                        continue
                    row = chat_row(view, msgids, scene, members, used)
                    if _matches(needle, scene, row.vuin if row.vuin is not None else ""):
                        rows.append(row)
                if len(scenes) < want:
                    break  # this prefix is walked whole
            if len(rows) >= size or scanned >= scan:
                break
        more = any(view.scenes_after(prefix, after, 1) for prefix in prefixes
                   if after is None or not prefix or after < prefix
                   or after.startswith(prefix))
    return ChatPage(tuple(rows), after if more else None, scanned, kinds)


# --- messages -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MessageRow:
    record: MsgRecord
    content: MsgContent | None
    kind: str
    scene: str
    #: the vUIN of the chat (its group or user)
    chat_vuin: int | None

    @property
    def position(self) -> tuple[int, int]:
        return (self.record.created_ms, self.record.virtual_id)


@dataclass(frozen=True, slots=True)
class MessagePage:
    rows: tuple[MessageRow, ...]
    before: tuple[int, int] | None
    scanned: int


def message_row(view: IdentityReader, record: MsgRecord, content: MsgContent | None
                ) -> MessageRow:
    kind, scene = chat_of_record(record)
    key = chat_key(kind, record.target, record.app_id)
    return MessageRow(record, content, kind, scene, None if key is None else view.vuin_of(key))


def message_page(store: IdentityStore, msgids: MessageIds, before: tuple[int, int] | None,
                 needle: str = "", size: int = PAGE, scan: int = SCAN) -> MessagePage:
    """The live messages created before ``before``, newest first, whose virtual id, chat,
    author or text holds ``needle``."""
    def texts(row: MessageRow) -> tuple[object, ...]:
        content = row.content
        return (row.record.virtual_id, row.scene, row.chat_vuin or "",
                content.author if content is not None else "",
                content.message or "" if content is not None else "")

    with store.read() as view:
        walked = _walk(msgids.recent, before,
                       lambda found: (found[0].created_ms, found[0].virtual_id),
                       lambda found: message_row(view, *found), texts, needle, size, scan)
    return MessagePage(tuple(walked.rows), None if walked.ended else walked.last,
                       walked.scanned)
