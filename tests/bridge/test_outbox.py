"""The outbox on a real outbox.db: kept durably, restored in publish order after a reopen,
forgotten once confirmed, bounded per sink; a full queue spills into it and is refilled from
it in order; and the pipeline using it only for what a framework did not confirm."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from gensokyo_idmap.bridge.inbound import BridgeSettings, InboundBridge, InboundPipeline
from gensokyo_idmap.runtime.claims import DeliveryLog
from gensokyo_idmap.idmap import IdentityGraph
from gensokyo_idmap.runtime.msgid import MsgIdMap
from gensokyo_idmap.onebot.event_queue import EventQueue
from gensokyo_idmap.bridge.outbox import Backlog, Outbox, Tracked, TrackedSink
from gensokyo_idmap.qq.events import parse_dispatch, parse_envelope
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from gensokyo_idmap.runtime.lmdb import LmdbMsgIdStore
from gensokyo_idmap.store.lmdb.outbox import LmdbOutboxStore

from ..conftest import unencodable

APP = "102000001"


class QueueSink:
    """A tracked sink over a real EventQueue and Backlog; ``connected`` decides whether its
    confirmations are waited for; :meth:`confirm_all` plays a framework taking everything."""

    def __init__(self, outbox: Outbox, name: str, connected: bool, size: int = 100) -> None:
        self.queue = EventQueue(size, name)
        self.backlog: Backlog | None = Backlog(outbox, name, self.queue)
        self.name = name
        self.connected = connected

    @property
    def outbox_name(self) -> str:
        return self.name

    def publish(self, event: dict[str, Any]) -> asyncio.Future[bool]:
        return self.queue.publish(event)

    def publish_tracked(self, event: dict[str, Any], key: str | None) -> Tracked:
        assert self.backlog is not None
        return self.backlog.publish(event, key, self.connected)

    async def confirm_some(self, most: int) -> list[dict[str, Any]]:
        """Send and confirm up to ``most`` events, in order (as HTTP POST 2xx answers)."""
        out = []
        while len(out) < most and (event := self.queue.take()) is not None:
            self.queue.settle(True)
            out.append(event)
        await asyncio.sleep(0)  # let done-callbacks run
        return out

    async def confirm_all(self, rounds: int = 1000) -> list[dict[str, Any]]:
        """Everything, refills included, until nothing more comes (bounded)."""
        out: list[dict[str, Any]] = []
        for _ in range(rounds):
            got = await self.confirm_some(10**9)
            out += got
            await asyncio.sleep(0.01)  # the backlog's task reads back what waits
            if not got and not len(self.queue) and not (self.backlog and self.backlog.spilling):
                break
        return out


def entries(path: Path, sink: str) -> list[int]:
    store = LmdbOutboxStore(path)
    try:
        with store.read() as view:
            return [entry for entry, _ in view.entries(sink)]
    finally:
        store.close()


def test_kept_events_survive_a_reopen_in_publish_order_and_are_forgotten_once_confirmed(
        tmp_path: Path) -> None:
    path = tmp_path / "outbox.db"

    async def first_life() -> None:
        with LmdbOutboxStore(path) as store:
            outbox = Outbox(store)
            first, second, third = outbox.allocate(), outbox.allocate(), outbox.allocate()
            # later published, written first (batches commit in any order): order holds
            await outbox.keep([("a", third, {"n": 3}, "msg:3"), ("b", second, {"n": 2}, None)])
            await outbox.keep([("a", first, {"n": 1}, "msg:1")])

    asyncio.run(first_life())
    assert len(entries(path, "a")) == 2 and len(entries(path, "b")) == 1

    async def second_life() -> tuple[list[dict[str, Any]], list[str], int]:
        with LmdbOutboxStore(path) as store:
            outbox = Outbox(store)
            sink = QueueSink(outbox, "a", connected=True)
            assert isinstance(sink, TrackedSink)
            assert sink.backlog is not None
            keys = sink.backlog.restore()
            sink.backlog.start()
            got = await sink.confirm_all()
            await sink.backlog.close()
            await outbox.settle()
            return got, keys, outbox.allocate()

    got, keys, next_id = asyncio.run(second_life())
    assert got == [{"n": 1}, {"n": 3}] and keys == ["msg:1", "msg:3"]
    assert next_id == 4  # ids are never handed out twice, across a restart too
    assert entries(path, "a") == []  # confirmed, so forgotten
    assert len(entries(path, "b")) == 1  # another sink's debt is untouched


def test_an_event_dropped_unconfirmed_stays_owed(tmp_path: Path) -> None:
    async def main() -> None:
        with LmdbOutboxStore(tmp_path / "outbox.db") as store:
            outbox = Outbox(store)
            entry = outbox.allocate()
            await outbox.keep([("a", entry, {"n": 1}, None)])
            written: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            outbox.forget_when_written("a", entry, written)
            written.set_result(False)  # the connection closed for good: not confirmed
            await asyncio.sleep(0)
            await outbox.settle()

    asyncio.run(main())
    assert len(entries(tmp_path / "outbox.db", "a")) == 1


def test_a_sink_away_for_long_keeps_only_the_newest(tmp_path: Path) -> None:
    async def main() -> None:
        with LmdbOutboxStore(tmp_path / "outbox.db") as store:
            outbox = Outbox(store, limit_per_sink=3)
            for n in range(5):
                await outbox.keep([("a", outbox.allocate(), {"n": n}, None)])
            assert [event["n"] for _, event in outbox.read_after("a", 0, 10)] == [2, 3, 4]

    asyncio.run(main())


def test_an_event_that_cannot_be_encoded_is_dropped_not_failing_the_batch(
        tmp_path: Path) -> None:
    """A poison event (text UTF-8 cannot hold) is not kept, with an error line and a count;
    the events around it are kept as usual, and the sink's queue still moves on."""
    before = unencodable("outbox")

    async def main() -> tuple[list[int], list[dict[str, Any]]]:
        with LmdbOutboxStore(tmp_path / "outbox.db") as store:
            outbox = Outbox(store)
            ids = [outbox.allocate() for _ in range(3)]
            with capture_logs() as logs:
                await outbox.keep([("a", ids[0], {"n": 1}, None),
                                   ("a", ids[1], {"post_type": "message", "raw": "\ud83d"},
                                    None),
                                   ("a", ids[2], {"n": 3}, None)])
            return ids, logs

    ids, logs = asyncio.run(main())
    assert entries(tmp_path / "outbox.db", "a") == [ids[0], ids[2]]
    assert unencodable("outbox") == before + 1
    [line] = [line for line in logs if line["log_level"] == "error"]
    assert line["event"] == "[onebot] event cannot be encoded: dropped"
    assert (line["sink"], line["kind"], line["post_type"]) == ("a", "outbox", "message")
    assert "\ud83d" not in repr(line)  # the offending text is not logged


