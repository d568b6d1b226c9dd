"""What the console shows of the parts the API may not import (pure data), and what it may
ask of them.

The API layer never imports the QQ side, the OneBot side or the bridge (an import-linter
contract): the daemon, which holds them, hands the console a :data:`LinkStatus` callable
that describes them in these plain shapes, and :class:`Controls` for the few things an
operator may do to them from the console (``gensokyo_idmap/link_status.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias

from gensokyo_idmap.readiness import PlatformReadiness

__all__ = ["BotLink", "ConfigRow", "Controls", "FrameworkLink", "GatewayLink", "LinkStatus",
           "LinkView", "SendOutcome", "WebhookEvent"]


@dataclass(frozen=True, slots=True)
class GatewayLink:
    session_id: str | None
    seq: int | None
    resumes: int
    identifies: int
    pauses: int
    #: connecting, connected (a session established), paused (reading stops until events
    #: can be processed) or stopped (closed for good): ``link_metrics.GATEWAY_STATES``
    state: str = "connecting"


@dataclass(frozen=True, slots=True)
class WebhookEvent:
    event_type: str
    at: float  # unix seconds


@dataclass(frozen=True, slots=True)
class FrameworkLink:
    """One framework connection: its transport, its name (a URL without credentials, or
    a count of forward connections), and what it is owed: events handed over but not yet
    confirmed, and of them how many wait in outbox.db; ``problem``: why the framework
    refuses the connection, while it does (a reverse-WS handshake refused: the access
    token), else None."""

    transport: str
    name: str
    connected: bool | None
    owed: int
    durable: int
    problem: str | None = None
    #: the AppID of the bot whose events it carries ("": not told)
    bot: str = ""


@dataclass(frozen=True, slots=True)
class BotLink:
    """One bot's platform link: its names, its gateway session (None: off, or not made
    yet), its last webhook callback, and its platform side as ``/readyz`` judges it."""

    app_id: str
    self_id: int
    gateway: GatewayLink | None = None
    last_webhook: WebhookEvent | None = None
    platform: PlatformReadiness | None = None


@dataclass(frozen=True, slots=True)
class LinkView:
    """The daemon's links: each bot's (``bots``, in the config's order; empty: not told
    per bot), and, as one bot's daemon always showed them, the first bot's gateway and
    platform side, the newest webhook callback of any bot, and every bot's frameworks."""

    gateway: GatewayLink | None = None
    webhook: bool = False
    last_webhook: WebhookEvent | None = None
    frameworks: tuple[FrameworkLink, ...] = field(default_factory=tuple)
    #: the platform side as ``/readyz`` judges it (None: not known, nothing said of it)
    platform: PlatformReadiness | None = None
    bots: tuple[BotLink, ...] = field(default_factory=tuple)

    @property
    def platforms(self) -> list[PlatformReadiness]:
        """Each bot's platform side as ``/readyz`` judges it (``platform`` alone when not
        told per bot)."""
        told = [bot.platform for bot in self.bots if bot.platform is not None]
        return told or ([] if self.platform is None else [self.platform])


#: Called for each overview: what the daemon's platform link and frameworks look like now.
LinkStatus: TypeAlias = Callable[[], LinkView]


@dataclass(frozen=True, slots=True)
class ConfigRow:
    """One key of the running configuration: its path (``api.listen``), its value as it
    may be shown (a secret as ``***``, a URL without its credentials), and where it came
    from: ``file``, the ``GSK_*`` variable that set it, or ``default``."""

    path: str
    value: str
    source: str


@dataclass(frozen=True, slots=True)
class SendOutcome:
    """What became of a test message: sent (its virtual message id) or not, the OneBot
    retcode, and what the daemon or the platform said."""

    ok: bool
    retcode: int
    detail: str
    message_id: int | None = None


class Controls(Protocol):
    """What the console may ask of the daemon beyond its stores (the daemon's
    :class:`~gensokyo_idmap.link_status.LinkWatch`)."""

    def config_rows(self) -> Sequence[ConfigRow]:
        """The running configuration, every key, secrets hidden."""
        ...

    def bots(self) -> Sequence[str]:
        """The AppIDs of the bots this daemon serves (their chats are listed)."""
        ...

    def replies_used(self, app_id: str, reference: str) -> int:
        """How many replies bot ``app_id`` gave the received message ``reference`` (its
        real id): each bot counts its own."""
        ...

    async def drop_backlog(self, number: int, name: str) -> int:
        """Drop what framework ``number`` (its place in :attr:`LinkView.frameworks`, which
        must still be named ``name``) is owed and has not been sent; how many events went.
        A :class:`~gensokyo_idmap.errors.NotFoundError` when there is no such framework,
        or one whose backlog cannot be dropped (a forward-WS connection)."""
        ...

    async def send_test(self, scene: str, text: str) -> SendOutcome:
        """Send ``text`` to the chat of ``scene`` as a framework's send would go (a
        passive reply where the platform wants one)."""
        ...
