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
from gensokyo_idmap.identity import check_app_id

__all__ = ["BotConfig", "Config", "IdmapConfig", "LogConfig", "load_config"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BotConfig(_Section):
    app_id: str = Field(default="", description="QQ bot AppID; bare OpenIDs belong to it")
    secret: SecretStr = Field(default=SecretStr(""), description="QQ bot AppSecret (never logged)")

    @field_validator("app_id", mode="before")
    @classmethod
    def _digits(cls, value: object) -> object:
        if isinstance(value, int) and not isinstance(value, bool):
            raise ValueError('quote the AppID so YAML keeps it as text: app_id: "102000001"')
        if value:
            try:
                check_app_id(value, "bot.app_id")  # type: ignore[arg-type]
            except BadInputError as err:
                raise ValueError(err.reason) from None
        return value


class IdmapConfig(_Section):
    data_dir: Path = Field(default=Path("./data"), description="where openid-map.db lives")
    map_size_mb: int = Field(default=64, ge=1, description="initial LMDB map size; grows by itself")
    msgid_ttl_seconds: int = Field(default=3600, ge=1, description="virtual message id lifetime")
    msgid_sweep_interval_seconds: float = Field(
        default=60, gt=0, description="how often expired message ids are deleted"
    )
    legacy_db: Path | None = Field(
        default=None,
        description="the old Go daemon's idmap.db; default <data_dir>/idmap.db; empty: none",
    )


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

    @property
    def msgid_db_path(self) -> Path:
        return self.idmap.data_dir / "msgid-map.db"

    @property
    def legacy_db_path(self) -> Path | None:
        """Where an old idmap.db would be; None when migration is switched off ("")."""
        if "legacy_db" not in self.idmap.model_fields_set:
            return self.idmap.data_dir / "idmap.db"
        legacy = self.idmap.legacy_db
        return None if legacy is None or str(legacy) in ("", ".") else legacy


def load_config(path: str | Path) -> Config:
    """Read and validate a config file; errors say which key and why."""
    file = Path(path)
    try:
        raw = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
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
    try:
        return Config.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "config"
        secret_like = any(w in where.lower() for w in ("secret", "token", "password"))
        shown = "<hidden>" if secret_like else first.get("input")
        raise BadInputError(where, shown, f"{first['msg']} (in {file})") from None
