"""The storage interface of the message-id map (msgid-map.db, or any store of the runtime
state written against it): records, the content kept beside them, delivery claims.

Disposable: losing what it holds loses reply context and de-duplication memory, never an
identity. Write functions follow the same batch contract as the identity graph's
(:mod:`gensokyo_idmap.store.base`): a function that raises an
:class:`~gensokyo_idmap.errors.IdmapError` does so before its first write.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol, TypeVar

__all__ = ["MsgContent", "MsgIdCounts", "MsgIdReader", "MsgIdStore", "MsgIdWriter", "MsgRecord"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class MsgRecord:
    """One live mapping of a real platform message id to a virtual (int32) id.

    Times are integer milliseconds so the ordered ``expires_at`` keys and the record agree
    exactly.
    """

    virtual_id: int
    real_id: str
    app_id: str
    chat_kind: str  # "group", "c2c", "guild", … (the platform's chat type)
    target: str  # the chat's OpenID / channel id
    direction: str  # "in" (received) or "out" (sent by us)
    created_ms: int
    expires_ms: int


@dataclass(frozen=True, slots=True)
class MsgContent:
    """Who wrote a message and what it said, kept beside its id mapping and expiring with
    it, so ``get_msg`` can answer with the message itself.

    ``author`` is the vUIN of whoever wrote it (the bot's ``self_id`` for what it sent; 0:
    not known). ``message`` is its OneBot content as CQ-code text (bounded by the caller),
    or None when the text was not kept (``idmap.keep_message_content: false``).
    ``alias`` is the message's second key in the real → virtual index, pointing at the
    same virtual id (its chat and the platform's ``msg_idx``: what a quote of it names,
    :func:`gensokyo_idmap.runtime.msgid.quote_key`), or None; it is written and deleted with the
    record, and a lookup by it checks that the record still names it.
    """

    author: int
    message: str | None
    alias: str | None = None


@dataclass(frozen=True, slots=True)
class MsgIdCounts:
    live_or_unswept: int
    counter: int


class MsgIdReader(Protocol):
    def virtual_of(self, real_id: str) -> int | None: ...
    def record(self, virtual_id: int) -> MsgRecord | None: ...
    def content(self, virtual_id: int) -> MsgContent | None:
        """The author and content kept with the record of ``virtual_id``; None when none
        were (a record written before they were kept)."""
        ...
    def expired(self, now_ms: int, limit: int) -> list[tuple[int, int]]:
        """(expires_ms, virtual_id) of entries expired at ``now_ms``, oldest first."""
        ...
    def latest_inbound(
        self, app_id: str, chat_kind: str, target: str, now_ms: int, since_ms: int,
        before: MsgRecord | None = None,
    ) -> MsgRecord | None:
        """The newest live inbound message of a chat created in [since_ms, now_ms]; with
        ``before``, the newest one older than that record (the next candidate)."""
        ...
    def inbound_walk(self, app_id: str, chat_kind: str, target: str, now_ms: int,
                     since_ms: int) -> Callable[[tuple[int, int] | None], MsgRecord | None]:
        """:meth:`latest_inbound` of one chat below a position ((created ms, virtual id);
        None: the newest), as often as asked within this transaction."""
        ...
    def msg_counter(self) -> int:
        """The position of the last virtual id handed out (0: none): it only grows, the
        id wraps (``blocks.virtual_id_at``)."""
        ...
    def counts(self) -> MsgIdCounts: ...
    def recent(self, before: tuple[int, int] | None, now_ms: int, limit: int,
               scanned: int) -> list[MsgRecord]:
        """Up to ``limit`` live records (expiring after ``now_ms``), the newest created
        first, each created before the position ``before`` ((created ms, virtual id); None:
        from the newest), looking at ``scanned`` entries of the index at most (what is past
        its expiry and not swept yet is stepped over): the recent messages, a page at a
        time."""
        ...

    # delivery claims (de-duplication across restarts): key text → expiry, nothing else.
    # Keys are text of at most 200 UTF-8 bytes (``claims.stored_key`` hashes longer ones). A backend
    # with native expiry (Redis: SET key PX) may report no expired claims and delete none.
    def claim_expiry(self, key: str) -> int | None:
        """When the claim of ``key`` expires (ms), None if there is none; an expired but
        unswept claim is still returned (the caller compares with its clock)."""
        ...
    def expired_claims(self, now_ms: int, limit: int) -> list[tuple[int, str]]:
        """(expires_ms, key) of claims expired at ``now_ms``, oldest first."""
        ...
    def last_claim_expiry(self) -> int | None:
        """When the claim that expires last expires (ms), None if there is none."""
        ...


class MsgIdWriter(MsgIdReader, Protocol):
    def put_record(self, record: MsgRecord, content: MsgContent | None = None) -> None:
        """Write ``record`` and its index entries, and ``content`` beside it (None: none)."""
        ...
    def delete_record(self, record: MsgRecord) -> None:
        """Delete ``record``, its index entries and the content kept beside it."""
        ...
    def delete_expiry(self, expires_ms: int, virtual_id: int) -> None: ...
    def set_msg_counter(self, value: int) -> None: ...
    def put_claims(self, keys: Sequence[str], expires_ms: int) -> None:
        """Claim each of ``keys`` until ``expires_ms``, replacing an earlier claim of it
        (one call for a batch: this runs for every event)."""
        ...
    def delete_claim(self, key: str, expires_ms: int) -> None:
        """Drop the claim of ``key`` if it still expires at ``expires_ms`` (a sweep)."""
        ...


class MsgIdStore(Protocol):
    """msgid-map.db: the disposable store (commits need not reach the disk)."""

    def read(self) -> AbstractContextManager[MsgIdReader]: ...
    def write(self, fn: Callable[[MsgIdWriter], T]) -> Awaitable[T]: ...
    def write_sync(self, fn: Callable[[MsgIdWriter], T]) -> T: ...
    def transact(self, fn: Callable[[MsgIdWriter], T]) -> T:
        """``fn`` alone in one transaction, committed before this returns, on the calling
        thread (cheap here: these commits do not wait for the disk)."""
        ...
    def health(self) -> str | None:
        """As :meth:`IdentityStore.health`."""
        ...
    def close(self) -> None: ...
