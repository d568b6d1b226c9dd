"""The outbox on a real outbox.db: kept durably, restored in order after a reopen, forgotten
once written, bounded per sink; and the pipeline using it only for frameworks that are away."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from gensokyo_idmap.bridge import BridgeSettings, InboundBridge, InboundPipeline
from gensokyo_idmap.dedup import DeliveryLog
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.msgid import MsgIdMap
from gensokyo_idmap.onebot.connection import EventQueue
from gensokyo_idmap.outbox import Outbox, TrackedSink
from gensokyo_idmap.qq.events import parse_dispatch, parse_envelope
from gensokyo_idmap.store.lmdb_identity import LmdbIdentityStore
from gensokyo_idmap.store.lmdb_msgid import LmdbMsgIdStore
from gensokyo_idmap.store.lmdb_outbox import LmdbOutboxStore

from .conftest import unencodable

APP = "102000001"


class QueueSink:
    """A tracked sink over a real EventQueue; ``connected`` decides whether it is waited for."""

    def __init__(self, name: str, connected: bool) -> None:
        self.queue = EventQueue(100, name)
        self.name = name
        self.connected = connected

    @property
    def outbox_name(self) -> str:
        return self.name

    def publish(self, event: dict[str, Any]) -> asyncio.Future[bool]:
        return self.queue.publish(event)

    def publish_tracked(self, event: dict[str, Any]) -> tuple[asyncio.Future[bool], bool]:
        return self.queue.publish(event), self.connected

    async def write_all(self) -> list[dict[str, Any]]:
        """What a framework connecting now would get, in order (futures resolved)."""
        out = []
        stop = asyncio.Event()
        stop.set()
        while (taken := await self.queue.next_or_none(stop)) is not None:
            event, written = taken
            written.set_result(True)
            out.append(event)
        await asyncio.sleep(0)  # let done-callbacks run
        return out


def entries(path: Path, sink: str) -> list[int]:
    store = LmdbOutboxStore(path)
    try:
        with store.read() as view:
            return [entry for entry, _ in view.entries(sink)]
    finally:
        store.close()


def test_kept_events_survive_a_reopen_in_order_and_are_forgotten_once_written(
        tmp_path: Path) -> None:
    path = tmp_path / "outbox.db"

    async def first_life() -> None:
        with LmdbOutboxStore(path) as store:
            outbox = Outbox(store)
            ids = await outbox.keep([("a", {"n": 1}, "msg:1"), ("b", {"n": 2}, None),
                                     ("a", {"n": 3}, "msg:3")])
            assert ids == sorted(ids) and len(set(ids)) == 3

    asyncio.run(first_life())
    assert len(entries(path, "a")) == 2 and len(entries(path, "b")) == 1

    async def second_life() -> tuple[list[dict[str, Any]], list[str]]:
        with LmdbOutboxStore(path) as store:
            outbox = Outbox(store)
            sink = QueueSink("a", connected=True)
            assert isinstance(sink, TrackedSink)
            keys = outbox.restore(sink)
            got = await sink.write_all()
            await outbox.settle()
            return got, keys

    got, keys = asyncio.run(second_life())
    assert got == [{"n": 1}, {"n": 3}] and keys == ["msg:1", "msg:3"]
    assert entries(path, "a") == []  # written, so forgotten
    assert len(entries(path, "b")) == 1  # another sink's debt is untouched


def test_an_event_dropped_unwritten_stays_owed(tmp_path: Path) -> None:
    async def main() -> None:
        with LmdbOutboxStore(tmp_path / "outbox.db") as store:
            outbox = Outbox(store)
            [entry] = await outbox.keep([("a", {"n": 1}, None)])
            written: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            outbox.forget_when_written("a", entry, written)
            written.set_result(False)  # the queue overflowed: not written
            await asyncio.sleep(0)
            await outbox.settle()

    asyncio.run(main())
    assert len(entries(tmp_path / "outbox.db", "a")) == 1


def test_a_sink_away_for_long_keeps_only_the_newest(tmp_path: Path) -> None:
    async def main() -> None:
        with LmdbOutboxStore(tmp_path / "outbox.db") as store:
            outbox = Outbox(store, limit_per_sink=3)
            for n in range(5):
                await outbox.keep([("a", {"n": n}, None)])
            assert [event["n"] for _, event, _ in outbox.pending("a")] == [2, 3, 4]

    asyncio.run(main())


def test_an_event_that_cannot_be_encoded_is_dropped_not_failing_the_batch(
        tmp_path: Path) -> None:
    """A poison event (text UTF-8 cannot hold) is not kept, with an error line and a count;
    the events around it are kept as usual, and the sink's queue still moves on."""
    before = unencodable("outbox")

    async def main() -> tuple[list[int | None], list[dict[str, Any]]]:
        with LmdbOutboxStore(tmp_path / "outbox.db") as store:
            outbox = Outbox(store)
            with capture_logs() as logs:
                ids = await outbox.keep([("a", {"n": 1}, None),
                                         ("a", {"post_type": "message", "raw": "\ud83d"}, None),
                                         ("a", {"n": 3}, None)])
            never: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            outbox.forget_when_written("a", ids[1], never)  # nothing kept: nothing to do
            return ids, logs

    ids, logs = asyncio.run(main())
    assert ids[1] is None and ids[0] is not None and ids[2] is not None
    assert len(entries(tmp_path / "outbox.db", "a")) == 2
    assert unencodable("outbox") == before + 1
    [line] = [line for line in logs if line["log_level"] == "error"]
    assert line["event"] == "[onebot] event cannot be encoded: dropped"
    assert (line["sink"], line["kind"], line["post_type"]) == ("a", "outbox", "message")
    assert "\ud83d" not in repr(line)  # the offending text is not logged


