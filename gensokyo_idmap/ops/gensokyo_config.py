"""An old Go Gensokyo ``config.yml`` turned into ours (pure: a mapping in, a mapping out).

The old file is ``version: 1`` with everything under ``settings`` (key names as in the Go
daemon's ``template/config_template.go``). The Go daemon dialled the platform's WebSocket
gateway, so the new config does too (``qq.gateway: true``). What carries over:

- ``app_id`` → ``bot.app_id`` (as text: the template writes it as a YAML integer); ``uin``
  (the bot's QQ number) → ``onebot.self_id`` (unless ``use_uin: false``, where the Go
  daemon used the AppID, as ours does by default); ``client_secret`` → ``bot.secret``;
  ``shard_id`` of ``shard_count`` → ``qq.shard``;
- ``ws_address`` (text or list) → ``onebot.reverse_ws``;
- ``ws_token``, ``ws_server_token``, ``http_access_token`` → ``onebot.access_token`` (the
  first set), and a transport's own token where its differs (``{url, access_token}``
  entries, ``forward_ws_access_token``, ``http_api_access_token``; ``""`` where the Go
  daemon had none);
- ``enable_ws_server`` + ``port`` → ``onebot.forward_ws`` (``0.0.0.0:<port>``, served at
  ``/``); ``http_address`` → ``onebot.http_api``;
- ``post_url`` + ``post_secret``, ``post_max_retries``, ``post_retries_interval`` (ms),
  ``http_timeout`` (s, ignored below 5 as there) → ``onebot.http_post`` entries
  (``secret``, ``max_retries``, ``retry_interval_seconds``, ``timeout_seconds``);
- ``array`` → ``onebot.message_format``; ``heart_beat_interval`` →
  ``onebot.heartbeat_interval_seconds``;
- ``white_prefix_mode`` + ``white_prefixs``, ``black_prefix_mode`` + ``black_prefixs`` →
  ``onebot.white_prefixes`` / ``black_prefixes`` (when the mode was on); ``remove_at``,
  ``send_error`` → ``onebot.remove_at`` / ``send_error``;
- ``text_intent`` (handler names) → ``qq.intents`` (intent names);
- ``sandbox_mode`` → ``qq.api_base`` (the sandbox API); ``log_level`` (0–3) → ``log.level``.

Every other old key is listed as having no equivalent, each with the reason
(``gensokyo_keys``); ``lotus: true`` and a ``crt`` / ``key`` get a note saying what does
their job here (a shared PostgreSQL graph, a TLS proxy). Template placeholders
(``<YOUR_CLIENT_SECRET>``) and empty list entries count as unset. Notes never quote a
secret.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.intents import GENSOKYO_HANDLERS
from gensokyo_idmap.ops.gensokyo_keys import unmapped_reason

__all__ = ["LOTUS_NOTE", "SECRET_PATHS", "TLS_NOTE", "GensokyoImport", "convert_gensokyo",
           "masked"]

SANDBOX_API: Final = "https://sandbox.api.sgroup.qq.com"
_LOG_LEVELS: Final = {0: "debug", 1: "info", 2: "warning", 3: "error"}
_TOKENS: Final = ("ws_token", "ws_server_token", "http_access_token")
#: Keys that are read (and so are not "no equivalent") even when they map to nothing alone.
_USED: Final = frozenset({
    "app_id", "uin", "client_secret", "ws_address", *_TOKENS, "enable_ws_server", "port",
    "ws_server_path", "http_address", "post_url", "post_secret", "array",
    "heart_beat_interval", "sandbox_mode", "log_level", "post_max_retries",
    "post_retries_interval", "http_timeout", "white_prefix_mode", "white_prefixs",
    "black_prefix_mode", "black_prefixs", "remove_at", "send_error", "text_intent",
    "use_uin", "shard_id", "shard_count",
})
#: The Go daemon ignored an ``http_timeout`` below this (seconds).
_LEAST_HTTP_TIMEOUT: Final = 5
#: What to do instead of ``lotus: true`` (one Go daemon using another's idmaps over /getid).
LOTUS_NOTE: Final = (
    "settings.lotus was on: this Go daemon used another one's idmaps. Daemons that must agree "
    "on who is who share one identity graph in PostgreSQL instead: on the main one, "
    "`gensokyo-idmap store copy --to postgres --postgres-dsn URL` (its openid-map.db, once); "
    "in every daemon's config idmap.backend: postgres and idmap.postgres_dsn: URL; "
    "`gensokyo-idmap db --config config.yml upgrade`; then start them (README, Several "
    "daemons; docs/stores.md)")
#: What to do instead of ``crt`` / ``key`` (the Go daemon's own TLS).
TLS_NOTE: Final = (
    "settings.crt / settings.key were set: the daemon serves plain HTTP and leaves TLS to a "
    "reverse proxy in front of the webhook and the console (examples/nginx.conf, "
    "docs/security.md, Behind a TLS proxy)")
#: Key paths of our config that hold secrets (masked when shown).
SECRET_PATHS: Final = (("bot", "secret"), ("onebot", "access_token"),
                       ("onebot", "forward_ws_access_token"),
                       ("onebot", "http_api_access_token"))


@dataclass(slots=True)
class GensokyoImport:
    config: dict[str, Any]
    unmapped: list[tuple[str, str]] = field(default_factory=list)  # (old key, why)
    notes: list[str] = field(default_factory=list)

    def to_json(self, shown_config: dict[str, Any]) -> dict[str, Any]:
        return {"config": shown_config,
                "unmapped": [{"key": k, "reason": why} for k, why in self.unmapped],
                "notes": self.notes}


def _set(value: Any) -> bool:
    """Unset: None, empty text, text holding a template placeholder (``<YOUR_…>``)."""
    if value is None:
        return False
    if isinstance(value, str):
        return bool(value.strip()) and "<YOUR_" not in value.upper()
    return True


def _texts(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    return [str(item) for item in items if _set(item)]


def convert_gensokyo(old: Any) -> GensokyoImport:
    """Our config (a mapping ready for ``Config.model_validate``) from an old one."""
    if not isinstance(old, dict) or not isinstance(old.get("settings"), dict):
        raise BadInputError("settings", None,
                            "not a Gensokyo config: no 'settings' mapping at the top level")
    s: dict[str, Any] = old["settings"]
    out = GensokyoImport({"bot": {}, "idmap": {"data_dir": "./data"}, "qq": {"gateway": True},
                          "webhook": {"listen": ""}, "onebot": {}, "log": {}})
    bot, onebot = out.config["bot"], out.config["onebot"]
    note = out.notes.append

    app_id = s.get("app_id")
    if _set(app_id) and not isinstance(app_id, bool):
        bot["app_id"] = str(app_id)
    else:
        note("settings.app_id is not set: fill in bot.app_id")
    if _set(s.get("client_secret")):
        bot["secret"] = str(s["client_secret"])
    else:
        note("settings.client_secret is not set: fill in bot.secret (the AppSecret)")
    uin = s.get("uin")
    if (isinstance(uin, int) and not isinstance(uin, bool) and uin > 0
            and s.get("use_uin", True) is not False):  # use_uin false: the AppID, our default
        onebot["self_id"] = uin
    _shard(s, out.config["qq"], note)
    note("the Go daemon's idmap.db: put it at data/idmap.db; it is migrated at the first start")

    tokens = [(key, token) for key in _TOKENS for token in _texts(s.get(key))]
    default = tokens[0][1] if tokens else ""
    if default:
        onebot["access_token"] = default

    def own(token: str) -> str | None:
        """A transport's own token where it is not the default (None: the default)."""
        return None if token == default else token

    addresses, ws_tokens = _texts_raw(s.get("ws_address")), _texts_raw(s.get("ws_token"))
    reverse: list[Any] = []
    for i, url in enumerate(addresses):
        if not _set(url):
            continue
        token = own(str(ws_tokens[i]) if i < len(ws_tokens) and _set(ws_tokens[i]) else "")
        reverse.append(str(url) if token is None else {"url": str(url), "access_token": token})
    onebot["reverse_ws"] = reverse
    if len(reverse) < len(addresses):
        note("settings.ws_address: placeholder or empty entries were left out")

    port = s.get("port")
    if s.get("enable_ws_server") and _set(port):
        onebot["forward_ws"] = f"0.0.0.0:{port}"
        path = s.get("ws_server_path", "ws")
        if _set(path):
            note(f"onebot.forward_ws serves WebSocket at '/' (and '/api', '/event'), not "
                 f"'/{path}': point frameworks at ws://<host>:{port}/")
        token = own(str(s["ws_server_token"]) if _set(s.get("ws_server_token")) else "")
        if token is not None:
            onebot["forward_ws_access_token"] = token
    else:
        onebot["forward_ws"] = ""

    onebot["http_api"] = str(s["http_address"]) if _set(s.get("http_address")) else ""
    if onebot["http_api"]:
        token = own(str(s["http_access_token"]) if _set(s.get("http_access_token")) else "")
        if token is not None:
            onebot["http_api_access_token"] = token
    onebot["http_post"] = _posts(s, own)
    _message_switches(s, onebot, note)
    _intents(s, out.config["qq"], note)
    if "array" in s:
        onebot["message_format"] = "array" if s["array"] else "string"
    beat = s.get("heart_beat_interval")
    if isinstance(beat, int | float) and not isinstance(beat, bool) and beat > 0:
        onebot["heartbeat_interval_seconds"] = beat
    if s.get("sandbox_mode"):
        out.config["qq"]["api_base"] = SANDBOX_API
    level = s.get("log_level")
    out.config["log"]["level"] = _LOG_LEVELS.get(level, "info") if isinstance(level, int) \
        else "info"

    if s.get("lotus") is True:
        note(LOTUS_NOTE)
    if _set(s.get("crt")) or _set(s.get("key")):
        note(TLS_NOTE)
    for key in s:
        if key not in _USED:
            out.unmapped.append((f"settings.{key}", unmapped_reason(key)))
    for key in old:
        if key not in ("settings", "version"):
            out.unmapped.append((key, "the Go daemon reads only version and settings"))
    return out


