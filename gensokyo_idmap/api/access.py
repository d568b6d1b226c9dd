"""Who may call what on the API listener (pure: addresses and header text in, yes/no out).

- ``/v1/…``: with ``api.token`` set, ``Authorization: Bearer <token>`` (compared in constant
  time); without one, only loopback peers and the ``api.getid_allow`` networks.
- ``/getid``: loopback peers and the ``api.getid_allow`` networks, or the Bearer token (a
  lotus client sends a plain GET, so the network is what admits it).
- ``/healthz``, ``/metrics``, ``/openapi.json``: anyone who reaches the listener.

Wrong tokens are counted per client by the server (:mod:`.failure_limit`), not here.

A peer is the socket's, or, when that is one of ``api.trusted_proxies``, the client its
``X-Forwarded-For`` names (:mod:`.forwarded`).

A listener on a non-loopback address needs a token or ``api.getid_allow``, else the daemon
refuses to start (``ops.config_check``): an open identity API on the network is never a
default.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence

from gensokyo_idmap.api.forwarded import in_networks, parse_address, parse_networks

__all__ = ["AccessPolicy", "same_token"]


def same_token(presented: str, expected: str) -> bool:
    """Whether a token taken from a request equals the configured one, in constant time.

    aiohttp hands header bytes that are not UTF-8 over as lone surrogates (and a query
    string may spell them too), which a strict UTF-8 encode refuses: that was a 500 with a
    traceback. ``surrogatepass`` encodes any text, and differently for different text, so
    such a token is simply a wrong one (``replace`` would have let ``ab\\xff`` pass for a
    token ``ab?``).
    """
    return hmac.compare_digest(presented.encode("utf-8", "surrogatepass"),
                               expected.encode("utf-8", "surrogatepass"))


class AccessPolicy:
    def __init__(self, token: str, getid_allow: Sequence[str]) -> None:
        self._token = token or None
        self._networks = parse_networks(getid_allow)

    @property
    def has_token(self) -> bool:
        return self._token is not None

    def token_ok(self, authorization: str | None) -> bool:
        """Whether an ``Authorization`` header carries the configured Bearer token."""
        presented = self.bearer(authorization)
        return presented is not None and self.token_is(presented)

    @staticmethod
    def bearer(authorization: str | None) -> str | None:
        """The token an ``Authorization: Bearer <token>`` header presents (scheme in any
        case), or None: no header, another scheme, no token after it. Only a token presented
        is a guess the failure limit counts (:mod:`.failure_limit`)."""
        if not authorization:
            return None
        scheme, _, value = authorization.partition(" ")
        value = value.strip()
        return value if scheme.lower() == "bearer" and value else None

    def token_is(self, presented: str) -> bool:
        """Whether ``presented`` is the configured token (constant time; False: none)."""
        return self._token is not None and same_token(presented, self._token)

    def peer_allowed(self, peer: str | None) -> bool:
        """Loopback, or inside one of the ``api.getid_allow`` networks (``peer``: the
        client's address as :class:`~.forwarded.TrustedProxies` reads it)."""
        address = parse_address(peer)
        return address is not None and (address.is_loopback
                                        or in_networks(address, self._networks))
