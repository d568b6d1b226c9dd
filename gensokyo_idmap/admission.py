"""What a listener takes from a browser's reach, before any token or handler looks at a
request (pure: header text in, a refusal or None out).

A listener on 127.0.0.1 without a token is reachable by every web page the operator opens,
in two ways, and these rules close both:

- **Cross-site requests.** A page on another origin can send a form, an image or a
  ``fetch(…, {mode: "no-cors"})`` without reading the answer, which is enough to write. A
  request that may change something (a *guarded* one) is refused (403) when its ``Origin``
  is another origin, is ``null``, or when ``Sec-Fetch-Site`` says ``cross-site``. Where a
  guarded route reads a JSON body, any other ``Content-Type`` is refused (415): a page
  cannot send ``application/json`` to another origin without a CORS preflight, which no
  listener answers.
- **DNS rebinding.** A page at ``http://evil.example:15631/`` whose name is made to resolve
  to 127.0.0.1 talks to the listener as its own origin, reading answers too. Its requests
  say ``Host: evil.example:15631``: a ``Host`` that names anything but ``localhost`` or a
  name in ``api.allowed_hosts`` is refused (421). An IP address is fine (rebinding needs a
  name; frameworks on other machines dial a listener by its address), and so is no
  ``Host`` or an empty one (browsers always send the name they dialled).

Rules, in the order they are checked:

1. ``Host``: absent or empty: taken. ``[IPv6]`` or dotted IPv4, with or without a port:
   taken. A name (ASCII; case and one trailing dot do not matter; a port may follow) that
   is ``localhost`` or listed: taken. Anything else, a malformed value included: 421.
2. Guarded requests: ``Sec-Fetch-Site: cross-site``: 403. An ``Origin`` (other than none)
   whose host and port are not the request's ``Host``, and whose host is not listed: 403
   (``null`` and schemes other than http(s) included). No ``Origin`` (scripts, frameworks):
   taken.
3. Guarded JSON routes: a ``Content-Type`` other than ``application/json`` (parameters such
   as ``charset`` allowed), or none: 415.

A listed name counts as the operator's own site on any port and scheme: behind a TLS proxy
at ``https://idmap.example.org`` the browser's ``Origin`` is that name while the proxy may
rewrite ``Host`` to the listener's address.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, NamedTuple

__all__ = ["SAFE_METHODS", "Admission", "Authority", "Refusal", "allowed_host_name",
           "parse_authority"]

#: A host name as a browser sends it: ASCII labels (punycode for others), '-' and '_'.
_LABEL: Final = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_NAME: Final = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_PORT: Final = re.compile(r"[0-9]{1,5}")
#: Methods that change nothing by HTTP's own rules (a route breaking them guards itself).
SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_SHOWN: Final = 80  # at most this many characters of a header are quoted back


class Authority(NamedTuple):
    """The host and port of a ``Host`` header or an origin: ``host`` lower case, without
    brackets or a trailing dot; ``port`` None when none was written."""

    host: str
    port: int | None
    is_ip: bool


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request is not taken: its HTTP status, a short code, and a message that says
    what to change (it quotes request headers, never a token)."""

    status: int
    code: str
    message: str


def _shown(text: str) -> str:
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "…")


def parse_authority(text: str) -> Authority | None:
    """``host[:port]`` as HTTP writes it (IPv6 in brackets), or None when malformed."""
    if text.startswith("["):
        inside, bracket, rest = text[1:].partition("]")
        if not bracket or "%" in inside:
            return None
        try:
            host = ipaddress.IPv6Address(inside).compressed
        except ValueError:
            return None
        if rest and not rest.startswith(":"):
            return None
        port_text, is_ip = rest[1:] if rest else None, True
    else:
        host, colon, port_text_ = text.partition(":")
        port_text = port_text_ if colon else None
        if ":" in port_text_:
            return None  # a bare IPv6 address, or two ports
        try:
            host, is_ip = str(ipaddress.IPv4Address(host)), True
        except ValueError:
            host, is_ip = host.lower(), False
            if host.endswith("."):
                host = host[:-1]
            if not host.isascii() or len(host) > 253 or not _NAME.fullmatch(host):
                return None
    if port_text is None or port_text == "":
        return Authority(host, None, is_ip)
    if not port_text.isascii() or not _PORT.fullmatch(port_text) or int(port_text) > 65535:
        return None
    return Authority(host, int(port_text), is_ip)


