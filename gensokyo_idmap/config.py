"""Configuration: one YAML file read into frozen pydantic models.

Every key is documented with its default in ``examples/config.yml``. Unknown keys
are refused (a typo must not silently fall back to a default), and errors name the key path.
Secrets are ``SecretStr``: they never print, not even in a validation error.
"""

from __future__ import annotations

import ipaddress
import os
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from gensokyo_idmap.admission import allowed_host_name
from gensokyo_idmap.config_env import (
    apply_env_overrides,
    env_overrides,
    field_model,
    is_secret_path,
)
from gensokyo_idmap.data_dir import DataDir
from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.hostport import parse_host_port
from gensokyo_idmap.identity import check_app_id
from gensokyo_idmap.intents import intents_value

__all__ = [
    "ApiConfig",
    "BotConfig",
    "BotEntry",
    "BotOneBotConfig",
    "Config",
    "HttpConfig",
    "HttpPostConfig",
    "IdmapConfig",
    "LogConfig",
    "ReverseWsConfig",
    "first_problem",
    "load_config",
    "nearest_key",
    "read_secret_files",
]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class IdmapConfig(_Section):
    data_dir: Path = Field(default=Path("./data"), description="where openid-map.db lives")
    map_size_mb: int = Field(default=64, ge=1, description="initial LMDB map size; grows by itself")
    msgid_ttl_seconds: int = Field(default=3600, ge=1, description="virtual message id lifetime")
    msgid_sweep_interval_seconds: float = Field(
        default=60, gt=0, description="how often expired message ids are deleted"
    )
    runtime_backend: Literal["lmdb", "redis"] = Field(
        default="lmdb",
        description="where message ids, delivery claims and reply counts live: msgid-map.db, "
        "or a Redis shared by several daemons",
    )
    redis_url: str = Field(default="", description="redis://host:port/db (runtime_backend: redis)")
    redis_prefix: str = Field(default="gsk:", description="every Redis key written starts with it")

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str) -> str:
        if value and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must be a redis://, rediss:// or unix:// URL")
        return value

    @field_validator("redis_prefix")
    @classmethod
    def _redis_prefix(cls, value: str) -> str:
        """Printable, no spaces, no glob characters: a prefix is also a SCAN pattern."""
        if (not value or len(value) > 64 or not value.isprintable()
                or any(c in value for c in " *?[]\\")):
            raise ValueError("must be 1 to 64 printable characters without spaces or any of "
                             "* ? [ ] \\")
        return value

    @model_validator(mode="after")
    def _redis_needs_a_url(self) -> IdmapConfig:
        if self.runtime_backend == "redis" and not self.redis_url:
            raise ValueError("idmap.runtime_backend redis needs idmap.redis_url")
        return self
    link_union_openid: bool = Field(
        default=True, description="one vUIN for one person across the operator's AppIDs"
    )
    legacy_db: Path | None = Field(
        default=None,
        description="the old Go daemon's idmap.db; default <data_dir>/idmap.db; empty: none",
    )
    backend: Literal["lmdb", "postgres"] = Field(
        default="lmdb",
        description="where the identity graph lives: openid-map.db in data_dir, or PostgreSQL "
                    "(shared by several daemons)")
    postgres_dsn: str = Field(
        default="",
        description="PostgreSQL URL of the identity graph (backend: postgres), e.g. "
                    "postgresql://127.0.0.1:5432/gensokyo; a password in it is never shown")

    @field_validator("postgres_dsn")
    @classmethod
    def _postgres_url(cls, value: str) -> str:
        if value and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("must be a postgresql:// URL")
        return value

    identity_cache_size: int = Field(
        default=100_000, ge=0,
        description="identities each daemon keeps in memory over a PostgreSQL graph (with "
                    "idmap.redis_url, whose pub/sub keeps them true); 0: none")
    identity_cache_max_age_seconds: float = Field(
        default=30.0, gt=0,
        description="longest a cached identity is used without asking PostgreSQL again: "
                    "the bound on a stale answer if an invalidation was lost")
    keep_message_content: bool = Field(
        default=True,
        description="keep each message's OneBot content beside its message id (for "
                    "get_msg, until msgid_ttl_seconds); false keeps no text, only the author")

    @model_validator(mode="after")
    def _backend_has_its_server(self) -> IdmapConfig:
        if self.backend == "postgres" and not self.postgres_dsn:
            raise ValueError("idmap.backend postgres needs idmap.postgres_dsn "
                             "(e.g. postgresql://127.0.0.1:5432/gensokyo)")
        return self


