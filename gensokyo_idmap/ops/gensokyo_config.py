"""An old Go Gensokyo ``config.yml`` turned into ours (pure: a mapping in, a mapping out).

The old file is ``version: 1`` with everything under ``settings`` (key names as in the Go
daemon's ``template/config_template.go``). The Go daemon dialled the platform's WebSocket
gateway, so the new config does too (``qq.gateway: true``). What carries over:

| old key | ours |
|---|---|
| ``app_id`` | ``bot.app_id`` (as text) |
| ``uin`` (the bot's QQ number) | ``onebot.self_id`` |
| ``client_secret`` | ``bot.secret`` |
| ``ws_address`` (text or list) | ``onebot.reverse_ws`` |
| ``ws_token``, ``ws_server_token``, ``http_access_token`` | ``onebot.access_token`` (one) |
| ``enable_ws_server`` + ``port`` | ``onebot.forward_ws`` (``0.0.0.0:<port>``, served at ``/``) |
| ``http_address`` | ``onebot.http_api`` |
| ``post_url`` + ``post_secret`` | ``onebot.http_post`` |
| ``array`` | ``onebot.message_format`` (``array`` / ``string``) |
| ``heart_beat_interval`` | ``onebot.heartbeat_interval_seconds`` |
| ``sandbox_mode`` | ``qq.api_base`` (the sandbox API) |
| ``log_level`` (0–3) | ``log.level`` |

Every other old key is listed as having no equivalent; template placeholders
(``<YOUR_CLIENT_SECRET>``) and empty list entries count as unset. Notes never quote a
secret.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from gensokyo_idmap.errors import BadInputError

__all__ = ["SECRET_PATHS", "GensokyoImport", "convert_gensokyo", "masked"]

SANDBOX_API: Final = "https://sandbox.api.sgroup.qq.com"
_LOG_LEVELS: Final = {0: "debug", 1: "info", 2: "warning", 3: "error"}
_TOKENS: Final = ("ws_token", "ws_server_token", "http_access_token")
#: Keys that are read (and so are not "no equivalent") even when they map to nothing alone.
_USED: Final = frozenset({
    "app_id", "uin", "client_secret", "ws_address", *_TOKENS, "enable_ws_server", "port",
    "ws_server_path", "http_address", "post_url", "post_secret", "array",
    "heart_beat_interval", "sandbox_mode", "log_level",
})
#: Old keys with no equivalent, and why (the rest get a generic reason).
_WHY: Final = {
    "token": "the old bot token; the platform's access tokens now come from bot.secret",
    "hash_id": "vUIN numbering is kept by migrating idmap.db; no setting needed",
    "idmap_pro": "several identities per vUIN are always possible; no setting needed",
    "text_intent": "qq.intents defaults to group and C2C events; guild events are not "
                   "supported",
    "lazy_message_id": "virtual message ids are always exact here",
    "reconnect_times": "reverse WS reconnects forever (onebot.reconnect_interval_seconds)",
    "launch_reconnect_times": "reverse WS reconnects forever",
}
#: Key paths of our config that hold secrets (masked when shown).
SECRET_PATHS: Final = (("bot", "secret"), ("onebot", "access_token"))


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
    if isinstance(uin, int) and not isinstance(uin, bool) and uin > 0:
        onebot["self_id"] = uin
    note("the Go daemon's idmap.db: put it at data/idmap.db; it is migrated at the first start")

    reverse = _texts(s.get("ws_address"))
    onebot["reverse_ws"] = reverse
    if len(reverse) < len(_texts_raw(s.get("ws_address"))):
        note("settings.ws_address: placeholder or empty entries were left out")

    tokens = [(key, token) for key in _TOKENS for token in _texts(s.get(key))]
    if tokens:
        onebot["access_token"] = tokens[0][1]
        differing = sorted({key for key, token in tokens if token != tokens[0][1]})
        if differing:
            note(f"onebot.access_token comes from settings.{tokens[0][0]}; here one token serves "
                 f"every transport, so the different value(s) of {', '.join(differing)} were "
                 "not carried over")

    port = s.get("port")
    if s.get("enable_ws_server") and _set(port):
        onebot["forward_ws"] = f"0.0.0.0:{port}"
        path = s.get("ws_server_path", "ws")
        if _set(path):
            note(f"onebot.forward_ws serves WebSocket at '/', not '/{path}': point frameworks "
                 f"at ws://<host>:{port}/")
    else:
        onebot["forward_ws"] = ""

    onebot["http_api"] = str(s["http_address"]) if _set(s.get("http_address")) else ""
    urls, secrets = _texts_raw(s.get("post_url")), _texts_raw(s.get("post_secret"))
    posts = []
    for i, url in enumerate(urls):
        if _set(url):
            post: dict[str, Any] = {"url": str(url)}
            if i < len(secrets) and _set(secrets[i]):
                post["secret"] = str(secrets[i])
            posts.append(post)
    onebot["http_post"] = posts
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

    for key in s:
        if key not in _USED:
            out.unmapped.append((f"settings.{key}", _WHY.get(key, "no equivalent")))
    for key in old:
        if key not in ("settings", "version"):
            out.unmapped.append((key, "no equivalent"))
    return out


def _texts_raw(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def masked(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with every secret replaced by ``<hidden>`` (for printing)."""
    shown = {section: dict(keys) if isinstance(keys, dict) else keys
             for section, keys in config.items()}
    for section, key in SECRET_PATHS:
        if shown.get(section, {}).get(key):
            shown[section][key] = "<hidden>"
    onebot = shown.get("onebot", {})
    if onebot.get("http_post"):
        onebot["http_post"] = [{**post, "secret": "<hidden>"} if post.get("secret") else post
                               for post in onebot["http_post"]]
    return shown
