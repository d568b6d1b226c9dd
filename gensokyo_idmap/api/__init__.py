"""The HTTP API: identity bind & lookup (``/v1``), the Go daemon's ``/getid``, ``/healthz``
and ``/metrics``, on one aiohttp listener (``api.listen``)."""

from gensokyo_idmap.api.server import ApiServer

__all__ = ["ApiServer"]
