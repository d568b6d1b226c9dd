"""Configuration: one YAML file read into frozen pydantic models.

Only what exists today is configurable; later capabilities add their sections. Unknown keys
are refused (a typo must not silently fall back to a default), and errors name the key path.
Secrets are ``SecretStr``: they never print, not even in a validation error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from gensokyo_idmap.errors import BadInputError

__all__ = ["BotConfig", "Config", "IdmapConfig", "LogConfig", "load_config"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BotConfig(_Section):
    app_id: str = Field(default="", description="QQ bot AppID; bare OpenIDs belong to it")
    secret: SecretStr = Field(default=SecretStr(""), description="QQ bot AppSecret (never logged)")

    @field_validator("app_id")
    @classmethod
    def _digits(cls, value: str) -> str:
        if value and not value.isdigit():
            raise ValueError("must be the numeric AppID")
        return value


class IdmapConfig(_Section):
    data_dir: Path = Field(default=Path("./data"), description="where openid-map.db lives")
    map_size_mb: int = Field(default=64, ge=1, description="initial LMDB map size; grows by itself")


class LogConfig(_Section):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["console", "json"] = "console"


class Config(_Section):
    bot: BotConfig = BotConfig()
    idmap: IdmapConfig = IdmapConfig()
    log: LogConfig = LogConfig()

    @property
    def identity_db_path(self) -> Path:
        return self.idmap.data_dir / "openid-map.db"


def load_config(path: str | Path) -> Config:
    """Read and validate a config file; errors say which key and why."""
    file = Path(path)
    try:
        raw = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise BadInputError("config", str(file), f"cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise BadInputError("config", str(file), f"not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise BadInputError("config", str(file), "top level must be a mapping")
    try:
        return Config.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "config"
        raise BadInputError(where, str(file), first["msg"]) from None
