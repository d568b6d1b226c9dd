"""Typed identity keys, the external rUIN text, and client-input parsing (pure, no I/O).

Rules this module keeps:

- Every identity is typed by its prefix, never by guessing from its length or shape.
  ``openid:QQ:<appid>:<openid>``, ``union:QQ:<union>``, ``ruin:<P>:<index>:<id>``,
  ``raw:<value>``. ``parse_key(key.key) == key`` for every key this module can build.
- Values are kept exactly as given (no case folding): two OpenIDs that differ only in case
  are two people as far as we can tell, and merging them would be the one unforgivable bug.
- The external rUIN text ``rUIN-<PLATFORM>-<index>-<id>`` is written with the id in Base32
  (RFC 4648, upper case, no padding). On input the id may be raw or Base32, in either case,
  padded or not. Base32 is taken only when the text is canonical Base32 of printable UTF-8;
  everything else is the raw id. Digits-only ids are never Base32 (Base32 of any text
  starting with a digit starts with a letter), so QQ numbers always read back as themselves.
  A QQ number is digits: ``rUIN-QQ-…`` text whose id is neither digits nor the Base32 of
  digits is refused, not kept as a raw id (a mistyped number would become a new identity).
  Other platforms' ids are free-form. (Typed ``ruin:QQ:…`` keys stay exact store addresses:
  they name whatever is stored, so an old entry can still be looked at and moved.)
- Client input (OneBot params, HTTP API, CLI): all digits → vUIN, ``rUIN-…`` → rUIN, a typed
  key → that key, anything else → OpenID of the serving AppID (unless guessing is off).
- Bad input raises :class:`BadInputError` naming the field and the value.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, TypeAlias

from gensokyo_idmap.errors import BadInputError

__all__ = [
    "MAX_KEY_BYTES",
    "MAX_OPENID_LEN",
    "MAX_SCENE_BYTES",
    "MAX_VALUE_BYTES",
    "MAX_VUIN",
    "MAX_VUIN_DIGITS",
    "UTF8_MAX_BYTES_PER_CHAR",
    "ClientId",
    "IdentityKey",
    "OpenId",
    "RUin",
    "RawId",
    "UnionId",
    "VUin",
    "chat_scene",
    "check_app_id",
    "format_ruin_text",
    "is_platform_openid",
    "openid_prefix",
    "parse_client_input",
    "parse_identity_input",
    "parse_key",
    "parse_ruin_text",
    "parse_scene",
    "parse_vuin",
    "served_app_id",
]

#: vUINs are OneBot ``user_id`` / ``group_id`` values: positive and inside int64.
MAX_VUIN: Final = 2**63 - 1
#: Decimal digits of the longest vUIN: longer digit strings are refused before int() reads
#: them (a megabyte of digits would be a slow parse for nothing).
MAX_VUIN_DIGITS: Final = len(str(MAX_VUIN))

_PLATFORM = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")
_APPID = re.compile(r"[0-9]{1,20}")
_TOKEN = re.compile(r"[A-Za-z0-9_\-]+")  # OpenIDs and union ids: no ':' or spaces
_DIGITS = re.compile(r"[0-9]+")
_BASE32 = re.compile(r"[A-Za-z2-7]+=*")
_PLATFORM_OPENID = re.compile(r"[0-9A-Fa-f]{32}")


def is_platform_openid(text: str) -> bool:
    """Whether ``text`` is shaped as the platform issues OpenIDs (32 hex digits).

    The old daemon's store held OpenIDs beside channel-side ids (channels, guilds, guild
    users: digits) and legacy message ids, with nothing saying which is which; migration
    reads a 32-hex id as an OpenID and anything else as ``raw:``. Every other reader of a
    legacy id (the ``/getid`` API, a send naming an unknown id) uses this one rule, or one
    channel would get two numbers.
    """
    return len(text) == 32 and _PLATFORM_OPENID.fullmatch(text) is not None
# --- byte caps: every length limit of an identity, a key or a scene is spelled here ------

#: The longest key a store keeps, in bytes: LMDB's limit. Every backend honours it, so data
#: moves between backends unchanged (legacy config keys are checked against it too).
MAX_KEY_BYTES: Final = 511
#: Identity values (OpenIDs, union ids, rUIN ids, raw values) in UTF-8 bytes: with the
#: longest prefix (``ruin:<32-letter platform>:<9 digits>:``, 49 bytes) a key stays under
#: :data:`MAX_KEY_BYTES`.
MAX_VALUE_BYTES: Final = 400
#: A ``last_seen`` scene (:func:`chat_scene` text) in UTF-8 bytes: its key is the 8-byte
#: vUIN then the scene, under :data:`MAX_KEY_BYTES`.
MAX_SCENE_BYTES: Final = 400
#: OpenIDs as the platform sends them, in characters: observed ones are 32 hex characters;
#: anything past this is not an OpenID, and the cap keeps every scene text (AppID, kind and
#: OpenID) well inside :data:`MAX_SCENE_BYTES`.
MAX_OPENID_LEN: Final = 128
#: UTF-8 takes at most this many bytes a character: text of at most ``limit // 4``
#: characters is within ``limit`` bytes without being encoded (a check on hot paths).
UTF8_MAX_BYTES_PER_CHAR: Final = 4
#: The platform whose rUIN ids are account numbers: digits only, in rUIN text.
QQ_PLATFORM: Final = "QQ"
#: Indexes are written and read as at most nine digits.
MAX_RUIN_INDEX: Final = 999_999_999


#: A QQ OpenID key whose parts pass :func:`check_app_id` and the OpenID checks: ASCII
#: token characters only, so at most MAX_VALUE_BYTES characters are as many bytes.
_QQ_OPENID_KEY_PREFIX: Final = f"openid:{QQ_PLATFORM}:"
_QQ_OPENID_KEY: Final = re.compile(
    rf"openid:{QQ_PLATFORM}:[0-9]{{1,20}}:[A-Za-z0-9_\-]{{1,{MAX_VALUE_BYTES}}}")


def check_app_id(value: str, field: str = "app_id") -> str:
    """An AppID as the platform issues it: 1 to 20 ASCII digits."""
    if not isinstance(value, str) or not _APPID.fullmatch(value):
        raise BadInputError(field, value, "AppID must be 1 to 20 digits (0-9)")
    return value


def served_app_id(given: str | None, served: Sequence[str], field: str = "app_id"
                  ) -> str | None:
    """The AppID a request's bare OpenIDs (and per-bot figures) are of: ``given`` when it
    is one of the bots ``served`` (in the config's order), else the first of them; None
    when none is given and none is served. A ``given`` that is no AppID, or that names no
    bot served, is a :class:`BadInputError` naming the AppIDs served (an OpenID of any
    other AppID can still be given as its typed key, ``openid:QQ:<AppID>:<OpenID>``).
    With none served (no bot configured) any AppID may be given."""
    if given is None:
        return served[0] if served else None
    check_app_id(given, field)
    if served and given not in served:
        raise BadInputError(field, given, "not a bot of this daemon (its AppIDs: "
                            f"{', '.join(served)}); an OpenID of another AppID can be given "
                            "as openid:QQ:<AppID>:<OpenID>")
    return given


def _check_value(field: str, value: str, what: str) -> None:
    if not value:
        raise BadInputError(field, value, f"{what} is empty")
    # str.isprintable() is already False for every separator but the ASCII space.
    if not value.isprintable() or " " in value:
        raise BadInputError(field, value, f"{what} holds whitespace or control characters")
    if (len(value) > MAX_VALUE_BYTES // UTF8_MAX_BYTES_PER_CHAR
            and len(value.encode("utf-8")) > MAX_VALUE_BYTES):
        raise BadInputError(field, value, f"{what} is longer than {MAX_VALUE_BYTES} bytes")


def openid_prefix(app_id: str, platform: str = QQ_PLATFORM) -> str:
    """The start of every OpenID key of one AppID: ``openid:<PLATFORM>:<appid>:``."""
    return f"openid:{platform}:{app_id}:"


def chat_scene(app_id: str, kind: str, openid: str, platform: str = QQ_PLATFORM) -> str:
    """The ``last_seen`` scene naming one chat: ``<PLATFORM>:<appid>:<kind>:<openid>``
    (kind ``group``, ``c2c``, ...); ``chat_scene(app, kind, "")`` is the prefix of every
    chat of that kind."""
    return f"{platform}:{app_id}:{kind}:{openid}"


def parse_scene(scene: str) -> tuple[str, str, str, str]:
    """(platform, AppID, kind, OpenID) of a scene :func:`chat_scene` spelled; a
    :class:`BadInputError` naming the scene when it is not four ``:``-separated fields,
    none empty (the OpenID is everything after the third ``:``)."""
    parts = scene.split(":", 3)
    if len(parts) != 4 or not all(parts):
        raise BadInputError("scene", scene, "a chat scene is <PLATFORM>:<appid>:<kind>:<openid>")
    platform, app_id, kind, openid = parts
    return platform, app_id, kind, openid


def _check_platform(field: str, platform: str) -> None:
    if not _PLATFORM.fullmatch(platform):
        raise BadInputError(
            field, platform, "platform must be a letter then up to 31 letters, digits or '_'"
        )


@dataclass(frozen=True, slots=True, init=False)
class OpenId:
    """A per-AppID OpenID of a user or group on the QQ platform (or a sibling platform)."""

    app_id: str
    openid: str
    platform: str = "QQ"
    #: The canonical key text, built once: every store access needs it.
    key: str = field(init=False, repr=False, compare=False)

    def __init__(self, app_id: str, openid: str, platform: str = QQ_PLATFORM) -> None:
        """Written out rather than generated: every event builds OpenIds, and a frozen
        dataclass's own ``__init__`` sets each field through ``object.__setattr__`` and then
        calls ``__post_init__``; this checks first and sets the four slots directly."""
        if platform == QQ_PLATFORM:
            # The usual case, checked in one match of the whole key: neither part may hold
            # the ':' between them, so the match leaves no doubt which is which, and it
            # passes exactly what the checks below pass.
            try:
                key = _QQ_OPENID_KEY_PREFIX + app_id + ":" + openid
            except TypeError:
                key = ""  # not text: the checks below name the field
            if _QQ_OPENID_KEY.fullmatch(key):
                _SET_APP_ID(self, app_id)  # _set_openid_slots, inline: once per event
                _SET_OPENID(self, openid)
                _SET_PLATFORM(self, platform)
                _SET_KEY(self, key)
                return
        _check_platform("platform", platform)
        check_app_id(app_id)
        _check_value("openid", openid, "OpenID")
        if not _TOKEN.fullmatch(openid):
            raise BadInputError("openid", openid, "OpenID may hold only A-Z a-z 0-9 _ -")
        _set_openid_slots(self, app_id, openid, platform,
                          openid_prefix(app_id, platform) + openid)


def _set_openid_slots(oid: OpenId, app_id: str, openid: str, platform: str, key: str) -> None:
    """The four fields of a checked OpenId, through the slots' own descriptors (what
    ``object.__setattr__`` reaches after a lookup per field)."""
    _SET_APP_ID(oid, app_id)
    _SET_OPENID(oid, openid)
    _SET_PLATFORM(oid, platform)
    _SET_KEY(oid, key)


_SET_APP_ID, _SET_OPENID, _SET_PLATFORM, _SET_KEY = (
    OpenId.__dict__[name].__set__ for name in ("app_id", "openid", "platform", "key"))


@dataclass(frozen=True, slots=True)
class UnionId:
    """One person across all AppIDs of one operator (QQ ``union_openid``)."""

    union_openid: str
    platform: str = "QQ"
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_platform("platform", self.platform)
        _check_value("union_openid", self.union_openid, "union OpenID")
        if not _TOKEN.fullmatch(self.union_openid):
            raise BadInputError(
                "union_openid", self.union_openid, "union OpenID may hold only A-Z a-z 0-9 _ -"
            )
        object.__setattr__(self, "key", f"union:{self.platform}:{self.union_openid}")



@dataclass(frozen=True, slots=True)
class RUin:
    """A real account number: a QQ number (rUIN) or the id of another platform's account."""

    platform: str
    index: int
    id: str
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_platform("platform", self.platform)
        if (isinstance(self.index, bool) or not isinstance(self.index, int)
                or not 0 <= self.index <= MAX_RUIN_INDEX):
            raise BadInputError(
                "index", self.index, f"rUIN index must be an integer from 0 to {MAX_RUIN_INDEX}"
            )
        _check_value("id", self.id, "rUIN id")
        object.__setattr__(self, "key", f"ruin:{self.platform}:{self.index}:{self.id}")


    @property
    def text(self) -> str:
        """The external ``rUIN-…`` form handed to clients."""
        return format_ruin_text(self)


