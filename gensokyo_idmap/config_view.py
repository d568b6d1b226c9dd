"""The running configuration as the console shows it: every key, its value with each secret
hidden, and where the value came from (pure: a config and the ``GSK_*`` variables in, rows
out).

A value is hidden when its field is a secret (``SecretStr``) or named like one
(:func:`~gensokyo_idmap.redaction.is_secret_name`: ``secret``, ``access_token`` …, at any
depth: a reverse-WS entry's own token too); a URL is shown without its credentials
(:func:`~gensokyo_idmap.redaction.redact_url`). The source is the ``GSK_*`` variable that
set the key (:mod:`gensokyo_idmap.config_env`), else ``file`` when the file set it, else
``default``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr

from gensokyo_idmap.config_env import EnvOverride
from gensokyo_idmap.redaction import HIDDEN, is_secret_name, redact_url

__all__ = ["ConfigKey", "config_keys", "shown_value"]

#: One key: (path, value as shown, source).
ConfigKey = tuple[str, str, str]


def _plain(name: str, value: Any) -> Any:
    """``value`` as JSON-able data with every secret in it hidden."""
    if isinstance(value, SecretStr):
        return HIDDEN if value.get_secret_value() else ""
    if isinstance(value, BaseModel):
        return {key: _plain(key, getattr(value, key)) for key in type(value).model_fields}
    if isinstance(value, Mapping):
        return {str(key): _plain(str(key), item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(name, item) for item in value]
    if is_secret_name(name) and value not in (None, "") and not name.endswith("_url"):
        return HIDDEN  # a URL named so (qq.token_url) is an address: its credentials go
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, str):
        return redact_url(value)
    return value


def shown_value(name: str, value: Any) -> str:
    """``value`` of the key ``name`` as text to show: secrets hidden, URLs without their
    credentials, a list or an entry as compact JSON."""
    plain = _plain(name, value)
    if isinstance(plain, str):
        return plain
    return json.dumps(plain, ensure_ascii=False, separators=(", ", ": "))


def _source(path: str, set_here: bool, overrides: Sequence[EnvOverride]) -> str:
    variables = [o.var for o in overrides
                 if o.path == path or o.path.startswith(path + ".")
                 or o.path.startswith(path + "__")]
    if variables:
        return ", ".join(variables)
    return "file" if set_here else "default"


def config_keys(config: BaseModel, overrides: Iterable[EnvOverride]) -> list[ConfigKey]:
    """Every key of ``config`` (section by section, in the model's order), as shown."""
    found = list(overrides)
    keys: list[ConfigKey] = []
    for section in type(config).model_fields:
        value = getattr(config, section)
        if not isinstance(value, BaseModel):  # a key at the top (a list of entries)
            keys.append((section, shown_value(section, value),
                         _source(section, section in config.model_fields_set, found)))
            continue
        for key in type(value).model_fields:
            path = f"{section}.{key}"
            keys.append((path, shown_value(key, getattr(value, key)),
                         _source(path, key in value.model_fields_set, found)))
    return keys
