"""Several old Go Gensokyo configs (one bot each: one account per process) made into one
config of ours with a ``bots`` list (pure: converted configs in, one config out).

Each old file was converted on its own
(:func:`~gensokyo_idmap.ops.gensokyo_config.convert_gensokyo`); here they become one
daemon's:

- each file's ``bot`` (AppID, secret) and ``onebot.self_id`` (its ``uin``) make one entry of
  ``bots``, in the order the files were given;
- the first file's ``qq`` and ``onebot.reverse_ws`` / ``onebot.http_post`` are the shared
  ones; an entry whose file had other values gets them as its own keys (a sandbox bot its
  ``qq.api_base``, a bot with its own framework its ``reverse_ws``);
- everything else is one value for every bot (the stores, the listeners, the tokens, the
  message switches): the first file's, and a later file with another value gets a note
  naming the key (never a secret's value).

Notes and keys without an equivalent are each prefixed with the file they came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from gensokyo_idmap.config import QQConfig
from gensokyo_idmap.config_env import is_secret_path
from gensokyo_idmap.ops.gensokyo_config import GensokyoImport

__all__ = ["merge_gensokyo"]

#: The onebot keys a bots entry may have of its own.
_OWN_ONEBOT: Final = ("reverse_ws", "http_post")


def _prefixed(name: str, result: GensokyoImport) -> tuple[list[tuple[str, str]], list[str]]:
    return ([(f"{name}: {key}", why) for key, why in result.unmapped],
            [f"{name}: {note}" for note in result.notes])


def _own_qq(shared: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """The ``qq`` keys of an entry where its file differs from the shared section (a key
    it left at the default, where the shared one is set, is the default written out)."""
    defaults = QQConfig().model_dump(mode="json")
    own = {}
    for key in dict.fromkeys([*shared, *theirs]):
        value = theirs.get(key, defaults.get(key))
        if value != shared.get(key, defaults.get(key)):
            own[key] = value
    return own


def merge_gensokyo(converted: Sequence[tuple[str, GensokyoImport]]) -> GensokyoImport:
    """One config with a ``bots`` entry per converted file (``(file name, its import)``, in
    order); a single file stays as it was (``bot``)."""
    if len(converted) == 1:
        return converted[0][1]
    (first_name, first), *_ = converted
    config = {section: dict(keys) if isinstance(keys, dict) else keys
              for section, keys in first.config.items()}
    shared_qq: dict[str, Any] = config["qq"]
    shared_onebot: dict[str, Any] = config["onebot"]
    self_id = shared_onebot.pop("self_id", None)
    unmapped: list[tuple[str, str]] = []
    notes: list[str] = []
    bots: list[dict[str, Any]] = []
    for index, (name, result) in enumerate(converted):
        more_unmapped, more_notes = _prefixed(name, result)
        unmapped += more_unmapped
        notes += more_notes
        old_bot = result.config.get("bot", {})
        entry: dict[str, Any] = {key: old_bot[key] for key in ("app_id", "secret")
                                 if key in old_bot}
        onebot = result.config.get("onebot", {})
        own_self_id = self_id if index == 0 else onebot.get("self_id")
        if own_self_id is not None:
            entry["self_id"] = own_self_id
        own_qq = _own_qq(shared_qq, result.config.get("qq", {}))
        if own_qq:
            entry["qq"] = own_qq
        own_onebot = {key: onebot.get(key, []) for key in _OWN_ONEBOT
                      if onebot.get(key, []) != shared_onebot.get(key, [])}
        if own_onebot:
            entry["onebot"] = own_onebot
        bots.append(entry)
        if index:
            notes += _shared_differences(name, first_name, config, result.config)
    config.pop("bot", None)
    config = {"bots": bots, **config}
    notes.append(f"{len(bots)} bots, one identity graph: frameworks tell them apart by "
                 "self_id (X-Self-ID on reverse WS and HTTP POST; a forward WS or HTTP API "
                 "client picks one with the path prefix /<self_id>/)")
    return GensokyoImport(config, unmapped, notes)


def _shared_differences(name: str, first_name: str, shared: dict[str, Any],
                        theirs: dict[str, Any]) -> list[str]:
    """A note for each key every bot shares where ``theirs`` had another value than the
    shared (first) one (the value shown unless it is a secret)."""
    notes = []
    for section, keys in theirs.items():
        if section in ("bot", "qq") or not isinstance(keys, dict):
            continue
        ours = shared.get(section, {})
        for key, value in keys.items():
            if section == "onebot" and key in (*_OWN_ONEBOT, "self_id"):
                continue
            if ours.get(key) == value:
                continue
            path = f"{section}.{key}"
            shown = "" if is_secret_path(path) else f" ({value!r}; {first_name}: "\
                f"{ours.get(key)!r})"
            notes.append(f"{name}: {path} differs from {first_name}'s{shown}; one value "
                         f"serves every bot: {first_name}'s is kept")
    return notes