@dataclass(frozen=True, slots=True)
class RawId:
    """A legacy or unclassified id kept exactly as it was (``raw:<value>``)."""

    value: str
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_value("raw", self.value, "raw id")
        object.__setattr__(self, "key", f"raw:{self.value}")



IdentityKey: TypeAlias = OpenId | UnionId | RUin | RawId


@dataclass(frozen=True, slots=True)
class VUin:
    """A virtual UIN named by a client (the stable integer downstream sees)."""

    value: int

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise BadInputError("vuin", self.value, "vUIN must be an integer")
        if not 0 < self.value <= MAX_VUIN:
            raise BadInputError("vuin", self.value, f"vUIN must be between 1 and {MAX_VUIN}")


ClientId: TypeAlias = VUin | IdentityKey


def parse_vuin(text: str | int, field: str = "vuin") -> int:
    """A vUIN from a client: decimal digits (or an int), positive, inside int64."""
    if isinstance(text, bool):
        raise BadInputError(field, text, "vUIN must be a positive integer")
    if isinstance(text, int):
        value = text
    else:
        stripped = text.strip()
        if not _DIGITS.fullmatch(stripped) or len(stripped) > MAX_VUIN_DIGITS:
            raise BadInputError(field, text, "vUIN must be a positive decimal integer")
        value = int(stripped)
    if not 0 < value <= MAX_VUIN:
        raise BadInputError(field, text, f"vUIN must be between 1 and {MAX_VUIN}")
    return value


def parse_key(text: str, field: str = "key") -> IdentityKey:
    """Parse a canonical typed key (``openid:…``, ``union:…``, ``ruin:…``, ``raw:…``)."""
    if not isinstance(text, str):
        raise BadInputError(field, text, "identity key must be text")
    kind, sep, rest = text.partition(":")
    if not sep:
        raise BadInputError(
            field, text, "identity key must start with openid:, union:, ruin: or raw:"
        )
    try:
        if kind == "openid":
            parts = rest.split(":", 2)
            if len(parts) != 3:
                raise BadInputError(field, text, "expected openid:<PLATFORM>:<appid>:<openid>")
            return OpenId(platform=parts[0], app_id=parts[1], openid=parts[2])
        if kind == "union":
            parts = rest.split(":", 1)
            if len(parts) != 2:
                raise BadInputError(field, text, "expected union:<PLATFORM>:<union_openid>")
            return UnionId(platform=parts[0], union_openid=parts[1])
        if kind == "ruin":
            parts = rest.split(":", 2)
            if len(parts) != 3:
                raise BadInputError(field, text, "expected ruin:<PLATFORM>:<index>:<id>")
            return RUin(platform=parts[0], index=_parse_index(field, text, parts[1]), id=parts[2])
        if kind == "raw":
            return RawId(rest)
    except BadInputError as err:
        if err.field == field:
            raise
        raise BadInputError(field, text, err.reason) from None
    raise BadInputError(
        field, text, f"unknown identity kind {kind!r} (openid, union, ruin or raw)"
    )