def test_a_full_queue_spills_into_the_outbox_and_is_refilled_in_order(tmp_path: Path) -> None:
    """Queue of 10, 95 events published while the framework takes nothing: memory never
    holds more than 10, the rest wait in outbox.db (each durable before its future is True,
    and with it the 10 in memory ahead of them), and as the framework confirms, the backlog
    comes back in publish order, interleaved with nothing newer; once it is empty, new
    events go straight to memory again."""
    path = tmp_path / "outbox.db"

    async def main() -> tuple[list[int], list[int], int, bool, list[int]]:
        with LmdbOutboxStore(path) as store:
            outbox = Outbox(store)
            sink = QueueSink(outbox, "a", connected=True, size=10)
            assert sink.backlog is not None
            sink.backlog.start()
            tracked = [sink.publish_tracked({"n": n}, f"k{n}") for n in range(95)]
            spilled = [future for future, _, entry in tracked if entry == 0]
            assert len(spilled) == 85 and len(sink.queue) == 10
            assert all(await asyncio.gather(*spilled))  # durable
            on_disk = len(entries_in(store, "a"))
            got: list[int] = []
            largest = 0
            for _ in range(500):
                got += [e["n"] for e in await sink.confirm_some(3)]
                largest = max(largest, len(sink.queue))
                # newer events keep coming while the backlog is read back
                if len(got) == 30:
                    sink.publish_tracked({"n": 95}, "k95")
                await asyncio.sleep(0.005)
                if not sink.backlog.spilling and not len(sink.queue):
                    break
            still_spilling = sink.backlog.spilling
            sink.publish_tracked({"n": 96}, "k96")  # memory again: nothing waits on disk
            _, _, entry = sink.publish_tracked({"n": 97}, "k97")
            got += [e["n"] for e in await sink.confirm_some(10)]
            await sink.backlog.close()
            await outbox.settle()
            return got, [on_disk], largest, still_spilling, [entry]

    got, (on_disk,), largest, still_spilling, (entry,) = asyncio.run(main())
    assert on_disk == 95  # 85 spilled, and the 10 unconfirmed ones published before them
    assert got == list(range(98))
    assert largest <= 10 and not still_spilling and entry > 0
    assert entries(path, "a") == []