def allowed_host_name(text: str) -> str:
    """An ``api.allowed_hosts`` entry as :func:`parse_authority` writes names (lower case,
    no trailing dot); ValueError saying what to write instead."""
    stripped = text.strip()
    if not stripped.isascii():
        try:
            suggestion = f": {stripped.encode('idna').decode('ascii')}"
        except UnicodeError:
            suggestion = ""
        raise ValueError(f"{text!r}: write an international name in its xn-- (punycode) "
                         f"form{suggestion}")
    if "*" in stripped:
        raise ValueError(f"{text!r}: no wildcards; list each name")
    parsed = parse_authority(stripped)
    if parsed is None:
        raise ValueError(f"{text!r} is not a host name (letters, digits, '-', '_' and dots)")
    if parsed.is_ip:
        raise ValueError(f"{text!r} is an IP address, which every listener takes anyway: "
                         "list host names only")
    if parsed.port is not None:
        raise ValueError(f"{text!r}: give the name without a port (every port of a listed "
                         "name is taken)")
    return parsed.host


class Admission:
    """The rules above over one set of listed names (``api.allowed_hosts``)."""

    def __init__(self, allowed_hosts: Iterable[str] = ()) -> None:
        self._sites = frozenset(map(allowed_host_name, allowed_hosts)) - {"localhost"}
        #: what Host may name; localhost is no one's site (rule 2 takes only its own origin)
        self._names = self._sites | {"localhost"}

    def host_refusal(self, host: str | None) -> Refusal | None:
        """Rule 1."""
        if not host:
            return None
        parsed = parse_authority(host)
        if parsed is None:
            return Refusal(421, "misdirected", f"Host {_shown(host)} is not a host name or "
                           "IP address with an optional port")
        if parsed.is_ip or parsed.host in self._names:
            return None
        return Refusal(421, "misdirected", f"Host {_shown(host)} is not a name this "
                       "listener answers to: add the name to api.allowed_hosts (IP "
                       "addresses and localhost are always taken)")

    def site_refusal(self, host: str | None, origin: str | None,
                     fetch_site: str | None) -> Refusal | None:
        """Rule 2 (for a guarded request whose ``Host`` passed rule 1)."""
        if fetch_site is not None and fetch_site.strip().lower() == "cross-site":
            return Refusal(403, "cross_site", "a request from another site "
                           "(Sec-Fetch-Site: cross-site) may not change anything here")
        if origin is None or self._own_origin(origin, host):
            return None
        return Refusal(403, "cross_site", f"a request from another site (Origin "
                       f"{_shown(origin)}) may not change anything here; if that site is "
                       "yours, add its host name to api.allowed_hosts")

    def _own_origin(self, origin: str, host: str | None) -> bool:
        scheme, sep, rest = origin.strip().partition("://")
        scheme = scheme.lower()
        if not sep or scheme not in _DEFAULT_PORTS or "/" in rest or "@" in rest:
            return False
        theirs = parse_authority(rest)
        if theirs is None:
            return False
        if not theirs.is_ip and theirs.host in self._sites:
            return True
        ours = parse_authority(host) if host else None
        if ours is None:
            return False
        default = _DEFAULT_PORTS[scheme]  # a port left out is the scheme's, on either side
        return (theirs.host, theirs.port or default) == (ours.host, ours.port or default)

    @staticmethod
    def content_refusal(content_type: str | None) -> Refusal | None:
        """Rule 3."""
        kind = (content_type or "").partition(";")[0].strip().lower()
        if kind == "application/json":
            return None
        shown = _shown(content_type) if content_type else "none"
        return Refusal(415, "unsupported_media_type", "the body must be JSON sent with "
                       f"Content-Type: application/json (got {shown})")

    def refusal(self, headers: Mapping[str, str], *, guarded: bool,
                json_body: bool = False) -> Refusal | None:
        """Rules 1-3 over a request's headers (a case-insensitive mapping, as servers hand
        them over): the first refusal, or None when the request may go on to its token
        check and handler. ``guarded``: the request may change something; ``json_body``:
        it carries a JSON body (implies guarded)."""
        host = headers.get("Host")
        refused = self.host_refusal(host)
        if refused is None and (guarded or json_body):
            refused = self.site_refusal(host, headers.get("Origin"),
                                        headers.get("Sec-Fetch-Site"))
        if refused is None and json_body:
            refused = self.content_refusal(headers.get("Content-Type"))
        return refused
