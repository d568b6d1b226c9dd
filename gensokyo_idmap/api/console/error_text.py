"""The errors the console's pages show, in the page's language (pure: no I/O).

The domain (identity parsing, the graph, the message ids) raises its errors in English, for
the logs, the CLI and the HTTP API alike; the daemon's link says a framework's problem in
English too (``FrameworkLink.problem``, also in ``/ui/overview.json``). The console shows
the ones its pages meet in the page's language: each is recognised by a pattern of its
English text and said again through the catalog, with the same values. A message no
pattern knows is shown as the domain wrote it (English): still true, only untranslated.

``N_`` marks a message for the catalog (Babel extracts it) without translating it here;
the page's translations do that when the error is shown.
"""

from __future__ import annotations

import gettext
import re
from typing import Final

from gensokyo_idmap.errors import BadInputError, IdmapError

__all__ = ["FIELDS", "KNOWN", "N_", "error_text", "said"]


def N_(message: str) -> str:  # noqa: N802 - gettext's name for a marker
    """``message`` as it is: marks it for extraction into the catalog."""
    return message


#: The console's form fields, named in a page's language (in English as the form names them;
#: a field not listed keeps its name).
FIELDS: Final = frozenset((N_("key"), N_("vuin"), N_("old"), N_("new"), N_("q"),
                           N_("virtual id"), N_("level"), N_("lang"), N_("below"),
                           N_("above"), N_("after"), N_("before"), N_("f"), N_("scene"),
                           N_("bot"), N_("number")))

#: The domain's messages the console's pages meet, as patterns of their English text (the
#: whole message, or a bad input's reason) and the catalog's message with the same values.
KNOWN: Final[tuple[tuple[re.Pattern[str], str], ...]] = tuple(
    (re.compile(pattern), message) for pattern, message in (
        (r"vUIN must be a positive integer", N_("vUIN must be a positive integer")),
        (r"vUIN must be a positive decimal integer",
         N_("vUIN must be a positive decimal integer")),
        (r"vUIN must be between 1 and (?P<max>\d+)", N_("vUIN must be between 1 and %(max)s")),
        (r"a vUIN must be a positive integer without a sign",
         N_("a vUIN must be a positive integer without a sign")),
        (r"is empty", N_("is empty")),
        (r"expected a vUIN, an rUIN-… text or an OpenID",
         N_("expected a vUIN, an rUIN-… text or an OpenID")),
        (r"digits name a vUIN; give an identity \(typed key, rUIN-… text or OpenID\)",
         N_("digits name a vUIN; give an identity (typed key, rUIN-… text or OpenID)")),
        (r"a bare OpenID needs a serving AppID \(--app-id\)",
         N_("a bare OpenID needs a serving AppID (--app-id)")),
        (r"OpenID may hold only A-Z a-z 0-9 _ -", N_("OpenID may hold only A-Z a-z 0-9 _ -")),
        (r"expected rUIN-<PLATFORM>-<index>-<id>", N_("expected rUIN-<PLATFORM>-<index>-<id>")),
        (r"must be an integer from 1 to (?P<max>\d+)",
         N_("must be an integer from 1 to %(max)s")),
        (r"must be one of (?P<choices>[\w, -]+)", N_("must be one of %(choices)s")),
        (r"vUIN (?P<vuin>\d+) is not known", N_("vUIN %(vuin)s is not known")),
        (r"vUIN (?P<vuin>\d+) has no identities to move",
         N_("vUIN %(vuin)s has no identities to move")),
        (r"(?P<key>\S+): no vUIN is known for it", N_("%(key)s: no vUIN is known for it")),
        (r"virtual message id (?P<id>\d+) is unknown or expired",
         N_("virtual message id %(id)s is unknown or expired")),
        (r"real message id (?P<id>'.*') is unknown or expired",
         N_("real message id %(id)s is unknown or expired")),
        (r"the framework refused our access token \(HTTP (?P<status>\d+)\)",
         N_("the framework refused our access token (HTTP %(status)s)")),
        (r"the framework wants an access token and none is set \(HTTP (?P<status>\d+)\)",
         N_("the framework wants an access token and none is set (HTTP %(status)s)")),
        # what the daemon's link says of the console's requests (link_status.py)
        (r"(?P<app>\d+) is not a bot of this daemon", N_("%(app)s is not a bot of this daemon")),
        (r"no framework (?P<name>.+) \(the list changed: reload the page\)",
         N_("no framework %(name)s (the list changed: reload the page)")),
        (r"(?P<name>.+) keeps no backlog to drop \(a forward-WS connection owes its events "
         r"only while it is connected\)",
         N_("%(name)s keeps no backlog to drop (a forward-WS connection owes its events only "
            "while it is connected)")),
        (r"a test message goes to a group, a C2C chat or a channel",
         N_("a test message goes to a group, a C2C chat or a channel")),
        (r"a chat scene is <PLATFORM>:<appid>:<kind>:<openid>",
         N_("a chat scene is <PLATFORM>:<appid>:<kind>:<openid>")),
    ))


def said(text: str, texts: gettext.NullTranslations) -> str:
    """``text`` in the page's language when a pattern of :data:`KNOWN` reads it all."""
    for pattern, message in KNOWN:
        found = pattern.fullmatch(text)
        if found is not None:
            return texts.gettext(message) % found.groupdict()
    return text


def error_text(err: IdmapError, texts: gettext.NullTranslations) -> str:
    """What a page says of ``err``: a bad input names its field, the reason and the value
    given; any other error its message; each in the page's language where it is known."""
    if isinstance(err, BadInputError):
        return texts.gettext("%(field)s: %(reason)s (got %(value)s)") % {
            "field": texts.gettext(err.field) if err.field in FIELDS else err.field,
            "reason": said(err.reason, texts), "value": err.shown}
    return said(err.message, texts)
