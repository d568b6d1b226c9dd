"""Which address a request comes from, and whether the browser used HTTPS, when reverse
proxies stand in front of the API listener (pure: addresses and header text in, answers out).

Only a peer inside ``api.trusted_proxies`` may speak for the client: its ``X-Forwarded-For``
names the hops before it, its ``X-Forwarded-Proto`` the scheme the browser used. From any
other peer both headers are ignored, so a client that writes them itself chooses neither the
address the access rules and the login limit see nor the session cookie's flags.

The client is the nearest hop that is not a trusted proxy, reading ``X-Forwarded-For`` from
the right (each proxy appends the address it was reached from; what a client wrote itself is
on the left and only read past trusted hops). A hop that is not an address stops the walk:
the client is then the last trusted hop, the only address known for sure.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from typing import TypeAlias

__all__ = ["IpAddress", "TrustedProxies", "parse_address", "parse_forwarded_for"]

IpAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
_Network: TypeAlias = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_address(text: str | None) -> IpAddress | None:
    """An address as a socket peer or a proxy writes it (``1.2.3.4``, ``1.2.3.4:80``,
    ``::1``, ``[::1]``, ``[::1]:80``, ``fe80::1%eth0``), or None when it is not one. An
    IPv4-mapped IPv6 address is its IPv4 address (a dual-stack listener reports those)."""
    if not text:
        return None
    text = text.strip()
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not (rest.startswith(":") and _is_port(rest[1:]))):
            return None
        text = host
    elif text.count(":") == 1:  # IPv4 with a port; an IPv6 address has two colons at least
        text, _, port = text.partition(":")
        if not _is_port(port):
            return None
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _is_port(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 5


def parse_forwarded_for(values: Iterable[str]) -> tuple[IpAddress | None, ...]:
    """The hops of ``X-Forwarded-For`` headers, first hop first; several headers are one
    list (as HTTP joins them), empty elements are skipped, and an element that is not an
    address is None."""
    return tuple(parse_address(item) for value in values for item in value.split(",")
                 if item.strip())


def parse_networks(cidrs: Iterable[str]) -> tuple[_Network, ...]:
    """Networks from config text (validated there: a bad one raises ValueError here)."""
    return tuple(ipaddress.ip_network(cidr.strip(), strict=False) for cidr in cidrs)


def in_networks(address: IpAddress | None, networks: Sequence[_Network]) -> bool:
    """Whether ``address`` is inside one of ``networks`` (an address of the other IP
    version is in none of them)."""
    return address is not None and any(address in network for network in networks)


class TrustedProxies:
    """The ``api.trusted_proxies`` networks, and what their headers say."""

    def __init__(self, cidrs: Sequence[str] = ()) -> None:
        self._networks = parse_networks(cidrs)

    def trusts(self, address: IpAddress | None) -> bool:
        return in_networks(address, self._networks)

    def client(self, peer: str | None, forwarded_for: Sequence[str] = ()) -> str | None:
        """The client's address: the socket peer as given, or, when the peer is a trusted
        proxy, the nearest hop of ``X-Forwarded-For`` that is not one (the first hop when
        all are)."""
        address = parse_address(peer)
        if not self.trusts(address):
            return peer
        for hop in reversed(parse_forwarded_for(forwarded_for)):
            if hop is None:
                break
            address = hop
            if not self.trusts(hop):
                break
        return str(address)

    def is_https(self, peer: str | None, own_scheme: str,
                 forwarded_proto: Sequence[str] = ()) -> bool:
        """Whether the browser reached us over HTTPS: the listener's own TLS, or a trusted
        peer's ``X-Forwarded-Proto`` (its last value: what the nearest proxy says)."""
        if own_scheme == "https":
            return True
        if not forwarded_proto or not self.trusts(parse_address(peer)):
            return False
        values = [item.strip().lower() for value in forwarded_proto
                  for item in value.split(",") if item.strip()]
        return bool(values) and values[-1] == "https"
