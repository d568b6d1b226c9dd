"""The high-water mark of virtual message ids, kept in the precious store, so that losing
the disposable one (msgid-map.db moved aside, Redis flushed or restarted) never hands an id
out a second time.

Rules this module keeps:

1. **Positions, not ids.** Allocation walks a position that only grows (1, 2, 3, …; it is
   what ``msg_counter`` and a daemon's Redis position hold); the virtual id of a position is
   :func:`virtual_id_at`, from 1 to 2**31-1 and then from 1 again. So an id comes back only
   after 2**31-1 further positions, and then only if no live record holds it
   (:mod:`gensokyo_idmap.runtime.msgid` skips those).
2. **Reserved before used.** A process hands out a position only once the precious store
   (openid-map.db ``meta``, or PostgreSQL's ``meta`` with ``idmap.backend: postgres``)
   durably holds ``msg_reserved`` at or above it: a block of :data:`BLOCK` positions is
   reserved in one durable write, so the hot path writes nothing extra.
3. **A block starts above the mark it found.** Each reservation raises the mark from
   ``held`` to ``max(held, at_least) + block`` in one transaction (SERIALIZABLE on
   PostgreSQL: two daemons never get the same block) and the process goes on from above
   ``held``. A process's first id therefore comes after every position any process of
   that store reserved before, whatever the disposable store still remembers.
4. **Reserved ahead.** A process's first block is reserved when its first id is wanted
   (a daemon that stores nothing writes nothing); once half a block is used, the next one
   is reserved on a thread of its own, and allocation waits for it (at most
   :data:`WAIT_SECONDS`) only if it runs out first: one durable write takes milliseconds,
   half a block of ids far longer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Final

from gensokyo_idmap.errors import StoreError
from gensokyo_idmap.store.base import IdentityStore, IdentityWriter

__all__ = ["BLOCK", "MSG_RESERVED", "UNBOUNDED", "WAIT_SECONDS", "IdBlocks", "reserve_in",
           "virtual_id_at"]

INT32_MAX: Final = 2**31 - 1
#: The ``meta`` entry of the precious store holding the highest position reserved.
MSG_RESERVED: Final = "msg_reserved"
#: Positions reserved by one durable write.
BLOCK: Final = 10_000
#: The longest a store waits for a block (on the event loop with msgid-map.db, as a
#: PostgreSQL read of the graph may: ``store.postgres.connection.LOOP_WAIT_SECONDS``); then
#: it fails (the event is not acknowledged) and the next store waits for the same
#: reservation.
WAIT_SECONDS: Final = 2.0
#: The limit of a process without a mark (tests, benchmarks): never reached.
UNBOUNDED: Final = 2**62

#: ``reserve(at_least)`` → (the mark found, the mark now held): durable on return.
Reserve = Callable[[int], tuple[int, int]]


def virtual_id_at(position: int) -> int:
    """The virtual id of an allocation position (rule 1): 1 … 2**31-1, then 1 again."""
    return (position - 1) % INT32_MAX + 1


def _mark(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def reserve_in(store: IdentityStore, at_least: int, block: int = BLOCK) -> tuple[int, int]:
    """Raise ``msg_reserved`` of ``store`` to above ``at_least`` and the mark it held, by
    ``block``; (the mark found, the new one), once durable (rule 3)."""

    def raise_mark(view: IdentityWriter) -> tuple[int, int]:
        held = _mark(view.get_meta(MSG_RESERVED))
        new = max(held, at_least) + block
        view.set_meta(MSG_RESERVED, new)
        return held, new

    return store.write_sync(raise_mark)


class IdBlocks:
    """The positions this process may hand out: up to :attr:`limit`, reserved durably.

    The hot path compares a position with :attr:`soon` and calls :meth:`advance` only past
    it (twice a block). Calls are serialised by the caller (msgid-map.db's writer lock,
    the one Redis store script on the wire), and the lock guards them anyway.
    """

    def __init__(self, reserve: Reserve | None, block: int = BLOCK,
                 wait_seconds: float = WAIT_SECONDS) -> None:
        """``reserve`` None: no mark (nothing is reserved, nothing is ever waited for)."""
        self._reserve = reserve
        self._block = block
        self._wait = wait_seconds
        self._lock = threading.Lock()
        self._next: Future[tuple[int, int]] | None = None
        self._thread: threading.Thread | None = None
        self.limit = 0 if reserve is not None else UNBOUNDED
        self.soon = self.limit

    def advance(self, position: int) -> int:
        """The position to hand out for ``position``, past :attr:`soon`: within a block
        reserved (waiting for it when this one ran out; a block another process reserved
        in between is stepped over), the next block asked for once half this one is used.
        :class:`StoreError` when the precious store cannot take the reservation."""
        with self._lock:
            while position > self.limit:
                if self._next is None:
                    self._next = self._start(max(position - 1, self.limit))
                try:
                    held, new = self._next.result(timeout=self._wait)
                except TimeoutError:  # kept: the next store waits for the same one
                    raise StoreError(
                        "virtual message ids cannot be reserved now: the identity store has "
                        f"not committed the reservation within {self._wait:g} s") from None
                except StoreError as exc:
                    self._next = None
                    raise StoreError("virtual message ids cannot be reserved in the identity "
                                     f"store: {exc.message}") from exc
                self._next = None
                self.limit = new
                position = max(position, held + 1)
            if self._next is None and position > self.limit - self._block // 2:
                self._next = self._start(self.limit)
            self.soon = self.limit if self._next is not None else self.limit - self._block // 2
            return position

    def _start(self, at_least: int) -> Future[tuple[int, int]]:
        """Reserve on a thread of its own (rule 4)."""
        assert self._reserve is not None  # a limit is reached only with a mark
        reserve, done = self._reserve, Future[tuple[int, int]]()

        def run() -> None:
            try:
                done.set_result(reserve(at_least))
            except BaseException as exc:  # noqa: BLE001 - whoever waits for it hears it
                done.set_exception(exc)

        self._thread = threading.Thread(target=run, name="msgid-reserve", daemon=True)
        self._thread.start()
        return done

    def close(self) -> None:
        """Wait for a reservation under way (before the precious store closes)."""
        thread = self._thread
        if thread is not None:
            thread.join()