def _shard(s: dict[str, Any], qq: dict[str, Any], note: Callable[[str], None]) -> None:
    """``shard_id`` of ``shard_count`` → ``qq.shard`` (left at its default, one shard of
    one, when that is what the old file says)."""
    index, count = s.get("shard_id", 0), s.get("shard_count", 1)
    if (index, count) == (0, 1):
        return
    if _count(index) and _count(count) and isinstance(index, int) and isinstance(count, int) \
            and index < count:
        qq["shard"] = [index, count]
    else:
        note(f"settings.shard_id {index!r} of shard_count {count!r} is not a shard: qq.shard "
             "keeps its default (one shard of one)")


def _posts(s: dict[str, Any], own: Callable[[str], str | None]) -> list[dict[str, Any]]:
    """The ``onebot.http_post`` entries: ``post_url`` with its ``post_secret``,
    ``post_max_retries`` and ``post_retries_interval`` of the same index, and
    ``http_timeout`` for all."""
    urls, secrets = _texts_raw(s.get("post_url")), _texts_raw(s.get("post_secret"))
    retries, intervals = _texts_raw(s.get("post_max_retries")), _texts_raw(
        s.get("post_retries_interval"))
    timeout: Any = s.get("http_timeout")
    posts = []
    for i, url in enumerate(urls):
        if not _set(url):
            continue
        post: dict[str, Any] = {"url": str(url)}
        secret = own(str(secrets[i]) if i < len(secrets) and _set(secrets[i]) else "")
        if secret is not None:
            post["secret"] = secret
        if i < len(retries) and _count(retries[i]) and isinstance(retries[i], int):
            post["max_retries"] = retries[i]
        if i < len(intervals) and _count(intervals[i]):
            post["retry_interval_seconds"] = intervals[i] / 1000
        if _count(timeout) and timeout >= _LEAST_HTTP_TIMEOUT:
            post["timeout_seconds"] = timeout
        posts.append(post)
    return posts


