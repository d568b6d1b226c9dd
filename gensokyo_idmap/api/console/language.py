"""Which language a console page is written in (pure: no I/O).

The console speaks English and Simplified Chinese. A visitor's choice (the language switch
in the page header, kept in a cookie) wins; without one, the browser's ``Accept-Language``
decides (RFC 9110 §12.5.4: language ranges with ``q`` weights, the first of the highest
weight that we speak); with neither, English.

Any Chinese range (``zh``, ``zh-CN``, ``zh-Hans``, ``zh-TW``…) gets the Simplified Chinese
pages: they are the only Chinese ones, and a reader of Traditional Chinese reads them more
easily than English. A range we do not speak is passed over, as is one weighted ``q=0``;
``*`` is English.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["COOKIE", "DEFAULT", "LANGUAGES", "from_accept_language", "pick", "supported"]

#: The console's languages, as the pages name them (``<html lang>``, the cookie's value).
LANGUAGES: Final = ("en", "zh-CN")
DEFAULT: Final = "en"
#: The cookie holding the visitor's choice.
COOKIE: Final = "gsk_console_lang"
#: A header longer than this is not read further (a browser sends a few dozen bytes).
MAX_HEADER: Final = 4096

_RANGE: Final = re.compile(r"\s*([A-Za-z]{1,8}(?:-[A-Za-z0-9]{1,8})*|\*)\s*(?:;(.*))?\Z",
                           re.DOTALL)
_WEIGHT: Final = re.compile(r"\s*[qQ]\s*=\s*(0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?)\s*\Z")


def supported(tag: str | None) -> str | None:
    """The console language a language tag or range names (``zh-hans-cn`` → ``zh-CN``,
    ``EN-gb`` → ``en``, ``*`` → ``en``), or None for one we do not speak."""
    if not tag:
        return None
    primary = tag.strip().split("-", 1)[0].lower()
    if primary == "zh":
        return "zh-CN"
    if primary in ("en", "*"):
        return "en"
    return None


def from_accept_language(header: str | None) -> str | None:
    """The language an ``Accept-Language`` header asks for, or None when it names none we
    speak. A part that cannot be read (a bad range, a bad ``q``) is skipped, not an error:
    a browser's header is advice."""
    if not header:
        return None
    best: tuple[float, int, str] | None = None
    for order, part in enumerate(header[:MAX_HEADER].split(",")):
        found = _RANGE.match(part)
        if found is None:
            continue
        weight = 1.0
        for param in (found.group(2) or "").split(";"):
            if not param.strip():
                continue
            q = _WEIGHT.match(param)
            if q is None:
                weight = -1.0  # an unreadable weight: the range is not trusted
                break
            weight = float(q.group(1))
        language = supported(found.group(1))
        if language is None or weight <= 0:
            continue
        # the highest weight wins, the first named among equals
        if best is None or (weight, -order) > (best[0], -best[1]):
            best = (weight, order, language)
    return None if best is None else best[2]


def pick(accept_language: str | None, chosen: str | None) -> str:
    """The language of a page: the visitor's ``chosen`` one (the cookie) when we speak it,
    else the one ``Accept-Language`` asks for, else :data:`DEFAULT`."""
    if chosen is not None and chosen in LANGUAGES:
        return chosen
    return from_accept_language(accept_language) or DEFAULT
