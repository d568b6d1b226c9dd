"""How many wrong tokens a client may present before it is refused for a while (pure:
addresses and a clock in, decisions out).

One rule for every place a secret is typed or sent, so a client on the network cannot guess
it as fast as it can send: ``api.token`` at the console's login form, on ``/v1/…`` and on
``/getid`` (one :class:`FailureLimit` for the three, shared: a guesser gets 10 a minute in
all, not 10 at each), and the OneBot access tokens on the forward WebSocket and the HTTP
API (one more, shared by those two: another secret, and a framework left with a stale
token must not lock its host out of the console).

A client may fail :attr:`FailureLimit.failures` times in :attr:`FailureLimit.window`
seconds; then it is answered 429 with ``Retry-After`` until the oldest of those failures is
a window old, and after that one more try each time another one ages out: 10 a minute on
average, for as long as it keeps guessing. While refused, its token is not compared at all,
not even the right one: were the right token let in, the answer would still tell a right
guess from a wrong one, and the limit would limit nothing. The operator waits out the
minute (the answer says how long) or comes from another address.

A client is its address (behind ``api.trusted_proxies``, the one the proxy names); an IPv6
client counts by its /64, as one host is commonly given the whole of it. At most
:attr:`FailureLimit.clients` clients are kept, each with at most ``failures`` times: when
full, the one whose last failure is oldest is forgotten (its count starts again; a guesser
with that many addresses can spread its guesses over them anyway). A client is forgotten
too once a window passes without a failure.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from gensokyo_idmap.api.forwarded import parse_address
from gensokyo_idmap.tables import estimate

__all__ = ["FailureLimit", "client_key"]


def client_key(client: str | None) -> str:
    """What failures are counted by: the IPv4 address, the /64 of an IPv6 one, or the text
    itself when it is no address (a Unix socket's peer: all such count together)."""
    address = parse_address(client)
    if address is None:
        return client or ""
    if address.version == 6:
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


@dataclass(slots=True)
class _Client:
    times: list[float] = field(default_factory=list)  # the last failures, oldest first
    reported: bool = False  # its lockout has been logged


class FailureLimit:
    def __init__(self, failures: int = 10, window: float = 60.0, clients: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.failures = failures
        self.window = window
        self.clients = clients
        self._clock = clock
        self._seen: OrderedDict[str, _Client] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    def retry_after(self, client: str | None) -> int:
        """Whole seconds until ``client`` may try again (0: now). Asked at every request
        that presents a token: with no failure kept, no address is parsed."""
        if not self._seen:
            return 0
        entry = self._seen.get(client_key(client))
        if entry is None or len(entry.times) < self.failures:
            return 0
        wait = entry.times[0] + self.window - self._clock()
        return math.ceil(wait) if wait > 0 else 0

    def failed(self, client: str | None) -> bool:
        """Count a wrong token from ``client``; True when this one starts its lockout and it
        has not been logged since the client's last quiet window (log it then, once)."""
        key, now = client_key(client), self._clock()
        entry = self._seen.pop(key, None)
        if entry is None or now - entry.times[-1] > self.window:
            entry = _Client()  # new, or quiet for a window: counted afresh
        entry.times = [*entry.times[1 - self.failures:], now] if self.failures > 1 else [now]
        self._seen[key] = entry
        while len(self._seen) > self.clients:
            self._seen.popitem(last=False)
        locked = len(entry.times) == self.failures and now - entry.times[0] < self.window
        if not locked or entry.reported:
            return False
        entry.reported = True
        return True

    def succeeded(self, client: str | None) -> None:
        """The right token: the client's failures are forgotten."""
        if self._seen:
            self._seen.pop(client_key(client), None)

    def forget(self) -> None:
        """Drop the clients whose last failure is a window old: their next failure counts
        afresh anyway (:meth:`failed`), and they wait for nothing (:meth:`retry_after`).
        The memory chore's call (:mod:`gensokyo_idmap.tables`)."""
        now = self._clock()
        seen = self._seen
        while seen:
            key, oldest = next(iter(seen.items()))  # the oldest last failure first
            if now - oldest.times[-1] <= self.window:
                break
            del seen[key]

    def footprint(self) -> int:
        return estimate(len(self._seen), (self._seen,), self._seen.items())