def frame(n: int) -> Any:
    raw = {"op": 0, "s": n, "t": "GROUP_AT_MESSAGE_CREATE", "id": f"GROUP_AT_MESSAGE_CREATE:{n}",
           "d": {"id": f"ROBOT1.0_o{n}", "content": f"m{n}",
                 "timestamp": "2025-01-01T12:00:00+08:00",
                 "group_openid": "A" * 32, "author": {"id": "B" * 32, "member_openid": "B" * 32}}}
    return parse_dispatch(parse_envelope(json.dumps(raw).encode()), APP)


def test_pipeline_keeps_only_what_an_away_framework_did_not_get(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, tmp_path: Path) -> None:
    async def main() -> tuple[list[int], list[str], bool]:
        with LmdbOutboxStore(tmp_path / "outbox.db") as store:
            outbox = Outbox(store)
            bridge = InboundBridge(IdentityGraph(identity_store), MsgIdMap(msgid_store),
                                   BridgeSettings(app_id=APP, self_id=int(APP)))
            here, away = QueueSink("here", connected=True), QueueSink("away", connected=False)
            deliveries = DeliveryLog()
            pipeline = InboundPipeline(bridge, [here, away], deliveries, outbox=outbox)
            pipeline.delivery_wait = 5

            async def framework_reads() -> None:
                await asyncio.sleep(0.05)
                await here.write_all()

            await asyncio.gather(pipeline(frame(1)), framework_reads())
            kept_here = entries_in(store, "here")
            kept_away = [json.loads(body)["event"]["message"][-1]["data"]["text"]
                         for _, body in iter_entries(store, "away")]
            restarted = DeliveryLog()
            for key in outbox.restore(QueueSink("away", connected=False)):
                restarted.remember(key)
            repeat = restarted.claim("msg:ROBOT1.0_o1") is not None
            return kept_here, kept_away, repeat

    kept_here, kept_away, repeat = asyncio.run(main())
    assert kept_here == []  # written before the wait ended: nothing to keep
    assert kept_away == ["m1"]  # the away framework is owed it, durably
    assert repeat  # after a restart the platform's replay of it is skipped


def iter_entries(store: LmdbOutboxStore, sink: str) -> list[tuple[int, bytes]]:
    with store.read() as view:
        return list(view.entries(sink))


def entries_in(store: LmdbOutboxStore, sink: str) -> list[int]:
    return [entry for entry, _ in iter_entries(store, sink)]