def _parse_index(field: str, text: str, index: str) -> int:
    if not _DIGITS.fullmatch(index) or len(index) > 9:
        raise BadInputError(field, text, "rUIN index must be a small non-negative integer")
    return int(index)


def _b32encode(value: str) -> str:
    return base64.b32encode(value.encode("utf-8")).decode("ascii").rstrip("=")


def _b32decode_canonical(text: str) -> str | None:
    """The text Base32 encodes, if ``text`` is canonical Base32 of printable UTF-8."""
    if not _BASE32.fullmatch(text):
        return None
    body = text.rstrip("=").upper()
    try:
        raw = base64.b32decode(body + "=" * (-len(body) % 8))
        decoded = raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    if not decoded or not decoded.isprintable() or any(c.isspace() for c in decoded):
        return None
    if _b32encode(decoded) != body:
        return None  # non-zero trailing bits: not something we would have written
    return decoded


def format_ruin_text(ruin: RUin) -> str:
    """``rUIN-<PLATFORM>-<index>-<BASE32(id)>``, upper case, padding stripped.

    One exception: Base32 made only of the digits 2-7 would read back as a raw numeric id,
    so it keeps ``=`` padding (a full block of eight when none is due) to stay Base32.
    """
    encoded = _b32encode(ruin.id)
    if _DIGITS.fullmatch(encoded):
        encoded += "=" * (-len(encoded) % 8 or 8)
    return f"rUIN-{ruin.platform}-{ruin.index}-{encoded}"


