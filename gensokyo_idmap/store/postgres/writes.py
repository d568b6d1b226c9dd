"""The graph writes of one PostgreSQL transaction, held back and sent as one statement per
table and kind.

A write function of a batch writes a few rows; a statement costs the client ~0.1 ms to
build and send whatever its size, so 64 new identities written row by row (192 statements)
cost more than everything else in their transaction. Held here, they go as ``unnest`` arrays:
at most seven statements for the whole batch.

Each table is a map from a row's key to the last thing done to that row (the value, or
None for a delete). Rows are independent, so sending each row's last state, deletes first,
leaves the tables as the writes one by one would have; and each row occurs once per
statement, which ``INSERT … ON CONFLICT DO UPDATE`` requires. The view sends what is held
before any read of the server (reads see the writes made so far) and before commit.
"""

from __future__ import annotations

from typing import Any, Final, LiteralString

import psycopg

from gensokyo_idmap.store.base import LastSeen

__all__ = ["PendingWrites"]

_SET_VUINS: Final = (
    "INSERT INTO identity_to_vuin (key, vuin) SELECT * FROM unnest(%s::text[], %s::bigint[]) "
    "ON CONFLICT (key) DO UPDATE SET vuin = EXCLUDED.vuin")
_REMOVE_IDENTITIES: Final = (
    "DELETE FROM vuin_to_identity t USING unnest(%s::bigint[], %s::text[]) AS d(vuin, key) "
    "WHERE t.vuin = d.vuin AND t.key = d.key")
_ADD_IDENTITIES: Final = (
    "INSERT INTO vuin_to_identity (vuin, key) SELECT * FROM unnest(%s::bigint[], %s::text[]) "
    "ON CONFLICT DO NOTHING")
_DELETE_LAST_SEEN: Final = (
    "DELETE FROM last_seen t USING unnest(%s::bigint[], %s::text[]) AS d(vuin, scene) "
    "WHERE t.vuin = d.vuin AND t.scene = d.scene")
_SET_LAST_SEEN: Final = (
    "INSERT INTO last_seen (vuin, scene, identity, since) "
    "SELECT * FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::float8[]) "
    "ON CONFLICT (vuin, scene) DO UPDATE "
    "SET identity = EXCLUDED.identity, since = EXCLUDED.since")
_SET_ALIASES: Final = (
    "INSERT INTO vuin_alias (old, new) SELECT * FROM unnest(%s::bigint[], %s::bigint[]) "
    "ON CONFLICT (old) DO UPDATE SET new = EXCLUDED.new")


class PendingWrites:
    """What a transaction wrote to the graph's tables and has not sent yet."""

    __slots__ = ("aliases", "forward", "last_seen", "sets")

    def __init__(self) -> None:
        self.forward: dict[str, int] = {}
        self.sets: dict[tuple[int, str], bool] = {}  # True: add, False: remove
        self.last_seen: dict[tuple[int, str], LastSeen | None] = {}
        self.aliases: dict[int, int] = {}

    def __bool__(self) -> bool:
        return bool(self.forward or self.sets or self.last_seen or self.aliases)

    def send(self, conn: psycopg.Connection[Any], prepare: bool | None) -> None:
        """Send everything held (in pipeline mode: without waiting), then hold nothing."""

        def run(query: LiteralString, *columns: list[Any]) -> None:
            if columns[0]:
                conn.execute(query, columns, prepare=prepare)

        forward, self.forward = self.forward, {}
        sets, self.sets = self.sets, {}
        seen, self.last_seen = self.last_seen, {}
        aliases, self.aliases = self.aliases, {}
        run(_SET_VUINS, list(forward), list(forward.values()))
        removed = [row for row, added in sets.items() if not added]
        run(_REMOVE_IDENTITIES, [v for v, _ in removed], [k for _, k in removed])
        added = [row for row, add in sets.items() if add]
        run(_ADD_IDENTITIES, [v for v, _ in added], [k for _, k in added])
        gone = [row for row, value in seen.items() if value is None]
        run(_DELETE_LAST_SEEN, [v for v, _ in gone], [s for _, s in gone])
        kept = [(row, value) for row, value in seen.items() if value is not None]
        run(_SET_LAST_SEEN, [v for (v, _), _ in kept], [s for (_, s), _ in kept],
            [value.identity for _, value in kept], [value.since for _, value in kept])
        run(_SET_ALIASES, list(aliases), list(aliases.values()))
