"""Where guild-side chats live (bridge/guilds.py): the old daemon's config entries, read and
written on each real identity store (LMDB, PostgreSQL), and in memory for a store without
the legacy tables."""

from __future__ import annotations

from typing import Any

import pytest

from gensokyo_idmap.bridge.guilds import GuildDirectory, channel_entries, dm_entries

from .. import store_backends
from ..conftest import run

# one run per backend
open_store = store_backends.open_store
identity_store = store_backends.identity_store


class CountingTables:
    """The real store's legacy tables, counting the write transactions asked of them."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.writes = 0

    def read_legacy(self) -> Any:
        return self.store.read_legacy()

    def write_legacy(self, fn: Any) -> Any:
        self.writes += 1
        return self.store.write_legacy(fn)


@pytest.mark.parametrize("kept", ["store", "memory"])
def test_entries_are_written_once_and_read_back(identity_store: Any,
                                                kept: str) -> None:
    tables = CountingTables(identity_store)
    guilds = GuildDirectory(tables if kept == "store" else None)
    run(guilds.record(channel_entries("8000000001", 5, "7000000001")
                      + dm_entries("144115218677563300", 6, "8000000099", "7000000099")))
    run(guilds.record(channel_entries("8000000001", 5, "7000000001")))  # nothing new
    assert tables.writes == (1 if kept == "store" else 0)
    assert guilds.guild_of_channel("8000000001") == "7000000001"
    assert guilds.guild_of_channel("unknown", 5) == "7000000001"  # by its vUIN
    assert guilds.is_channel(5) and not guilds.is_channel(6)
    assert guilds.chat_type(6) == "guild_private"
    assert guilds.dm_guild_of_user("144115218677563300") == "7000000099"
    assert guilds.dm_guild_of_user("nobody") is None
    assert guilds.channels_seen() == [(5, "7000000001")]
    # a channel that moved guild is written again
    run(guilds.record(channel_entries("8000000001", 5, "7000000002")))
    assert guilds.guild_of_channel("8000000001") == "7000000002"
    assert tables.writes == (2 if kept == "store" else 0)
    if kept == "store":  # a new directory over the same store reads what was kept
        with identity_store.read_legacy() as view:
            assert view.get_config(b"5:type") == b"guild"
        assert GuildDirectory(identity_store).dm_guild_of_user(
            "144115218677563300") == "7000000099"


def test_channels_seen_reads_the_old_daemons_forum_channels_too(
        identity_store: Any) -> None:
    def put(view: Any) -> None:
        for key, value in ((b"9:type", b"forum"), (b"9:guild_id", b"7000000003"),
                           (b"10:type", b"group"), (b"8000000009:guild_id", b"7000000003"),
                           (b"11:type", b"guild")):  # no guild_id: not listed
            view.put_config(key, value)

    async def write() -> None:
        await identity_store.write_legacy(put)

    run(write())
    assert GuildDirectory(identity_store).channels_seen() == [(9, "7000000003")]
