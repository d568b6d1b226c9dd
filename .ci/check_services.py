"""Before the tests: PostgreSQL and Redis answer where the tests expect them.

The PostgreSQL and Redis tests need the servers every machine here runs (PostgreSQL 15 at
127.0.0.1:5432, Redis 7 at 127.0.0.1:6379). Without them those tests fail one by one with
connection errors; this says it once, first, and plainly. Plain sockets: the machine has
only Python when this runs.
"""

from __future__ import annotations

import socket
import sys

TIMEOUT = 5.0


def postgres_answers(host: str, port: int) -> str | None:
    """An SSLRequest: a PostgreSQL server answers one byte, S or N."""
    try:
        with socket.create_connection((host, port), TIMEOUT) as sock:
            sock.settimeout(TIMEOUT)
            sock.sendall((8).to_bytes(4, "big") + (80877103).to_bytes(4, "big"))
            reply = sock.recv(1)
    except OSError as err:
        return f"no answer ({err})"
    return None if reply in (b"S", b"N") else f"not PostgreSQL (answered {reply!r})"


def redis_answers(host: str, port: int) -> str | None:
    try:
        with socket.create_connection((host, port), TIMEOUT) as sock:
            sock.settimeout(TIMEOUT)
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            reply = sock.recv(64)
    except OSError as err:
        return f"no answer ({err})"
    return None if reply.startswith(b"+PONG") else f"not a Redis PONG (answered {reply!r})"


def main() -> int:
    problems = [f"{name} at {host}:{port}: {why}"
                for name, check, host, port in (
                    ("PostgreSQL", postgres_answers, "127.0.0.1", 5432),
                    ("Redis", redis_answers, "127.0.0.1", 6379))
                if (why := check(host, port)) is not None]
    for line in problems:
        print(f"ci: {line}; the PostgreSQL and Redis tests need it running", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
