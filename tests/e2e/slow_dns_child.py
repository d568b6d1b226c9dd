"""``gensokyo-idmap`` with a name server that never answers for one host, for the stop tests.

Run as ``python tests/e2e/slow_dns_child.py serve --config FILE``: looking up ``slow-dns.invalid``
announces itself on stderr (``slow-dns: resolving``), then blocks for ``SLOW_DNS_SECONDS``
(as a lookup does while the name server is unreachable) and fails; every other name resolves
as usual. The rest is the real command line tool.
"""

from __future__ import annotations

import socket
import sys
import time
from typing import Any

SLOW_HOST = "slow-dns.invalid"
SLOW_DNS_SECONDS = 60.0

_real_getaddrinfo = socket.getaddrinfo


def _getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if host == SLOW_HOST:
        sys.__stderr__.write("slow-dns: resolving\n")
        sys.__stderr__.flush()
        time.sleep(SLOW_DNS_SECONDS)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
    return _real_getaddrinfo(host, *args, **kwargs)


if __name__ == "__main__":
    socket.getaddrinfo = _getaddrinfo
    from gensokyo_idmap.cli import main

    sys.argv[0] = "gensokyo-idmap"
    main()
