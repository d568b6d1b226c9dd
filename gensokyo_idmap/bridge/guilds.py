"""Where each guild-side chat lives, kept the way the old daemon kept it.

A channel is shown to frameworks as a group (its ``group_id`` is the vUIN of ``raw:<channel
id>``) and a guild DM as a private chat (``user_id``: the vUIN of ``raw:<guild user id>``).
To send there the platform wants the channel id (``/channels/{channel_id}/messages``) or
the DM session's own guild id (``/dms/{guild_id}/messages``), and the guild actions want a
channel's guild. The old Go daemon wrote those facts into its ``config`` bucket, which the
migration copies byte for byte; this module reads and writes the very same entries, so a
chat known before the migration is still known after it:

- ``<channel id>:guild_id`` and ``<channel vUIN>:guild_id`` → the channel's guild id;
- ``<channel vUIN>:type`` → ``guild`` (``forum`` for a forum channel of the old daemon);
- ``<guild user id>:channel_id`` → the channel of that user's DM session, whose
  ``<channel id>:guild_id`` is the session's guild id;
- ``<user vUIN>:type`` → ``guild_private``.

Rules: what an entry already says is not written again (the hot path for a known channel
reads, and only from memory after the first time); entries are only ever set, never
removed; a store without the legacy tables keeps them in memory for the process.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.recent_cache import RecentCache
from gensokyo_idmap.store.base import LegacyTables, LegacyWriter
from gensokyo_idmap.tables import Named

__all__ = ["TYPE_FORUM", "TYPE_GUILD", "TYPE_GUILD_PRIVATE", "ConfigEntry", "GuildDirectory",
           "channel_entries", "directory_of", "dm_entries"]

#: ``<vUIN>:type`` values the old daemon wrote for guild-side chats.
TYPE_GUILD: Final = "guild"
TYPE_GUILD_PRIVATE: Final = "guild_private"
TYPE_FORUM: Final = "forum"
_CHANNEL_TYPES: Final = frozenset({TYPE_GUILD, TYPE_FORUM})
_KEPT: Final = 65_536


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One ``<section>:<key>`` → value of the legacy config table."""

    section: str
    key: str
    value: str

    @property
    def raw_key(self) -> bytes:
        return f"{self.section}:{self.key}".encode()


def channel_entries(channel_id: str, channel_vuin: int, guild_id: str) -> list[ConfigEntry]:
    """What a message in a channel tells (as the old daemon wrote it)."""
    return [ConfigEntry(channel_id, "guild_id", guild_id),
            ConfigEntry(str(channel_vuin), "guild_id", guild_id),
            ConfigEntry(str(channel_vuin), "type", TYPE_GUILD)]


def dm_entries(user_id: str, user_vuin: int, channel_id: str, dm_guild_id: str
               ) -> list[ConfigEntry]:
    """What a direct message tells: the user's DM channel and that session's guild."""
    return [ConfigEntry(user_id, "channel_id", channel_id),
            ConfigEntry(channel_id, "guild_id", dm_guild_id),
            ConfigEntry(str(user_vuin), "type", TYPE_GUILD_PRIVATE)]


class GuildDirectory:
    """The guild-side entries of one identity store's legacy config table."""

    def __init__(self, tables: LegacyTables | None) -> None:
        self.tables = tables
        self._memory: dict[bytes, str] = {}  # the table itself, when the store has none
        self._known: RecentCache[bytes, str] = RecentCache(_KEPT)

    def memory_tables(self) -> list[Named]:
        """Its cache of the table (:mod:`gensokyo_idmap.tables`; the table itself, kept here
        only when the store has none, is a store: not a cache, never forgotten)."""
        return [("guild_directory", self._known)]

    def get(self, section: str, key: str) -> str | None:
        """The value under ``<section>:<key>``, or None."""
        raw = f"{section}:{key}".encode()
        known = self._known.get(raw)
        if known is not None:
            return known
        if self.tables is None:
            return self._memory.get(raw)
        with self.tables.read_legacy() as view:
            stored = view.get_config(raw)
        value = stored.decode("utf-8", "replace") if stored is not None else None
        if value is not None:
            self._known.offer(raw, value)
        return value

    async def record(self, entries: Iterable[ConfigEntry]) -> None:
        """Set each entry that does not already say so (one write for all of them)."""
        changed = [entry for entry in entries
                   if self.get(entry.section, entry.key) != entry.value]
        if not changed:
            return
        if self.tables is None:
            for entry in changed:
                self._memory[entry.raw_key] = entry.value
        else:
            def put(view: LegacyWriter) -> None:
                for entry in changed:
                    view.put_config(entry.raw_key, entry.value.encode())

            await self.tables.write_legacy(put)
        for entry in changed:
            self._known.offer(entry.raw_key, entry.value)

    def chat_type(self, vuin: int) -> str | None:
        """``<vUIN>:type``: ``guild`` / ``forum`` for a channel, ``guild_private`` for a
        guild DM user, ``group`` … for the old daemon's other chats."""
        return self.get(str(vuin), "type")

    def is_channel(self, vuin: int) -> bool:
        return self.chat_type(vuin) in _CHANNEL_TYPES

    def guild_of_channel(self, channel_id: str, channel_vuin: int | None = None) -> str | None:
        """The guild of a channel, by its id or else by its vUIN."""
        found = self.get(channel_id, "guild_id")
        if found is None and channel_vuin is not None:
            found = self.get(str(channel_vuin), "guild_id")
        return found

    def dm_guild_of_user(self, user_id: str) -> str | None:
        """The guild id of the DM session a guild user opened with the bot, if any."""
        channel = self.get(user_id, "channel_id")
        return None if channel is None else self.get(channel, "guild_id")

    def channels_seen(self, limit: int = 10_000) -> list[tuple[int, str]]:
        """(channel vUIN, guild id) of every channel the table knows, for the guild lists
        when the platform cannot be asked."""
        if self.tables is None:
            items: Iterable[tuple[bytes, bytes]] = [
                (k, v.encode()) for k, v in self._memory.items()]
            return _channels(items, limit)
        with self.tables.read_legacy() as view:
            return _channels(view.iter_config(), limit)


def _channels(items: Iterable[tuple[bytes, bytes]], limit: int) -> list[tuple[int, str]]:
    types: dict[str, str] = {}
    guilds: dict[str, str] = {}
    for raw_key, raw_value in items:
        section, _, key = raw_key.decode("utf-8", "replace").rpartition(":")
        if not section.isdigit():
            continue
        if key == "type":
            types[section] = raw_value.decode("utf-8", "replace")
        elif key == "guild_id":
            guilds[section] = raw_value.decode("utf-8", "replace")
    found = [(int(vuin), guilds[vuin]) for vuin, kind in types.items()
             if kind in _CHANNEL_TYPES and vuin in guilds]
    return sorted(found)[:limit]


_DIRECTORIES: weakref.WeakKeyDictionary[IdentityGraph, GuildDirectory] = (
    weakref.WeakKeyDictionary())


def directory_of(graph: IdentityGraph) -> GuildDirectory:
    """The one directory of ``graph``'s store (shared by the inbound bridge and the
    actions, so what one records the other reads from memory)."""
    found = _DIRECTORIES.get(graph)
    if found is None:
        store = graph.store
        found = GuildDirectory(store if isinstance(store, LegacyTables) else None)
        _DIRECTORIES[graph] = found
    return found
