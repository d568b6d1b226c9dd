"""Channel data of the old daemon's idmap.db survives the migration: the numbers of
channels, guilds and guild users stay the same (``raw:`` keys), and the ``config`` entries
that say where each channel and DM lives (``<id>:guild_id``, ``<id>:channel_id``,
``<vuin>:type`` = ``guild`` / ``guild_private`` / ``forum``) are read by the daemon, so a
framework that keeps its old numbers reaches the same channels and DMs.

The legacy files are small-counter.db / small-hash.db rewritten by the test bbolt writer
with the entries the old daemon wrote for channel traffic (its ProcessGuildATMessage and
ProcessChannelDirectMessage: ``StoreIDv2`` of the channel and the author, then
``WriteConfigv2``), rows made as each mode made them."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pytest

from gensokyo_idmap.identity import RawId
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore
from gensokyo_idmap.testing.platform_emulator import channel_message, direct_message
from migrate.bbolt import BoltFile
from migrate.legacy import migrate_legacy

from ..bridge.test_outbound import Harness, with_daemon
from ..conftest import FakeClock
from .test_bbolt import Builder
from .test_legacy import APP, FIXTURES, _utf8

CHANNEL, FORUM, GUILD = "8000000001", "8000000002", "7000000001"
AUTHOR, DM_USER = "144115218677563300", "144115218677563302"
DM_CHANNEL, DM_GUILD = "8000000099", "7000000099"
LEGACY_IDS = (CHANNEL, FORUM, GUILD, AUTHOR, DM_USER)


def hash_row(value: str) -> int:
    """The old daemon's hash mode: the first 9 decimal digits of the md5 hex."""
    return int("".join(re.findall(r"[0-9]", hashlib.md5(value.encode()).hexdigest()))[:9])


def legacy_with_channels(tmp_path: Path, name: str) -> tuple[Path, dict[str, int]]:
    content: dict[bytes, Any] = {}
    with BoltFile(FIXTURES / f"{name}.db") as bolt:
        for bucket in bolt.bucket_names():
            content[bucket] = dict(bolt.items((bucket,)))
    ids, config = content[b"ids"], content[b"config"]
    for key in [k for k in ids if not _utf8(k)]:
        del ids[key]  # the fixtures' non-UTF-8 noise (reported elsewhere)
    rows: dict[str, int] = {}
    counter = int.from_bytes(ids.get(b"currentRow", bytes(8)), "big")
    for value in LEGACY_IDS:
        if name.endswith("counter"):
            counter += 1
            rows[value] = counter
        else:
            rows[value] = hash_row(value)
        ids[value.encode()] = rows[value].to_bytes(8, "big")
        ids[f"row-{rows[value]}".encode()] = value.encode()
    if name.endswith("counter"):
        ids[b"currentRow"] = counter.to_bytes(8, "big")
    entries = {
        f"{CHANNEL}:guild_id": GUILD, f"{rows[CHANNEL]}:guild_id": GUILD,
        f"{rows[CHANNEL]}:type": "guild",
        f"{FORUM}:guild_id": GUILD, f"{rows[FORUM]}:guild_id": GUILD,
        f"{rows[FORUM]}:type": "forum",
        f"{DM_USER}:channel_id": DM_CHANNEL, f"{DM_CHANNEL}:guild_id": DM_GUILD,
        f"{rows[DM_USER]}:type": "guild_private"}
    config.update({k.encode(): v.encode() for k, v in entries.items()})
    target = tmp_path / "idmap.db"
    target.write_bytes(bytes(Builder(page_size=4096, per_leaf=40, fanout=16).build(content)))
    return target, rows


@pytest.mark.parametrize("name", ["small-counter", "small-hash"])
def test_channel_numbers_and_places_survive_the_migration(
        tmp_path: Path, name: str, identity_store: LmdbIdentityStore,
        msgid_store: LmdbMsgIdStore, clock: FakeClock) -> None:
    legacy, rows = legacy_with_channels(tmp_path, name)
    report = migrate_legacy(legacy, identity_store, msgid_store, APP)
    assert not [e for e in report.dropped if e.key in LEGACY_IDS], report.dropped
    with identity_store.read() as view:
        for value, row in rows.items():
            assert view.vuin_of(RawId(value).key) == row, value  # the same numbers
        counter = view.vuin_counter()
    with identity_store.read_legacy() as view:
        assert view.get_config(f"{rows[CHANNEL]}:type".encode()) == b"guild"

    async def scenario(h: Harness) -> None:
        # a message in the migrated channel, by the migrated author: the old numbers
        event = await h.inbound("AT_MESSAGE_CREATE", channel_message(1, channel=CHANNEL,
                                                                     user=AUTHOR))
        assert (event["group_id"], event["user_id"]) == (rows[CHANNEL], rows[AUTHOR])
        reply = await h.call("send_group_msg", group_id=rows[CHANNEL], message="pong")
        assert reply["retcode"] == 0, reply
        # the forum channel and the DM user were only ever seen by the old daemon: their
        # places come from the migrated config entries
        forum = await h.call("send_group_msg", group_id=rows[FORUM], message="to the forum")
        dm = await h.call("send_private_msg", user_id=rows[DM_USER], message="hello again")
        assert forum["retcode"] == 0 and dm["retcode"] == 0, (forum, dm)
        paths = [path for path, _ in h.sends()]
        assert paths == [f"/channels/{CHANNEL}/messages", f"/channels/{FORUM}/messages",
                         f"/dms/{DM_GUILD}/messages"]
        # a DM in a new session moves the user's DM there, under the same number
        event = await h.inbound("DIRECT_MESSAGE_CREATE", direct_message(
            2, user=DM_USER, dm_guild="7000000100", dm_channel="8000000100"))
        assert event["user_id"] == rows[DM_USER]
        await h.call("send_private_msg", user_id=rows[DM_USER], message="here")
        assert h.sends()[-1][0] == "/dms/7000000100/messages"

    with_daemon(scenario, identity_store, msgid_store, clock)
    with identity_store.read() as view:
        assert view.vuin_counter() == counter  # nobody new: every number was the old one