def test_keeping_an_event_keeps_every_unconfirmed_one_published_before_it(
        tmp_path: Path) -> None:
    """Two batches of one chat, the first still waiting for its framework when the second is
    kept: keeping the second writes the first too (in the same commit), so after a crash the
    outbox gives both back in order, and the platform's replay of the first can never come
    after the second. Confirmed events are not written; a confirmed one is forgotten."""
    path = tmp_path / "outbox.db"

    async def main() -> tuple[list[int], list[int]]:
        with LmdbOutboxStore(path) as store:
            outbox = Outbox(store)
            sink = QueueSink(outbox, "a", connected=True)
            assert sink.backlog is not None
            sink.backlog.start()
            done = sink.publish_tracked({"n": 0}, "k0")
            await sink.confirm_some(1)  # the framework confirmed the first one
            first = [sink.publish_tracked({"n": n}, f"k{n}") for n in (1, 2)]
            second = [sink.publish_tracked({"n": n}, f"k{n}") for n in (3, 4)]
            await sink.backlog.keep_through(second[-1][2])
            kept = [json.loads(body)["event"]["n"] for _, body in iter_entries(store, "a")]
            await sink.backlog.keep_through(first[-1][2])  # nothing left to write
            assert done[0].result() is True
            await sink.confirm_some(1)  # n=1 confirmed: its entry goes
            await asyncio.sleep(0.05)
            await outbox.settle()
            left = [json.loads(body)["event"]["n"] for _, body in iter_entries(store, "a")]
            await sink.backlog.close()
            return kept, left

    kept, left = asyncio.run(main())
    assert kept == [1, 2, 3, 4]
    assert left == [2, 3, 4]


def frame(n: int) -> Any:
    raw = {"op": 0, "s": n, "t": "GROUP_AT_MESSAGE_CREATE", "id": f"GROUP_AT_MESSAGE_CREATE:{n}",
           "d": {"id": f"ROBOT1.0_o{n}", "content": f"m{n}",
                 "timestamp": "2025-01-01T12:00:00+08:00",
                 "group_openid": "A" * 32, "author": {"id": "B" * 32, "member_openid": "B" * 32}}}
    return parse_dispatch(parse_envelope(json.dumps(raw).encode()), APP)


def test_pipeline_keeps_only_what_an_away_framework_did_not_confirm(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, tmp_path: Path) -> None:
    async def main() -> tuple[list[int], list[str], bool]:
        with LmdbOutboxStore(tmp_path / "outbox.db") as store:
            outbox = Outbox(store)
            bridge = InboundBridge(IdentityGraph(identity_store), MsgIdMap(msgid_store),
                                   BridgeSettings(app_id=APP, self_id=int(APP)))
            here = QueueSink(outbox, "here", connected=True)
            away = QueueSink(outbox, "away", connected=False)
            deliveries = DeliveryLog()
            pipeline = InboundPipeline(bridge, [here, away], deliveries)
            pipeline.delivery_wait = 5

            async def framework_confirms() -> None:
                await asyncio.sleep(0.05)
                await here.confirm_some(10)

            await asyncio.gather(pipeline(frame(1)), framework_confirms())
            kept_here = entries_in(store, "here")
            kept_away = [json.loads(body)["event"]["message"][-1]["data"]["text"]
                         for _, body in iter_entries(store, "away")]
            restarted = DeliveryLog()
            restored = QueueSink(Outbox(store), "away", connected=False)
            assert restored.backlog is not None
            for key in restored.backlog.restore():
                restarted.remember(key)
            repeat = await restarted.claim("msg:ROBOT1.0_o1") is not None
            return kept_here, kept_away, repeat

    kept_here, kept_away, repeat = asyncio.run(main())
    assert kept_here == []  # confirmed before the wait ended: nothing to keep
    assert kept_away == ["m1"]  # the away framework is owed it, durably
    assert repeat  # after a restart the platform's replay of it is skipped


