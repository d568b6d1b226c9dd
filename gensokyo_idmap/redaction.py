"""Secrets out of text we show: the one place that decides what a secret looks like (pure).

Secrets reach text three ways, and each has its rule here:

1. **A field named like a secret** (``secret``, ``access_token``, ``Authorization`` …):
   :func:`is_secret_name`, by name part, so a new field cannot leak because nobody added it
   to a list. The log processor and the config errors hide such values whole.
2. **Credentials inside a URL**: ``ws://user:password@host/`` and ``?access_token=…``
   (OneBot frameworks take the token as a query parameter too). :func:`redact_url` hides
   the user information and secret-named query values; the URL stays recognisable.
3. **A secret inside free text**: a config value that is not valid YAML
   (``[{url: …, secret: s3cret``), an exception's message. :func:`redact_text` does (2)
   for every URL in the text and hides the value after every ``<secret name>:`` or
   ``<secret name>=``.

Used by the structlog processor (every string a log line carries, however it got there),
by :class:`~gensokyo_idmap.errors.BadInputError` (every value an error echoes) and by what
the CLI prints of stored names (outbox sinks are named by their URL).
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["HIDDEN", "describe_dsn", "is_secret_name", "redact_text", "redact_url"]

#: What a hidden secret is shown as.
HIDDEN: Final = "***"
_SECRET_WORDS: Final = ("secret", "token", "password", "passwd", "authorization")
_SECRET_NAME: Final = r"[\w.\-]*(?:secret|token|passw(?:or)?d|authorization)[\w.\-]*"
# scheme://userinfo@ : the userinfo (a user, a user:password, or a token) is hidden whole,
# up to the last @ of the URL: an unescaped @, /, ? or # in a password (which a driver then
# reads as the path, query or fragment, and names in its error) must not leak any part of
# it, so an @ later in the path or query hides what comes before it too (showing less of
# such a URL is the safe side)
_USERINFO: Final = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^\s'\"]*@")
# ?name=value / &name=value with a secret-named name (e.g. OneBot's ?access_token=)
_QUERY_VALUE: Final = re.compile(rf"(?i)(?P<name>[?&]{_SECRET_NAME}=)[^&#\s'\"]*")
# <secret name> then ':' or '=' (quoted names too), then the value: quoted, or up to a
# delimiter; an auth scheme word (Bearer, Basic …) before it is kept
_NAMED_VALUE: Final = re.compile(
    rf"(?i)(?P<name>{_SECRET_NAME}[\"']?\s*[:=]\s*)"
    r"(?P<scheme>(?:bearer|basic|token|qqbot)\s+)?"
    r"(?P<value>\"[^\"]*\"?|'[^']*'?|[^\s,;&}\]\"']+)")
# a cheap first look: most text holds none of these, and is returned as it is
_SUSPECT: Final = re.compile(r"(?i)secret|token|passw|authoriz")


def is_secret_name(name: str) -> bool:
    """Whether a field or key path is named like a secret (its value is never shown)."""
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_WORDS)


def redact_url(text: str) -> str:
    """``text`` with the credentials of every URL in it hidden: the user information
    (``ws://***@host/``) and secret-named query values (``?access_token=***``). Safe on any
    text (nothing else changes); text without ``://`` is returned as it is (the same
    object), which is most log fields."""
    if "://" not in text:
        return text
    text = _USERINFO.sub(rf"\g<scheme>{HIDDEN}@", text)
    return _QUERY_VALUE.sub(rf"\g<name>{HIDDEN}", text) if _SUSPECT.search(text) else text


def describe_dsn(dsn: str) -> str:
    """A PostgreSQL DSN as messages may show it: a URL with its password hidden
    (``user:***@``); a key/value DSN (``host=… password=…``) not at all, as no part of it
    is known safe to echo. Here, not beside the driver, so that a message about a missing
    driver names the server the same way."""
    return redact_url(dsn) if "://" in dsn else "the configured PostgreSQL"


def redact_text(text: str) -> str:
    """:func:`redact_url`, and the value after every ``<secret name>:`` or
    ``<secret name>=`` hidden too: for a value we echo back (a config value that is not
    valid YAML, ``[{url: …, secret: s3cret``), not for our own messages (where
    ``bot.secret: not configured`` names a field and must stay readable)."""
    text = redact_url(text)
    if not _SUSPECT.search(text):
        return text
    return _NAMED_VALUE.sub(_hide_value, text)


def _hide_value(match: re.Match[str]) -> str:
    return f"{match['name']}{match['scheme'] or ''}{HIDDEN}"
