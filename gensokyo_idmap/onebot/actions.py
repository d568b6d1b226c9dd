"""OneBot v11 action frames and responses, pure: no sockets, no stores.

Every transport (reverse WS, forward WS, the HTTP API) hands a decoded frame to
:func:`parse_action` and sends back what :func:`ok` / :func:`failed` build, so the three
answer identically:

- ``echo`` goes back unchanged, whatever its JSON type (clients match on it);
- every response has ``status``, ``retcode``, ``data``, ``message`` and ``wording``;
- the ``_async`` suffix is stripped and remembered (the caller answers ``async`` at once);
- parameters are read leniently, as clients send them: ``"123"`` is 123, ``"true"`` is
  True; anything else wrong is a :class:`BadInputError` naming the parameter (retcode 100).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from gensokyo_idmap.errors import BadInputError, IdmapError

__all__ = [
    "RETCODE_ASYNC",
    "RETCODE_BAD_JSON",
    "RETCODE_UNKNOWN_ACTION",
    "ActionRequest",
    "async_accepted",
    "bool_param",
    "failed",
    "failed_from",
    "int_param",
    "ok",
    "parse_action",
    "str_param",
    "unknown_action",
]

RETCODE_ASYNC: Final = 1
RETCODE_BAD_JSON: Final = 1400
RETCODE_UNKNOWN_ACTION: Final = 1404
_ASYNC_SUFFIX: Final = "_async"
_MAX_ACTION_LEN: Final = 64


@dataclass(frozen=True, slots=True)
class ActionRequest:
    """One action call: its name without ``_async``, its params, and the caller's echo."""

    action: str
    params: Mapping[str, Any] = field(default_factory=dict)
    echo: Any = None
    queued: bool = False  # called with the ``_async`` suffix


def parse_action(frame: object) -> ActionRequest:
    """Read ``{"action", "params", "echo"}``; a missing ``params`` means no arguments."""
    # a decoded frame is a dict: checked first, as the Mapping ABC's check costs more
    if not isinstance(frame, dict) and not isinstance(frame, Mapping):
        raise BadInputError("frame", frame, "an action frame must be a JSON object")
    action = frame.get("action")
    if not isinstance(action, str) or not action or len(action) > _MAX_ACTION_LEN:
        raise BadInputError("action", action, "must be the name of an action")
    params = frame.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict) and not isinstance(params, Mapping):
        raise BadInputError("params", params, "must be a JSON object")
    queued = action.endswith(_ASYNC_SUFFIX) and len(action) > len(_ASYNC_SUFFIX)
    if queued:
        action = action[: -len(_ASYNC_SUFFIX)]
    return ActionRequest(action, params, frame.get("echo"), queued)


def ok(data: Any, echo: Any = None) -> dict[str, Any]:
    return {"status": "ok", "retcode": 0, "data": data, "message": "", "wording": "",
            "echo": echo}


def async_accepted(echo: Any = None) -> dict[str, Any]:
    return {"status": "async", "retcode": RETCODE_ASYNC, "data": None, "message": "",
            "wording": "", "echo": echo}


def failed(retcode: int, message: str, echo: Any = None) -> dict[str, Any]:
    """A failure; ``message`` and ``wording`` both carry the text (clients read either)."""
    return {"status": "failed", "retcode": retcode, "data": None, "message": message,
            "wording": message, "echo": echo}


def failed_from(error: IdmapError, echo: Any = None) -> dict[str, Any]:
    """Our error as a response: the class decides the retcode, the message says why."""
    return failed(error.retcode, error.message, echo)


def unknown_action(action: str, echo: Any = None) -> dict[str, Any]:
    return failed(RETCODE_UNKNOWN_ACTION, f"unsupported action: {action}", echo)


# --- lenient parameters ---------------------------------------------------------------------

_MISSING: Final = object()


def _get(params: Mapping[str, Any], name: str, required: bool) -> Any:
    value = params.get(name, _MISSING)
    if value is _MISSING or value is None:
        if required:
            raise BadInputError(name, None, "is required")
        return _MISSING
    return value


def int_param(params: Mapping[str, Any], name: str, *, required: bool = True,
              default: int | None = None) -> int | None:
    """An integer parameter; ``"42"`` is 42; floats, bools and other text are refused."""
    value = _get(params, name, required)
    if value is _MISSING:
        return default
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.isascii() and text.isdigit():
            return int(text)
    raise BadInputError(name, value, "must be an integer")


_TRUE: Final = frozenset({"true", "1", "yes", "on"})
_FALSE: Final = frozenset({"false", "0", "no", "off", ""})


def bool_param(params: Mapping[str, Any], name: str, default: bool = False) -> bool:
    value = params.get(name)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise BadInputError(name, value, "must be true or false")


def str_param(params: Mapping[str, Any], name: str, *, required: bool = True,
              default: str | None = None) -> str | None:
    """A text parameter; numbers become their decimal text (clients mix the two)."""
    value = _get(params, name, required)
    if value is _MISSING:
        return default
    if isinstance(value, bool):
        raise BadInputError(name, value, "must be text")
    if isinstance(value, int | str):
        return str(value)
    raise BadInputError(name, value, "must be text")