def iter_entries(store: LmdbOutboxStore, sink: str) -> list[tuple[int, bytes]]:
    with store.read() as view:
        return list(view.entries(sink))


def entries_in(store: LmdbOutboxStore, sink: str) -> list[int]:
    return [entry for entry, _ in iter_entries(store, sink)]


def test_pipeline_acknowledges_spilled_events_once_they_are_durable(
        identity_store: LmdbIdentityStore, msgid_store: LmdbMsgIdStore, tmp_path: Path) -> None:
    """A framework away with a queue of 2: of 6 events, 2 wait in memory and 4 spill; each
    delivery returns (the source may acknowledge) only once its events are in outbox.db,
    and a restart gives all 6 back in order."""
    path = tmp_path / "outbox.db"

    async def main() -> list[tuple[str, list[int]]]:
        with LmdbOutboxStore(path) as store:
            outbox = Outbox(store)
            bridge = InboundBridge(IdentityGraph(identity_store), MsgIdMap(msgid_store),
                                   BridgeSettings(app_id=APP, self_id=int(APP)))
            away = QueueSink(outbox, "away", connected=False, size=2)
            pipeline = InboundPipeline(bridge, [away])
            on_disk = []
            for n in range(1, 7):
                await pipeline(frame(n))
                on_disk.append(len(entries_in(store, "away")))
            assert away.backlog is not None and away.backlog.spilled == 4
            await away.backlog.close()
            texts = [json.loads(body)["event"]["message"][-1]["data"]["text"]
                     for _, body in iter_entries(store, "away")]
            return [(" ".join(texts), on_disk)]

    [(texts, on_disk)] = asyncio.run(main())
    assert on_disk == [1, 2, 3, 4, 5, 6]  # durable before the delivery returned
    assert texts == "m1 m2 m3 m4 m5 m6"


def test_dropping_a_backlog_drops_what_was_not_sent_and_keeps_what_is_in_flight(
        tmp_path: Path) -> None:
    """Queue of 10, 50 events while the framework takes 3 and confirms none: the 7 waiting
    and the 40 spilled (and their entries) go, the 3 in flight stay with theirs; every
    future is settled (the platform is acknowledged), and what comes next goes to memory
    and is sent after the 3."""
    path = tmp_path / "outbox.db"

    async def main() -> tuple[int, list[int], list[int], list[int], bool]:
        with LmdbOutboxStore(path) as store:
            outbox = Outbox(store)
            sink = QueueSink(outbox, "a", connected=True, size=10)
            assert sink.backlog is not None
            sink.backlog.start()
            tracked = [sink.publish_tracked({"n": n}, f"k{n}") for n in range(50)]
            await asyncio.gather(*(future for future, _, entry in tracked if entry == 0))
            await sink.backlog.keep_through(max(entry for _, _, entry in tracked))
            taken = [sink.queue.take() for _ in range(3)]  # on the wire, not confirmed
            assert [e["n"] for e in taken if e] == [0, 1, 2]
            dropped = await sink.backlog.drop()
            await asyncio.sleep(0.01)  # the entries of dropped queued events are forgotten
            await outbox.settle()
            left = entries_in(store, "a")
            settled = all(future.done() for future, _, _ in tracked[3:])
            sink.publish_tracked({"n": 50}, "k50")
            for _ in range(3):
                sink.queue.settle(True)  # the three on the wire are confirmed
            got = [e["n"] for e in await sink.confirm_some(10)]
            await sink.backlog.close()
            await outbox.settle()
            return dropped, left, got, entries_in(store, "a"), settled

    dropped, left, got, finally_left, settled = asyncio.run(main())
    assert dropped == 47 and settled
    assert len(left) == 3  # the entries of the three in flight
    assert got == [50] and finally_left == []