def _host_port(value: str) -> str:
    """A listen address (``hostport.parse_host_port``: IPv6 in brackets), or empty: off."""
    if value:
        try:
            parse_host_port(value, "listen")
        except BadInputError as err:
            raise ValueError(f"{err.reason}, or empty to switch off") from None
    return value


class QQConfig(_Section):
    api_base: str = Field(default="https://api.sgroup.qq.com", description="OpenAPI base URL")
    token_url: str = Field(default="https://bots.qq.com/app/getAppAccessToken")
    gateway: bool = Field(default=False, description="connect to the WebSocket gateway")
    intents: int = Field(
        default=1 << 25, ge=0,
        description="default: group and C2C events; a number, or a list of intent names "
                    "(GROUP_AND_C2C_EVENT, PUBLIC_GUILD_MESSAGES, GUILD_MESSAGES, "
                    "DIRECT_MESSAGE, GUILD_MEMBERS, …)")

    @field_validator("intents", mode="before")
    @classmethod
    def _intent_names(cls, value: object) -> object:
        if isinstance(value, list):
            try:
                return intents_value(value)
            except BadInputError as err:
                raise ValueError(err.reason) from None
        return value
    shard: tuple[StrictInt, StrictInt] = Field(
        default=(0, 1),
        description="[index, count] of this daemon's gateway shard (one shard per daemon)")

    @field_validator("shard")
    @classmethod
    def _shard(cls, value: tuple[int, int]) -> tuple[int, int]:
        index, count = value
        if not 0 <= index < count:
            raise ValueError(f"must be [index, count] with 0 <= index < count (got "
                             f"[{index}, {count}])")
        return value

    @field_validator("api_base", "token_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value.rstrip("/")


class WebhookConfig(_Section):
    listen: str = Field(default="", description="host:port of the callback server; empty: off")
    path: str = Field(default="/qqbot", description="URL path the platform posts to")
    max_age_seconds: int = Field(
        default=600, ge=1,
        description="callbacks signed longer ago than this are refused (replays); events "
                    "are de-duplicated for at least this long")

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        return _host_port(value)

    @field_validator("path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("must start with '/'")
        return value


class HttpPostConfig(_Section):
    url: str = Field(description="framework endpoint events are POSTed to")
    secret: SecretStr | None = Field(
        default=None, description="HMAC-SHA1 key of X-Signature; default onebot.access_token; "
                                  "empty: unsigned; never logged")
    max_retries: int = Field(default=2, ge=0, description="tries after a failed POST; 0: none")
    retry_interval_seconds: float = Field(
        default=0.5, ge=0, description="wait before the first retry (then twice it, …)")
    timeout_seconds: float = Field(default=10.0, gt=0,
                                   description="a POST unanswered this long has failed")

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value


def _ws_url(url: str) -> str:
    if not url.startswith(("ws://", "wss://")):
        raise ValueError(f"{url!r} is not a ws:// or wss:// URL")
    return url


def _reverse_ws_urls(entries: list[str | ReverseWsConfig]) -> list[str | ReverseWsConfig]:
    for entry in entries:
        if isinstance(entry, str):
            _ws_url(entry)
    return entries


class ReverseWsConfig(_Section):
    """A reverse-WS entry with a token of its own (a plain URL entry uses
    ``onebot.access_token``)."""

    url: Annotated[str, AfterValidator(_ws_url)] = Field(description="framework URL to dial")
    access_token: SecretStr | None = Field(
        default=None, description="sent as Authorization: Bearer; default onebot.access_token; "
                                  "empty: none; never logged")


class OneBotConfig(_Section):
    self_id: int | None = Field(default=None, gt=0, description="default: the AppID")
    access_token: SecretStr = Field(default=SecretStr(""), description="never logged")
    message_format: Literal["array", "string"] = "array"
    reverse_ws: list[str | ReverseWsConfig] = Field(
        default_factory=list, description="framework URLs to dial (or {url, access_token})")
    forward_ws: str = Field(default="", description="host:port frameworks dial; empty: off")
    forward_ws_access_token: SecretStr | None = Field(
        default=None, description="the forward WS's own token; default access_token; "
                                  "empty: none")
    http_post: list[HttpPostConfig] = Field(default_factory=list)
    reconnect_interval_seconds: float = Field(default=3.0, gt=0)
    heartbeat_interval_seconds: float = Field(default=5.0, gt=0)
    ping_timeout_seconds: float = Field(
        default=10.0, gt=0, description="a WebSocket framework that answers no ping for this "
                                        "long is frozen: closed, reconnected")
    extensions: bool = Field(default=False, description="add the Go daemon's real_* fields")
    white_prefixes: list[str] = Field(
        default_factory=list,
        description="forward only messages whose text starts with one of these (after the "
                    "leading @bot; a leading / ignored); empty: every message")
    black_prefixes: list[str] = Field(
        default_factory=list, description="never forward messages whose text starts so")
    remove_at: bool = Field(default=False,
                            description="drop the leading @bot from forwarded messages")
    send_error: bool = Field(
        default=False, description="when the platform refuses a send, tell the chat why")

    @field_validator("white_prefixes", "black_prefixes")
    @classmethod
    def _prefixes(cls, values: list[str]) -> list[str]:
        if any(not value.strip() for value in values):
            raise ValueError("an empty prefix would match every message")
        return values
    http_api: str = Field(default="", description="host:port of the OneBot HTTP API; empty: off")
    http_api_access_token: SecretStr | None = Field(
        default=None, description="the HTTP API's own token; default access_token; empty: none")
    op_userid_type: Literal["vuin", "raw", "ruin"] = Field(
        default="vuin",
        description="what user_id/group_id carry downstream (docs/identities.md)")
    unsupported_segments: Literal["refuse", "drop"] = Field(
        default="refuse",
        description="a segment the platform cannot carry (face in a group, an at in C2C or "
                    "of all, poke, share…): refuse the send naming it, or drop it with a "
                    "warning")
    list_channels_as_groups: bool = Field(
        default=True,
        description="get_group_list also lists the guild channels seen (shown as groups)")

    @field_validator("forward_ws", "http_api")
    @classmethod
    def _forward(cls, value: str) -> str:
        return _host_port(value)

    @field_validator("reverse_ws")
    @classmethod
    def _ws_urls(cls, entries: list[str | ReverseWsConfig]) -> list[str | ReverseWsConfig]:
        return _reverse_ws_urls(entries)

    def token(self, own: SecretStr | None) -> str:
        """A transport's token: its own when set (empty: none), else ``access_token``."""
        return (self.access_token if own is None else own).get_secret_value()

    def reverse_ws_targets(self, entries: Sequence[str | ReverseWsConfig] | None = None
                           ) -> list[tuple[str, str]]:
        """Each reverse-WS entry (``entries``, default ``reverse_ws``) as (URL, the token it
        sends; empty: none)."""
        return [(entry, self.token(None)) if isinstance(entry, str)
                else (entry.url, self.token(entry.access_token))
                for entry in (self.reverse_ws if entries is None else entries)]


class BotConfig(_Section):
    app_id: str = Field(default="", description="QQ bot AppID; bare OpenIDs belong to it")
    secret: SecretStr = Field(default=SecretStr(""), description="QQ bot AppSecret (never logged)")
    secret_file: Path | None = Field(
        default=None, description="a file holding the AppSecret (its first line), instead "
                                  "of secret")

    @field_validator("app_id", mode="before")
    @classmethod
    def _digits(cls, value: object) -> object:
        """Text. An unquoted ``app_id: 102000001`` (as the Go daemon's template writes it)
        reaches here as text too: :func:`load_config` takes its digits as written. Any
        other number (``0x1F``, ``1_000``, a model built in code) is refused, never
        converted: YAML would have changed its digits."""
        if isinstance(value, int) and not isinstance(value, bool):
            raise ValueError('quote the AppID so YAML keeps it as text: app_id: "102000001"')
        if value:
            try:
                check_app_id(value, "bot.app_id")  # type: ignore[arg-type]
            except BadInputError as err:
                raise ValueError(err.reason) from None
        return value

    @model_validator(mode="after")
    def _one_secret(self) -> BotConfig:
        if self.secret.get_secret_value() and self.secret_file is not None:
            raise BadInputError("secret_file", str(self.secret_file),
                                "secret and secret_file are both set: give the AppSecret "
                                "one way")
        return self


class BotOneBotConfig(_Section):
    """What a ``bots`` entry may set of ``onebot``: its own framework connections."""

    reverse_ws: list[str | ReverseWsConfig] | None = Field(
        default=None, description="this bot's framework URLs to dial; default onebot.reverse_ws")
    http_post: list[HttpPostConfig] | None = Field(
        default=None, description="this bot's HTTP POST targets; default onebot.http_post")

    @field_validator("reverse_ws")
    @classmethod
    def _ws_urls(cls, entries: list[str | ReverseWsConfig] | None
                 ) -> list[str | ReverseWsConfig] | None:
        return None if entries is None else _reverse_ws_urls(entries)


class BotEntry(BotConfig):
    """One bot of ``bots``: a ``bot`` section with its ``self_id`` and, where it differs from
    the shared sections, its own ``qq`` keys and ``onebot`` connections."""

    app_id: str = Field(description="QQ bot AppID of this bot")
    self_id: int | None = Field(default=None, gt=0, description="default: the AppID")
    qq: QQConfig | None = Field(
        default=None, description="this bot's qq keys where they differ from qq (api_base, "
                                  "token_url, gateway, intents, shard)")
    onebot: BotOneBotConfig | None = Field(
        default=None, description="this bot's reverse_ws / http_post where they differ")

    @field_validator("app_id")
    @classmethod
    def _needed(cls, value: str) -> str:
        if not value:
            raise ValueError("each bot of bots needs its app_id")
        return value

    @property
    def own_self_id(self) -> int:
        """Its OneBot ``self_id``: configured, else the AppID."""
        return self.self_id if self.self_id is not None else int(self.app_id)


class ApiConfig(_Section):
    listen: str = Field(default="127.0.0.1:15631",
                        description="host:port of the identity HTTP API, /getid, /healthz, "
                                    "/metrics; empty: off")
    token: SecretStr = Field(default=SecretStr(""),
                             description="Bearer token the /v1 routes require; never logged")
    getid_allow: list[str] = Field(
        default_factory=list,
        description="networks (CIDR) besides loopback that may call /getid without a token")
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="networks (CIDR) of reverse proxies in front of api.listen whose "
                    "X-Forwarded-For and X-Forwarded-Proto are believed; none by default")
    allowed_hosts: list[Annotated[str, AfterValidator(allowed_host_name)]] = Field(
        default_factory=list,
        description="host names besides localhost that requests to the API, the console "
                    "and the OneBot HTTP API and forward WS may address (Host); IP "
                    "addresses always may")

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        return _host_port(value)

    @field_validator("getid_allow")
    @classmethod
    def _cidrs(cls, values: list[str]) -> list[str]:
        _networks(values)
        return values

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies(cls, values: list[str]) -> list[str]:
        for value, network in zip(values, _networks(values), strict=True):
            if network.prefixlen == 0:
                raise ValueError(f"{value!r} trusts every address: any client could then "
                                 "write its own X-Forwarded-For (name the proxies' networks, "
                                 "e.g. 10.0.0.5/32)")
        return values


def _networks(values: list[str]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(value, strict=False))
        except ValueError:
            raise ValueError(f"{value!r} is not a network (e.g. 10.0.0.0/8)") from None
    return networks


class HttpConfig(_Section):
    """Every HTTP listener's connections (webhook, identity API, OneBot HTTP API, forward WS)."""

    header_timeout_seconds: float = Field(
        default=10.0, gt=0,
        description="a connection that sends no whole request head this long after it opened "
                    "(or after its previous request) is closed")
    body_timeout_seconds: float = Field(
        default=60.0, gt=0,
        description="a request whose whole body has not come this long after its head is cut")
    max_connections: int = Field(
        default=1000, ge=1,
        description="most open connections per listener; lowered to fit the open-files "
                    "limit, the webhook first")


class LogConfig(_Section):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["console", "json"] = "console"
    time: Literal["local", "utc"] = Field(
        default="local",
        description="the timestamps' time zone: local (with its UTC offset, as the "
                    "machine's other logs) or utc (ending in Z)")


class Config(_Section):
    bot: BotConfig = BotConfig()
    bots: list[BotEntry] = Field(
        default_factory=list,
        description="several bots served by one daemon (one identity graph), instead of bot")
    idmap: IdmapConfig = IdmapConfig()
    qq: QQConfig = QQConfig()
    webhook: WebhookConfig = WebhookConfig()
    onebot: OneBotConfig = OneBotConfig()
    api: ApiConfig = ApiConfig()
    http: HttpConfig = HttpConfig()
    log: LogConfig = LogConfig()

    @field_validator("bots", mode="before")
    @classmethod
    def _a_list(cls, value: object) -> object:
        if isinstance(value, dict):
            raise ValueError("is a list of bots, each entry `- app_id: …` (one bot alone may "
                             "be `bot:` instead)")
        return value

    @model_validator(mode="after")
    def _bots_told_apart(self) -> Config:
        """``bots`` instead of ``bot``, never both; each bot once, by AppID and by
        ``self_id`` (the platform names a bot by the one, frameworks by the other)."""
        if not self.bots:
            return self
        if "bot" in self.model_fields_set:
            raise BadInputError("bot", "bot and bots",
                                "bot and bots are both set: bot is a daemon's one bot, bots "
                                "a list of them; keep one (bot's keys make an entry of bots)")
        if self.onebot.self_id is not None:
            raise BadInputError("onebot.self_id", self.onebot.self_id,
                                "is the self_id of bot: with bots, each entry sets its own "
                                "self_id")
        for key in ("app_id", "self_id"):
            seen: dict[object, int] = {}
            for index, bot in enumerate(self.bots):
                value: object = bot.app_id if key == "app_id" else bot.own_self_id
                if value in seen:
                    default = (" (a self_id defaults to the AppID)"
                               if key == "self_id" else "")
                    raise BadInputError(
                        f"bots.{index}.{key}", str(value),
                        f"bots.{seen[value]} and bots.{index} have the same {key}{default}: "
                        "each bot must be told apart by it")
                seen[value] = index
        return self

    @property
    def self_id(self) -> int:
        """The first bot's OneBot ``self_id``: configured, else the AppID, else 1."""
        if self.bots:
            return self.bots[0].own_self_id
        if self.onebot.self_id is not None:
            return self.onebot.self_id
        return int(self.bot.app_id) if self.bot.app_id else 1

    @property
    def first_bot(self) -> BotConfig:
        """``bot``, or the first of ``bots``: the AppID the CLI and the API default to."""
        return self.bots[0] if self.bots else self.bot

    @property
    def files(self) -> DataDir:
        """The data dir's files."""
        return DataDir(self.idmap.data_dir)

    @property
    def identity_db_path(self) -> Path:
        return self.files.identity_db

    @property
    def gateway_state_path(self) -> Path:
        return self.files.gateway_state

    @property
    def outbox_db_path(self) -> Path:
        return self.files.outbox_db

    @property
    def msgid_db_path(self) -> Path:
        return self.files.msgid_db

    @property
    def legacy_db_path(self) -> Path | None:
        """Where an old idmap.db would be; None when migration is switched off ("")."""
        if "legacy_db" not in self.idmap.model_fields_set:
            return self.files.legacy_db
        legacy = self.idmap.legacy_db
        return None if legacy is None or str(legacy) in ("", ".") else legacy


def load_config(path: str | Path, environ: Mapping[str, str] | None = None) -> Config:
    """Read and validate a config file, ``GSK_<SECTION>__<KEY>`` variables of ``environ``
    (default: the process environment) over it; errors say which key and why."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
        raw = yaml.safe_load(text) or {}
    except OSError as exc:
        raise BadInputError("config", str(file), f"cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise BadInputError("config", str(file), "not UTF-8 text") from None
    except yaml.YAMLError as exc:
        # PyYAML's own message quotes the offending line, which may hold the secret.
        problem = getattr(exc, "problem", None) or "syntax error"
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise BadInputError("config", str(file), f"not valid YAML: {problem}{where}") from None
    if not isinstance(raw, dict):
        raise BadInputError("config", str(file), "top level must be a mapping")
    _app_id_as_written(raw, text)
    if isinstance(raw.get("settings"), dict):  # version: 1, everything under settings
        raise BadInputError("config", str(file), "an old Go Gensokyo config.yml, not ours: "
                            "convert it with `gensokyo-idmap config import-gensokyo FILE "
                            "--out config.yml`")
    overrides = env_overrides(os.environ if environ is None else environ)
    raw, from_env = apply_env_overrides(raw, overrides, Config)
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        problem = first_problem(exc)
        where, guess = problem.where, problem.guess
        var = next((v for p, v in from_env.items()
                    if where == p or p.startswith(where + ".") or where.startswith(p + ".")), None)
        origin = f"from {var}" if var else f"in {file}"
        if guess and var:  # spelled as the variable the user typed
            guess = "GSK_" + guess.upper().replace(".", "__")
        hint = f"; did you mean `{guess}`?" if guess else ""
        raise BadInputError(where, problem.shown, f"{problem.reason}{hint} ({origin})") from None
    return read_secret_files(config, file.parent)


@dataclass(frozen=True, slots=True)
class Problem:
    """The first problem of a config that did not validate, as an error may show it."""

    where: str  # its key path ("config": the whole)
    shown: object  # the value, or "<hidden>" where it may be (or hold) a secret
    reason: str
    guess: str | None  # an unknown key: the known one nearest to it


def first_problem(exc: ValidationError) -> Problem:
    """:class:`Problem` of the first error of ``exc``: a validator's own
    :class:`BadInputError` gives its key (under the entry it was raised in), value and
    reason; the value of a secret, of a key spelt like one, or of a mapping or list (which
    may hold one) is hidden."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    shown = first.get("input")
    reason = first["msg"]
    ours = (first.get("ctx") or {}).get("error")
    if isinstance(ours, BadInputError):
        where = f"{where}.{ours.field}" if where else ours.field
        shown, reason = ours.value, ours.reason
    where = where or "config"
    guess = nearest_key(first["loc"]) if first["type"] == "extra_forbidden" else None
    if (is_secret_path(where) or isinstance(shown, dict | list)
            or (guess and is_secret_path(guess))):
        shown = "<hidden>"
    return Problem(where, shown, reason, guess)


def read_secret_files(config: Config, base: Path = Path()) -> Config:
    """``config`` with each bot's ``secret_file`` read into its ``secret`` (the file's first
    line, its blanks stripped); a relative path is taken from ``base`` (the config file's
    directory). A file that cannot be read, or is empty, is an error naming its key (never
    its content)."""
    def read(bot: BotConfig, where: str) -> BotConfig:
        if bot.secret_file is None:
            return bot
        path = bot.secret_file if bot.secret_file.is_absolute() else base / bot.secret_file
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise BadInputError(f"{where}.secret_file", str(path),
                                f"cannot read: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise BadInputError(f"{where}.secret_file", str(path), "not UTF-8 text") from None
        lines = text.strip().splitlines()
        if not lines:
            raise BadInputError(f"{where}.secret_file", str(path), "is empty")
        return bot.model_copy(update={"secret": SecretStr(lines[0].strip())})

    if config.bots:
        bots = [read(bot, f"bots.{index}") for index, bot in enumerate(config.bots)]
        return config.model_copy(update={"bots": bots})
    return config.model_copy(update={"bot": read(config.bot, "bot")})


def _app_id_as_written(raw: dict[str, Any], text: str) -> None:
    """An unquoted AppID (a YAML integer) as the digits the file holds: ``0123`` stays
    ``0123`` (YAML would read octal 83), in ``bot`` and in each entry of ``bots``. Left an
    integer when it is not plain digits (hex, underscores, a sign): the validator refuses
    it."""
    places: list[tuple[dict[str, Any], tuple[str | int, ...]]] = []
    if isinstance(raw.get("bot"), dict):
        places.append((raw["bot"], ("bot",)))
    if isinstance(raw.get("bots"), list):
        places += [(entry, ("bots", index)) for index, entry in enumerate(raw["bots"])
                   if isinstance(entry, dict)]
    places = [(bot, path) for bot, path in places
              if isinstance(bot.get("app_id"), int) and not isinstance(bot["app_id"], bool)]
    if not places:
        return
    root = yaml.compose(text)
    for bot, path in places:
        node = root
        for step in (*path, "app_id"):
            if isinstance(node, yaml.MappingNode) and isinstance(step, str):
                node = next((value for name, value in node.value
                             if isinstance(name, yaml.ScalarNode) and name.value == step), None)
            elif isinstance(node, yaml.SequenceNode) and isinstance(step, int):
                node = node.value[step] if step < len(node.value) else None
            else:
                node = None
        if isinstance(node, yaml.ScalarNode) and node.value.isascii() and node.value.isdigit():
            bot["app_id"] = node.value


def nearest_key(loc: tuple[int | str, ...]) -> str | None:
    """The known key path an unknown one (``loc``, as pydantic gives it) was most likely
    meant to be: a close spelling in the same section (``bot.appid`` → ``bot.app_id``,
    ``bots.0.secert`` → ``bots.0.secret``), or the same key in another section
    (``webhook.token`` → ``api.token``), or a close section name; None when nothing is
    close."""
    import difflib

    names = [str(part) for part in loc]
    sections = {name: field_model(field.annotation) for name, field in Config.model_fields.items()}
    if len(names) == 1:
        close = difflib.get_close_matches(names[0], list(sections), n=1)
        return close[0] if close else None
    if not names:
        return None
    *path, key = loc
    model: type[BaseModel] | None = Config
    listed = False  # the step before named a list: this one is its index
    for step in path:  # down to the model the unknown key was found in
        if model is None or listed != isinstance(step, int):
            return None
        if listed:
            listed = False  # an entry of the list: the list's own model
            continue
        field = model.model_fields.get(str(step))
        model = None if field is None else field_model(field.annotation)
        listed = field is not None and typing.get_origin(field.annotation) is list
    if model is None or listed or not isinstance(key, str):
        return None
    where = ".".join(str(step) for step in path)
    close = difflib.get_close_matches(key, list(model.model_fields), n=1)
    if close:
        return f"{where}.{close[0]}"
    if len(path) != 1:
        return None
    elsewhere = [f"{name}.{key}" for name, other in sections.items()
                 if other is not None and key in other.model_fields
                 and other is Config.model_fields[name].annotation]  # a section, not a list
    return elsewhere[0] if elsewhere else None

