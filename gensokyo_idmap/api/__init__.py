"""The HTTP API: identity bind & lookup (``/v1``), the Go daemon's ``/getid``, ``/healthz``
and ``/metrics``, on one aiohttp listener (``api.listen``).

``ApiServer`` (aiohttp, prometheus_client) loads on first use, so that importing a pure part
such as ``gensokyo_idmap.api.access`` loads neither.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gensokyo_idmap.api.server import ApiServer

__all__ = ["ApiServer"]


def __getattr__(name: str) -> Any:
    """PEP 562: the first ``gensokyo_idmap.api.ApiServer`` imports the server."""
    if name != "ApiServer":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from gensokyo_idmap.api.server import ApiServer

    globals()[name] = ApiServer
    return ApiServer
