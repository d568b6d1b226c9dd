"""``GSK_<SECTION>__<KEY>`` environment variables over the YAML config (pure).

``GSK_IDMAP__MAP_SIZE_MB=128`` sets ``idmap.map_size_mb``. Values are read as YAML scalars
(``true``, ``128``, flow lists ``[ws://a, ws://b]``, flow mappings), except for keys that
hold text (AppID, secrets, tokens, paths, addresses): those take the text as it is, so
``GSK_BOT__APP_ID=102000001`` stays a string and a secret is never reinterpreted. An unknown
section or key is refused by the config's own validation, naming the key path.

A section that is a list (``bots``) is addressed entry by entry, by index, as far down as
its keys go: ``GSK_BOTS__0__SECRET`` sets ``bots.0.secret``, ``GSK_BOTS__1__QQ__GATEWAY``
``bots.1.qq.gateway``. The entry must be in the file already (a variable adds no bot).
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

__all__ = ["EnvOverride", "apply_env_overrides", "env_overrides", "field_model",
           "is_secret_path"]

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
    def steps(self) -> tuple[str, ...]:
        """The keys below the section: one, or (in a list section) the index and the keys
        under it."""
        first, _, rest = self.key.partition("__")
        if first.isascii() and first.isdigit() and rest:
            return (first, *rest.split("__"))
        return (self.key,)

    @property
    def path(self) -> str:
        return ".".join((self.section, *self.steps))


def env_overrides(environ: Mapping[str, str]) -> list[EnvOverride]:
    """The ``GSK_<SECTION>__<KEY>`` variables in ``environ``, in name order."""
    found = []
    for var in sorted(environ):
        if not var.startswith(PREFIX) or "__" not in var:
            continue
        section, _, key = var[len(PREFIX):].partition("__")
        found.append(EnvOverride(var, section.lower(), key.lower(), environ[var]))
    return found


def field_model(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds: itself, or the one of a ``list[…]`` or ``… | None``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for inner in typing.get_args(annotation):
        found = field_model(inner)
        if found is not None:
            return found
    return None


def _is_list(model: type[BaseModel], name: str) -> bool:
    field = model.model_fields.get(name)
    return field is not None and typing.get_origin(field.annotation) is list


def _takes_text(model: type[BaseModel], override: EnvOverride) -> bool:
    """Whether the key the variable sets holds text (taken as written, not as YAML)."""
    names = [override.section, *(step for step in override.steps if not step.isdigit())]
    current: type[BaseModel] | None = model
    field = None
    for name in names:
        if current is None:
            return False
        field = current.model_fields.get(name)
        if field is None:
            return False
        current = field_model(field.annotation)
    if field is None or current is not None:  # a section or an entry, not a key
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


def _put_in_entry(entries: list[Any], override: EnvOverride, value: Any) -> list[Any]:
    """``entries`` (a list section of the file) with the variable's key of its entry set:
    a copy, the mappings on the way copied too."""
    index, *keys = override.steps
    at = int(index)
    if at >= len(entries):
        raise BadInputError(override.path, "<hidden>" if is_secret_path(override.path)
                            else override.text,
                            f"{override.section} has no entry {at} (it has {len(entries)}): a "
                            f"variable sets a key of an entry the file has (from "
                            f"{override.var})")
    copied = list(entries)
    node = copied[at] = dict(copied[at]) if isinstance(copied[at], dict) else copied[at]
    for key in keys[:-1]:
        if not isinstance(node, dict):
            return copied  # not a mapping in the file: validation names it
        inner = node.get(key)
        node[key] = dict(inner) if isinstance(inner, dict) else ({} if inner is None else inner)
        node = node[key]
    if isinstance(node, dict):
        node[keys[-1]] = value
    return copied


def apply_env_overrides(raw: dict[str, Any], overrides: list[EnvOverride],
                        model: type[BaseModel]) -> tuple[dict[str, Any], dict[str, str]]:
    """``raw`` with the overrides put in, and which key path came from which variable."""
    merged = dict(raw)
    origin: dict[str, str] = {}
    for override in overrides:
        value = override.text if _takes_text(model, override) else _parse(override)
        section = merged.get(override.section)
        if _is_list(model, override.section):
            if len(override.steps) == 1:
                raise BadInputError(override.path, "<hidden>", f"{override.section} is a "
                                    f"list: name the entry, GSK_{override.section.upper()}"
                                    f"__<n>__<KEY> (from {override.var})")
            merged[override.section] = _put_in_entry(
                section if isinstance(section, list) else [], override, value)
            origin[override.path] = override.var
            continue
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