def parse_ruin_text(text: str, field: str = "ruin") -> RUin:
    """Parse ``rUIN-<PLATFORM>-<index>-<id>`` with the id raw or in Base32."""
    if not isinstance(text, str):
        raise BadInputError(field, text, "rUIN must be text")
    parts = text.strip().split("-", 3)
    if len(parts) != 4 or parts[0].lower() != "ruin":
        raise BadInputError(field, text, "expected rUIN-<PLATFORM>-<index>-<id>")
    _, platform, index, ident = parts
    if not _PLATFORM.fullmatch(platform):
        raise BadInputError(
            field, text, "rUIN platform must be a letter then letters, digits or '_'"
        )
    decoded = None if _DIGITS.fullmatch(ident) else _b32decode_canonical(ident)
    if platform == QQ_PLATFORM and not _DIGITS.fullmatch(decoded or ident):
        raise BadInputError(field, text, "a QQ number is digits, as they are or in Base32 "
                            "(rUIN-QQ-0-2870338968 or rUIN-QQ-0-GI4DOMBTGM4DSNRY)")
    try:
        return RUin(platform=platform, index=_parse_index(field, text, index), id=decoded or ident)
    except BadInputError as err:
        if err.field == field:
            raise
        raise BadInputError(field, text, err.reason) from None


_KEY_PREFIXES: Final = ("openid:", "union:", "ruin:", "raw:")


def parse_client_input(
    value: str | int,
    app_id: str | None,
    *,
    field: str = "user_id",
    guess_openid: bool = True,
) -> ClientId:
    """Read an id a client sent: digits → vUIN, ``rUIN-…`` → rUIN, typed key → that key,
    anything else → OpenID of the serving AppID.

    ``guess_openid=False`` refuses the last rule (``op_userid_type`` forbids the guess).
    """
    if isinstance(value, bool):
        raise BadInputError(field, value, "expected a vUIN, an rUIN-… text or an OpenID")
    if isinstance(value, int):
        return VUin(parse_vuin(value, field))
    if not isinstance(value, str):
        raise BadInputError(field, value, "expected a vUIN, an rUIN-… text or an OpenID")
    text = value.strip()
    if not text:
        raise BadInputError(field, value, "is empty")
    if _DIGITS.fullmatch(text):
        return VUin(parse_vuin(text, field))
    if text[0] in "+-" and _DIGITS.fullmatch(text[1:]):
        raise BadInputError(field, value, "a vUIN must be a positive integer without a sign")
    if text[:5].lower() == "ruin-":
        return parse_ruin_text(text, field)
    if text.startswith(_KEY_PREFIXES):
        return parse_key(text, field)
    if not guess_openid:
        raise BadInputError(
            field, value, "not a vUIN, rUIN-… text or typed key, and OpenID guessing is off"
        )
    if app_id is None:
        raise BadInputError(field, value, "a bare OpenID needs a serving AppID (--app-id)")
    try:
        return OpenId(app_id=app_id, openid=text)
    except BadInputError as err:
        if err.field == "app_id":
            raise  # the serving AppID is wrong, not the client's value
        raise BadInputError(field, value, err.reason) from None


def parse_identity_input(value: str | int, app_id: str | None, field: str = "key") -> IdentityKey:
    """An identity from a client where a vUIN makes no sense (resolve, bind): the rules of
    :func:`parse_client_input`, with digits refused instead of read as a vUIN."""
    parsed = parse_client_input(value, app_id, field=field)
    if isinstance(parsed, VUin):
        raise BadInputError(field, value, "digits name a vUIN; give an identity (typed key, "
                            "rUIN-… text or OpenID)")
    return parsed
