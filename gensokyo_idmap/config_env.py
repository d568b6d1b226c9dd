"""``GSK_<SECTION>__<KEY>`` environment variables over the YAML config (pure).

``GSK_IDMAP__MAP_SIZE_MB=128`` sets ``idmap.map_size_mb``. Values are read as YAML scalars
(``true``, ``128``, flow lists ``[ws://a, ws://b]``, flow mappings), except for keys that
hold text (AppID, secrets, tokens, paths, addresses): those take the text as it is, so
``GSK_BOT__APP_ID=102000001`` stays a string and a secret is never reinterpreted. An unknown
section or key is refused by the config's own validation, naming the key path.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml
from pydantic import BaseModel, SecretStr

from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.redaction import is_secret_name

__all__ = ["EnvOverride", "apply_env_overrides", "env_overrides", "is_secret_path"]

PREFIX: Final = "GSK_"

#: Whether a key path may hold a secret (its value is never shown).
is_secret_path = is_secret_name


@dataclass(frozen=True, slots=True)
class EnvOverride:
    var: str
    section: str
    key: str
    text: str

    @property
    def path(self) -> str:
        return f"{self.section}.{self.key}"


def env_overrides(environ: Mapping[str, str]) -> list[EnvOverride]:
    """The ``GSK_<SECTION>__<KEY>`` variables in ``environ``, in name order."""
    found = []
    for var in sorted(environ):
        if not var.startswith(PREFIX) or "__" not in var:
            continue
        section, _, key = var[len(PREFIX):].partition("__")
        found.append(EnvOverride(var, section.lower(), key.lower(), environ[var]))
    return found


def _takes_text(model: type[BaseModel], section: str, key: str) -> bool:
    section_field = model.model_fields.get(section)
    inner = section_field.annotation if section_field is not None else None
    if not (isinstance(inner, type) and issubclass(inner, BaseModel)):
        return False
    field = inner.model_fields.get(key)
    if field is None:
        return False
    annotation = field.annotation
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    kinds = typing.get_args(annotation) if union else (annotation,)
    return any(kind in (str, SecretStr, Path) for kind in kinds)


def _parse(override: EnvOverride) -> Any:
    try:
        return yaml.safe_load(override.text) if override.text.strip() else ""
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or "syntax error"
        shown = "<hidden>" if is_secret_path(override.path) else override.text
        raise BadInputError(override.path, shown,
                            f"not a valid YAML value: {problem} (from {override.var})") from None


def apply_env_overrides(raw: dict[str, Any], overrides: list[EnvOverride],
                        model: type[BaseModel]) -> tuple[dict[str, Any], dict[str, str]]:
    """``raw`` with the overrides put in, and which key path came from which variable."""
    merged = dict(raw)
    origin: dict[str, str] = {}
    for override in overrides:
        value = override.text if _takes_text(model, override.section, override.key) \
            else _parse(override)
        section = merged.get(override.section)
        if section is None:
            section = {}
        elif isinstance(section, dict):
            section = dict(section)
        else:  # the file's section is not a mapping: validation names it
            continue
        section[override.key] = value
        merged[override.section] = section
        origin[override.path] = override.var
    return merged, origin
