"""Child process for tests/crash/test_durability.py: resolve new OpenIDs and report them.

    python tests/crash/durability_child.py DBPATH START COUNT [--app-id ID] [--prefix P]
                                     [--batch N] [--no-scene]
                                     [--ready-file R --go-file G]
                                     [--postgres-dsn URL --schema NAME]

For i in START .. START+COUNT-1 it resolves ``--batch`` new OpenIDs concurrently
(``asyncio.gather``), each OpenID derived from the prefix, i and its place in the batch. As
soon as one ``await graph.resolve(...)`` returns, it writes one line ``<key> <vuin>`` to
stdout with a single ``os.write`` (no buffering, so nothing is printed that the process
could still lose, and nothing resolved stays unprinted in a buffer).

A printed line is a promise (DESIGN §3.4): that vUIN was shown downstream, so the store
must hold exactly that mapping whatever happens to this process afterwards (``kill -9``).

The prefix defaults to one unique per run (pid + random), so every run's keys are new; a
fixed ``--prefix`` lets two processes resolve the same keys. With ``--ready-file`` and
``--go-file`` it creates R once the store is open, then waits for G before resolving
anything, so that a parent can make two children really run at the same time. With
``--postgres-dsn`` the graph is the PostgreSQL one in ``--schema`` (DBPATH is ignored). Logs go to stderr (warnings and
up only); stdout carries nothing but ``key vuin`` lines.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import secrets
import sys
import time
from pathlib import Path

import structlog

from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db")
    parser.add_argument("start", type=int)
    parser.add_argument("count", type=int)
    parser.add_argument("--app-id", default="102000001")
    parser.add_argument("--prefix", default=None, help="OpenID prefix ([A-Za-z0-9_-])")
    parser.add_argument("--batch", type=int, default=16, help="resolves in flight at once")
    parser.add_argument("--no-scene", action="store_true", help="resolve without a scene")
    parser.add_argument("--ready-file", default=None, help="create this once the store is open")
    parser.add_argument("--go-file", default=None, help="wait for this file before starting")
    parser.add_argument("--go-timeout", type=float, default=60.0)
    parser.add_argument("--postgres-dsn", default=None, help="use PostgreSQL, not DBPATH")
    parser.add_argument("--schema", default=None, help="the PostgreSQL schema of the graph")
    return parser.parse_args(argv)


def _emit(key: str, vuin: int) -> None:
    data = f"{key} {vuin}\n".encode()
    while data:  # a pipe write of < PIPE_BUF bytes is atomic; loop only for safety
        written = os.write(1, data)
        data = data[written:]


async def _run(args: argparse.Namespace) -> int:
    prefix = args.prefix or f"P{os.getpid()}x{secrets.token_hex(4)}"
    if args.postgres_dsn:
        from gensokyo_idmap.store.postgres.identity import PgIdentityStore

        store: LmdbIdentityStore | PgIdentityStore = PgIdentityStore(
            args.postgres_dsn, schema=args.schema)
    else:
        store = LmdbIdentityStore(args.db)
    try:
        graph = IdentityGraph(store)
        if args.ready_file:
            Path(args.ready_file).touch()
        if args.go_file:
            deadline = time.monotonic() + args.go_timeout
            while not os.path.exists(args.go_file):
                if time.monotonic() > deadline:
                    print(f"no {args.go_file} after {args.go_timeout} s", file=sys.stderr)
                    return 3
                await asyncio.sleep(0.002)

        async def one(i: int, j: int) -> None:
            key = OpenId(args.app_id, f"{prefix}-{i}-{j}")
            scene = None if args.no_scene else f"QQ:{args.app_id}:group:G{prefix}-{i}"
            resolution = await graph.resolve([key], scene=scene)
            # Only now, after the await returned (the commit is durable), may it be shown.
            _emit(key.key, resolution.vuin)

        for i in range(args.start, args.start + args.count):
            await asyncio.gather(*(one(i, j) for j in range(args.batch)))
    finally:
        store.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    structlog.configure(
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
    )
    return asyncio.run(_run(args))


if __name__ == "__main__":
    sys.exit(main())
