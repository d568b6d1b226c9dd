"""``host:port`` listen addresses: the one parser every listener and check uses (pure).

Forms: ``127.0.0.1:8443``, ``localhost:8443``, ``0.0.0.0:8443`` and, for IPv6, the
address in brackets as in a URL: ``[::1]:8443``, ``[::]:15631``. An IPv6 address without
brackets is refused rather than guessed at (``::1:8443`` could be either of two
addresses). The parsed host is bare (no brackets), ready for a socket; :meth:`HostPort.text`
writes it back in the configured form, so a URL built from it is valid.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Final, NamedTuple

from gensokyo_idmap.errors import BadInputError

__all__ = ["HostPort", "is_loopback_host", "parse_host_port"]

#: Host names and IPv4 addresses: letters, digits, '.', '-', '_' (no spaces, no '/', no '@').
_NAME: Final = re.compile(r"[A-Za-z0-9._-]{1,253}")
_PORT: Final = re.compile(r"[0-9]{1,5}")
_FORMS: Final = "host:port (e.g. 127.0.0.1:8443, or [::1]:8443 for IPv6)"


class HostPort(NamedTuple):
    host: str  # bare: "127.0.0.1", "localhost", "::1"
    port: int

    @property
    def text(self) -> str:
        """``host:port``, the IPv6 host in brackets (as configured, and as a URL wants it)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_host_port(text: str, field: str) -> HostPort:
    """The host and port of a listen address; :class:`BadInputError` names ``field``."""
    if not isinstance(text, str):
        raise BadInputError(field, text, f"must be {_FORMS}")
    host, sep, port = text.rpartition(":")
    if not sep or not _PORT.fullmatch(port) or not 0 < int(port) < 65536:
        raise BadInputError(field, text, f"must be {_FORMS}, the port 1 to 65535")
    if host.startswith("[") and host.endswith("]"):
        bare = host[1:-1]
        try:
            ipaddress.IPv6Address(bare)
        except ValueError:
            raise BadInputError(field, text, "the part in brackets must be an IPv6 address"
                                ) from None
        return HostPort(bare, int(port))
    if ":" in host:
        raise BadInputError(field, text, "write an IPv6 address in brackets: [::1]:8443")
    if not _NAME.fullmatch(host):
        raise BadInputError(field, text, f"must be {_FORMS}; the host is a name or an "
                            "IP address")
    return HostPort(host, int(port))


def is_loopback_host(host: str) -> bool:
    """``localhost``, 127.0.0.0/8 or ::1 (brackets allowed); anything else is not."""
    bare = host.strip("[]")
    if bare == "localhost":
        return True
    try:
        return ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything
