"""What ``/healthz`` tells, found without writing anything.

A health check that commits a write on every call costs an fsync per probe and, on a full
disk, is itself one more write that fails. So the answer is put together from what is known
already: the stores remember why their last write failed, or that their map could not grow,
until a write goes through again (``LmdbEnv.health``); a short read transaction shows each
store can still be read; and the free space of each data dir (``statvfs``) shows a disk that
is full, or nearly so, before a write finds out.

A store on a server (the graph on PostgreSQL, the runtime state on Redis) is asked instead:
``select 1``, ``PING``, all at once, each within :data:`SERVER_TIMEOUT_SECONDS`, on the
event loop without blocking it (:func:`server_problems`). A server that hangs is then a
503 naming it after that long, not a probe that hangs with it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Final, Protocol

__all__ = [
    "MIN_FREE_BYTES",
    "SERVER_TIMEOUT_SECONDS",
    "HealthSource",
    "ServerCheck",
    "disk_problem",
    "known_healthy",
    "low_space",
    "problems",
    "server_answers",
    "server_problems",
    "store_problems",
]

#: Less free space than this in a data dir is reported as a full disk: a group commit of a
#: busy minute, or a map growth, would not fit.
MIN_FREE_BYTES: Final = 16 * 1024 * 1024
#: How long ``/healthz`` waits for a server's answer: a local PostgreSQL or Redis answers in
#: a millisecond; a load balancer's probe gives up after a few seconds.
SERVER_TIMEOUT_SECONDS: Final = 1.0


class HealthSource(Protocol):
    """A store as the health check sees it."""

    def health(self) -> str | None:
        """Why the store cannot take writes now (its last write failed, its map cannot
        grow), or None; found without reading or writing the file."""
    def read(self) -> AbstractContextManager[Any]: ...


class ServerCheck(Protocol):
    """A server a store lives on, as the health check asks it."""

    @property
    def server(self) -> str:
        """What ``/healthz`` calls it (``postgresql at …``, ``redis at …``; no password)."""
    async def ping(self) -> None:
        """Return once the server answered a trivial read; raise if it cannot."""


def low_space(free_bytes: int, minimum: int = MIN_FREE_BYTES) -> bool:
    return free_bytes < minimum


def disk_problem(data_dir: Path, minimum: int = MIN_FREE_BYTES,
                 statvfs: Callable[[Path], os.statvfs_result] = os.statvfs) -> str | None:
    """"disk full …" when ``data_dir`` has less than ``minimum`` bytes free (for us)."""
    try:
        stats = statvfs(data_dir)
    except OSError as exc:
        return f"cannot see the free space of {data_dir}: {exc.strerror}"
    free = stats.f_bavail * stats.f_frsize
    if low_space(free, minimum):
        return f"disk full: {free} bytes free in {data_dir} (below {minimum})"
    return None


def known_healthy(stores: Iterable[HealthSource]) -> bool:
    """Whether none of ``stores`` knows of a reason it cannot take writes now (its last
    write failed, its map cannot grow, its server was unreachable when last used, it is
    not open yet): the part of ``/healthz`` that asks nothing of a file or a server, cheap
    enough for every OneBot heartbeat. What the reads, the free space and the pings would
    find shows here once a write or a use fails."""
    return all(store.health() is None for store in stores)


def _unreadable(store: HealthSource) -> str | None:
    try:
        with store.read():
            return None
    except Exception as exc:  # noqa: BLE001 - whatever it is, the store cannot be read
        reason = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        return f"cannot be read: {reason}"


def store_problems(stores: Iterable[tuple[Path, HealthSource]]) -> list[str]:
    """Why each store (given with its file) cannot take writes or be read, each named."""
    found: list[str] = []
    for path, store in stores:
        for problem in (store.health(), _unreadable(store)):
            if problem is not None:
                found.append(f"{path.name}: {problem}")
    return found


def problems(stores: Iterable[tuple[Path, HealthSource]],
             minimum: int = MIN_FREE_BYTES) -> list[str]:
    """Every reason the daemon cannot take events now, each naming its store (given with
    its file) or data dir."""
    stores = list(stores)
    found = store_problems(stores)
    dirs: list[Path] = []
    for path, _ in stores:
        if path.parent not in dirs:
            dirs.append(path.parent)
    for data_dir in dirs:
        full = disk_problem(data_dir, minimum)
        if full is not None:
            found.append(full)
    return found


async def _server_problem(check: ServerCheck, timeout: float) -> str | None:
    try:
        async with asyncio.timeout(timeout):
            await check.ping()
    except TimeoutError:
        return f"{check.server}: no answer within {timeout:g} s"
    except Exception as exc:  # noqa: BLE001 - whatever it is, the server cannot serve
        reason = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        return f"{check.server}: {reason}"
    return None


async def server_answers(checks: Iterable[ServerCheck],
                         timeout: float = SERVER_TIMEOUT_SECONDS) -> list[str | None]:
    """For each server of ``checks`` (asked all at once), in order: None when it answered
    within ``timeout``, else why not (named)."""
    return list(await asyncio.gather(*(_server_problem(check, timeout) for check in checks)))


async def server_problems(checks: Iterable[ServerCheck],
                          timeout: float = SERVER_TIMEOUT_SECONDS) -> list[str]:
    """Every server of ``checks`` that did not answer within ``timeout`` (asked all at
    once), each named."""
    return [problem for problem in await server_answers(checks, timeout) if problem is not None]
