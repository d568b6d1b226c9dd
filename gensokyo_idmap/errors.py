"""The one exception tree of gensokyo-idmap.

Every edge (OneBot action, HTTP API, CLI) maps errors the same way, so each class
carries the OneBot ``retcode``, the HTTP status and the CLI exit code that fit it::

    IdmapError                      retcode 100  http 400  exit 1
    ├── BadInputError               retcode 100  http 400  exit 2   a field holds a bad value
    ├── NotFoundError               retcode 100  http 404  exit 1   nothing stored under that name
    │   └── NoUsableIdentityError   retcode 100  http 404  exit 1   a vUIN exists, no identity fits
    ├── ConflictError               retcode 100  http 409  exit 1   request contradicts the store
    ├── NotConfiguredError          retcode 100  http 503  exit 1   a needed setting is unset
    ├── StoreError                  retcode 102  http 503  exit 1   the store cannot serve
    │   ├── UnreachableError        retcode 102  http 503  exit 1   its server does not answer now
    │   ├── SchemaVersionError      retcode 102  http 503  exit 1   the file is from a newer version
    │   ├── LegacyDbError           retcode 102  http 503  exit 1   an old idmap.db is damaged
    │   └── DataDirInUseError       retcode 102  http 503  exit 1   another serve holds the data dir
    ├── PlatformError               retcode 103  http 502  exit 1   the QQ platform refused
    └── UnsupportedError            retcode 103  http 501  exit 1   the platform has no way to
                                                                    do it (ban, kick, approve)

Messages name the field and the value that was wrong, never a secret.
"""

from __future__ import annotations

from gensokyo_idmap.redaction import redact_text, redact_url

__all__ = [
    "BadInputError",
    "ConflictError",
    "DataDirInUseError",
    "IdmapError",
    "LegacyDbError",
    "NoUsableIdentityError",
    "NotConfiguredError",
    "NotFoundError",
    "PlatformError",
    "SchemaVersionError",
    "StoreError",
    "UnreachableError",
    "UnsupportedError",
]


class IdmapError(Exception):
    """Root of every error gensokyo-idmap raises on purpose."""

    retcode: int = 100
    http_status: int = 400
    exit_code: int = 1
    code: str = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadInputError(IdmapError, ValueError):
    """A value given to us cannot be understood; nothing was read or written for it."""

    exit_code = 2
    code = "bad_input"

    def __init__(self, field: str, value: object, reason: str) -> None:
        # the value comes from outside: a URL's password or a "secret: …" inside it is
        # neither echoed nor kept, nor a URL's password quoted in the reason
        # (gensokyo_idmap.redaction)
        if isinstance(value, str):
            value = redact_text(value)
        reason = redact_url(reason)
        shown = value if isinstance(value, str) else redact_text(repr(value))
        if len(shown) > 200:
            shown = shown[:200] + "…"
        super().__init__(f"{field}: {reason} (got {shown!r})")
        self.field = field
        self.value = value
        self.reason = reason
        self.shown = repr(shown)  # the value as the message quotes it (redacted, cut)


class NotFoundError(IdmapError, LookupError):
    """The name asked for is not in the store."""

    http_status = 404
    code = "not_found"


class NoUsableIdentityError(NotFoundError):
    """The vUIN exists but none of its identities can be used where it is needed."""

    code = "no_usable_identity"


class ConflictError(IdmapError):
    """The request is well formed but contradicts what is stored."""

    http_status = 409
    code = "conflict"


class NotConfiguredError(IdmapError):
    """What was asked needs a setting the operator has not given (``bot.secret``): not the
    caller's fault, and no retry helps until the config is completed and the daemon
    restarted. ``setting`` names the key; its value is never part of the message."""

    http_status = 503
    code = "not_configured"

    def __init__(self, setting: str, reason: str) -> None:
        super().__init__(f"{setting}: {reason}")
        self.setting = setting


class StoreError(IdmapError):
    """The store cannot be opened, read or written."""

    retcode = 102
    http_status = 503
    code = "store_unavailable"


class UnreachableError(StoreError):
    """The server a store lives on (PostgreSQL) does not answer now, or drops us: it may
    come back, so the daemon waits for it instead of giving up (a wrong password or
    database name is one too: libpq tells those apart only in its text)."""


class SchemaVersionError(StoreError):
    """The store file was written by a newer gensokyo-idmap than this one."""

    code = "schema_too_new"


class LegacyDbError(StoreError):
    """An old bbolt ``idmap.db`` cannot be read: says what is wrong and where (page, offset)."""

    code = "legacy_db_damaged"


class DataDirInUseError(StoreError):
    """Another ``serve`` holds the data dir's lock: two daemons on one data dir would resume
    the same gateway session and knock each other off."""

    code = "data_dir_in_use"


class PlatformError(IdmapError):
    """The QQ platform answered with an error (or could not be reached).

    ``status`` is the HTTP status (None when no answer came), ``platform_code`` and
    ``platform_message`` what the platform's body said, so a failed action can show them.
    """

    retcode = 103
    http_status = 502
    code = "platform_error"

    def __init__(self, message: str, *, status: int | None = None,
                 platform_code: int | None = None, platform_message: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.platform_code = platform_code
        self.platform_message = platform_message

    @property
    def retryable(self) -> bool:
        """No answer, a 5xx or a 429: the same request may succeed a moment later."""
        return self.status is None or self.status >= 500 or self.status == 429


class UnsupportedError(IdmapError):
    """What was asked is well formed, but the QQ bot platform offers no way to do it (a bot
    cannot ban, kick or approve there; every such OneBot action has its reason in
    :mod:`gensokyo_idmap.bridge.cannot`): refused, never answered as if it had been done."""

    retcode = 103
    http_status = 501
    code = "unsupported"