def _count(value: Any) -> bool:
    """A number of the old file (not a bool, not negative)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def _message_switches(s: dict[str, Any], onebot: dict[str, Any],
                      note: Callable[[str], None]) -> None:
    """The prefix lists (only when their mode was on; empty entries dropped: an empty
    prefix matched every message there), ``remove_at`` and ``send_error``."""
    for mode, old, ours in (("white_prefix_mode", "white_prefixs", "white_prefixes"),
                            ("black_prefix_mode", "black_prefixs", "black_prefixes")):
        prefixes = [text for text in _texts(s.get(old)) if text.strip()]
        if prefixes and s.get(mode):
            onebot[ours] = prefixes
        elif prefixes:
            note(f"settings.{old} were not carried: settings.{mode} was off")
    if "white_prefixes" in onebot and s.get("remove_prefix"):
        note("onebot.white_prefixes: a leading '/' of a message is ignored when compared, "
             "as with remove_prefix, but the framework still gets it")
    for key in ("remove_at", "send_error"):
        if isinstance(s.get(key), bool):
            onebot[key] = s[key]


def _intents(s: dict[str, Any], qq: dict[str, Any], note: Callable[[str], None]) -> None:
    """``text_intent`` handler names as the intent names they subscribed."""
    handlers = _texts(s.get("text_intent"))
    names: list[str] = []
    for handler in handlers:
        if handler not in GENSOKYO_HANDLERS:
            note(f"settings.text_intent: {handler!r} is not a handler the Go daemon knew; "
                 "left out")
            continue
        name = GENSOKYO_HANDLERS[handler]
        if name is not None and name not in names:
            names.append(name)
    if names:
        qq["intents"] = names
    elif handlers:
        note("settings.text_intent names no event handler: qq.intents keeps its default "
             "(group and C2C events)")


def _texts_raw(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def masked(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with every secret replaced by ``<hidden>`` (for printing), those of each
    ``bots`` entry too."""
    shown = {section: dict(keys) if isinstance(keys, dict) else keys
             for section, keys in config.items()}
    for section, key in SECRET_PATHS:
        if shown.get(section, {}).get(key):
            shown[section][key] = "<hidden>"
    if shown.get("onebot"):
        shown["onebot"] = _masked_connections(shown["onebot"])
    if isinstance(shown.get("bots"), list):
        shown["bots"] = [_masked_bot(entry) for entry in shown["bots"]]
    return shown


def _masked_bot(entry: Any) -> Any:
    if not isinstance(entry, dict):
        return entry
    entry = dict(entry)
    if entry.get("secret"):
        entry["secret"] = "<hidden>"
    if isinstance(entry.get("onebot"), dict):
        entry["onebot"] = _masked_connections(entry["onebot"])
    return entry


def _masked_connections(onebot: dict[str, Any]) -> dict[str, Any]:
    """An ``onebot`` mapping with the tokens of its reverse-WS entries and the secrets of
    its HTTP POST entries hidden."""
    onebot = dict(onebot)
    for key, name in (("http_post", "secret"), ("reverse_ws", "access_token")):
        if onebot.get(key):
            onebot[key] = [{**entry, name: "<hidden>"}
                           if isinstance(entry, dict) and entry.get(name) else entry
                           for entry in onebot[key]]
    return onebot
