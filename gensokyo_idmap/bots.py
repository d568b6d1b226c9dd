"""The bots a daemon serves, each with its settings resolved (pure).

A config names its bots one of two ways: ``bot`` (one bot, the keys every version had) or
``bots`` (a list; the config refuses both at once, and two entries with one AppID or one
``self_id``). Either way the daemon runs a tuple of :class:`BotSettings`, one per bot, each
with what it needs settled here once: its AppID and secret, its ``self_id`` (configured, else
its AppID), its ``qq`` keys (the shared ``qq`` section with the entry's own keys over it), and
the framework connections it dials (the entry's ``onebot.reverse_ws`` / ``onebot.http_post``,
else the shared lists). Everything else (the stores, the listeners, the rest of ``onebot``)
is shared by every bot.

Names that outlive the process keep apart per bot: with ``bots``, the outbox of a framework
connection is named with its bot's ``self_id``, and a gateway session is kept per AppID
(:meth:`BotSettings.outbox_name`, :meth:`BotSettings.session_file`); with ``bot`` they are the
names a one-bot daemon always used.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import SecretStr

from gensokyo_idmap.config import BotEntry, Config, HttpPostConfig, QQConfig
from gensokyo_idmap.data_dir import GATEWAY_STATE

__all__ = ["BotSettings", "resolve_bots"]


@dataclass(frozen=True, slots=True)
class BotSettings:
    """One bot as the daemon runs it."""

    #: where its keys are in the config (``bot``, ``bots.1``): what an error names
    key: str
    app_id: str
    secret: SecretStr
    self_id: int
    qq: QQConfig
    #: (URL, the token it sends; empty: none) of each framework it dials
    reverse_ws: tuple[tuple[str, str], ...] = field(repr=False)
    http_post: tuple[HttpPostConfig, ...]
    #: one of ``bots`` (names that outlive the process carry its self_id / AppID)
    listed: bool = False

    @property
    def secret_value(self) -> str:
        return self.secret.get_secret_value()

    @property
    def platform_ready(self) -> bool:
        """Whether it can reach the platform at all: an AppID and a secret."""
        return bool(self.app_id and self.secret_value)

    def outbox_name(self, kind: str, url: str) -> str:
        """The outbox.db name of the events owed to one of its framework connections
        (``kind``: ``reverse_ws`` / ``http_post``)."""
        return f"{kind} {url}" + (f" (self_id {self.self_id})" if self.listed else "")

    @property
    def session_file(self) -> str:
        """The data dir's file of its gateway session (``gateway-session.json`` for
        ``bot``)."""
        if not self.listed:
            return GATEWAY_STATE
        stem, dot, suffix = GATEWAY_STATE.rpartition(".")
        return f"{stem}-{self.app_id}{dot}{suffix}"

    def describe(self) -> str:
        """``app_id … self_id …`` for a log line (never the secret)."""
        return f"app_id {self.app_id or '-'} self_id {self.self_id}"


def _own_qq(shared: QQConfig, own: QQConfig | None) -> QQConfig:
    """The shared ``qq`` with the keys an entry set over it (only those it set)."""
    if own is None or not own.model_fields_set:
        return shared
    return shared.model_copy(update={name: getattr(own, name) for name in own.model_fields_set})


def _entry(config: Config, index: int, entry: BotEntry) -> BotSettings:
    onebot = entry.onebot
    reverse = None if onebot is None else onebot.reverse_ws
    posts = None if onebot is None or onebot.http_post is None else onebot.http_post
    return BotSettings(
        key=f"bots.{index}", app_id=entry.app_id, secret=entry.secret,
        self_id=entry.own_self_id, qq=_own_qq(config.qq, entry.qq),
        reverse_ws=tuple(config.onebot.reverse_ws_targets(reverse)),
        http_post=tuple(config.onebot.http_post if posts is None else posts), listed=True)


def resolve_bots(config: Config) -> tuple[BotSettings, ...]:
    """The bots of ``config``, in its order: those of ``bots``, else the one of ``bot``."""
    if config.bots:
        return tuple(_entry(config, index, entry) for index, entry in enumerate(config.bots))
    return (BotSettings(key="bot", app_id=config.bot.app_id, secret=config.bot.secret,
                        self_id=config.self_id, qq=config.qq,
                        reverse_ws=tuple(config.onebot.reverse_ws_targets()),
                        http_post=tuple(config.onebot.http_post)),)
