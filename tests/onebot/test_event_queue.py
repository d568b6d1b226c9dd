"""EventQueue without a socket: a future turns True only once a pong confirms its event; a
connection that ends puts what it had in flight back at the front; the window bounds what is
in flight; an unencodable event is dropped from its queue alone."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from gensokyo_idmap.onebot.event_queue import PINGS_UNANSWERED, EventQueue


def resolved(futures: list[asyncio.Future[bool]]) -> list[bool | None]:
    return [f.result() if f.done() else None for f in futures]


def test_written_is_not_confirmed_until_the_pong_of_a_later_ping() -> None:
    async def main() -> None:
        queue = EventQueue(10, "q")
        futures = [queue.publish({"n": n}) for n in range(3)]
        assert queue.take() == {"n": 0} and queue.take() == {"n": 1}
        queue.written()
        assert resolved(futures) == [None, None, None]  # on the wire is not delivered
        first = queue.ping(0.0)
        assert queue.take() == {"n": 2}
        second = queue.ping(0.0)
        assert first is not None and second is not None and second > first
        assert queue.ping(0.0) is None  # nothing sent since: no ping needed
        queue.pong(b"%d" % first)
        assert resolved(futures) == [True, True, None]
        queue.pong(b"junk")  # not one of ours: ignored
        queue.pong(b"%d" % (second + 5))  # never sent: ignored
        assert resolved(futures) == [True, True, None]
        queue.pong(b"%d" % second)
        assert resolved(futures) == [True, True, True] and len(queue) == 0

    asyncio.run(main())


def test_a_later_pong_confirms_the_earlier_pings_too() -> None:
    async def main() -> None:
        queue = EventQueue(10, "q")
        futures = [queue.publish({"n": n}) for n in range(2)]
        queue.take()
        queue.ping(0.0)
        queue.take()
        last = queue.ping(0.0)
        queue.pong(b"%d" % last)  # the peer answered only the newest ping
        assert resolved(futures) == [True, True] and queue.oldest_ping() is None

    asyncio.run(main())


def test_pings_wait_while_two_are_unanswered_and_a_pong_wakes_the_sender() -> None:
    """Events written while PINGS_UNANSWERED pings are unanswered wait for the next ping,
    which the sender is woken to send once a pong is back (a sender waiting for events
    would otherwise never ping for them)."""
    assert PINGS_UNANSWERED == 2

    async def main() -> None:
        queue = EventQueue(10, "q")
        futures = [queue.publish({"n": n}) for n in range(3)]
        pings = []
        for _ in range(2):
            queue.take()
            pings.append(queue.ping(0.0))
        assert None not in pings
        queue.take()
        assert queue.ping(0.0) is None and not queue.ping_due()  # n=2 waits
        sender = asyncio.create_task(queue.wait_sendable())
        await asyncio.sleep(0)
        assert not sender.done()  # nothing to send, no ping due
        queue.pong(b"%d" % pings[0])
        assert resolved(futures) == [True, None, None]
        await asyncio.wait_for(sender, 1)
        assert queue.ping_due()
        last = queue.ping(0.0)
        assert last is not None and not queue.ping_due()
        queue.pong(b"%d" % last)
        assert resolved(futures) == [True, True, True] and not queue.ping_due()

    asyncio.run(main())


def test_a_connection_that_ends_puts_its_in_flight_events_back_in_front_in_order() -> None:
    async def main() -> None:
        queue = EventQueue(10, "q")
        futures = [queue.publish({"n": n}) for n in range(4)]
        for _ in range(3):
            queue.take()
        queue.pong(b"%d" % queue.ping(0.0))  # 0..2 confirmed
        queue.take()
        queue.ping(1.0)
        queue.publish({"n": 4})
        queue.requeue()  # the socket closed before the pong
        assert queue.pending() == [{"n": 3}, {"n": 4}]
        assert resolved(futures) == [True, True, True, None]
        assert queue.oldest_ping() is None  # the old connection's pings are forgotten

    asyncio.run(main())


def test_the_window_bounds_what_is_in_flight() -> None:
    async def main() -> None:
        queue = EventQueue(10, "q", window=2)
        for n in range(5):
            queue.publish({"n": n})
        assert queue.take() is not None and queue.take() is not None
        assert queue.take() is None and not queue.ready()
        queue.pong(b"%d" % queue.ping(0.0))
        assert queue.ready() and queue.take() == {"n": 2}

    asyncio.run(main())


def test_publishing_to_a_full_window_wakes_no_sender() -> None:
    """With the window full only a confirmation makes an event sendable: a publish then
    leaves the sender asleep (a peer that stopped reading would cost a wake-up per event)."""

    async def main() -> None:
        queue = EventQueue(10, "q", window=1)
        queue.publish({"n": 0})
        assert queue.take() == {"n": 0}
        queue._wakeup.clear()  # the sender went to sleep: nothing sendable
        queue.publish({"n": 1})
        assert not queue.ready() and not queue._wakeup.is_set()
        number = queue.ping(0.0)
        assert number is not None
        queue.pong(b"%d" % number)
        assert queue.ready() and queue._wakeup.is_set()

    asyncio.run(main())


def test_lagging_once_a_ping_is_unanswered_past_the_grace() -> None:
    async def main() -> None:
        queue = EventQueue(10, "q")
        queue.publish({"n": 0})
        queue.take()
        number = queue.ping(100.0)
        assert not queue.lagging(100.5) and queue.lagging(101.5)
        queue.pong(b"%d" % number)
        assert not queue.lagging(200.0)

    asyncio.run(main())


def test_an_unencodable_event_is_dropped_from_its_queue_with_an_error_and_a_count() -> None:
    async def main() -> None:
        queue = EventQueue(10, "framework")
        poison = queue.publish({"post_type": "message", "raw_message": "\ud83d"})
        fine = queue.publish({"post_type": "message", "raw_message": "ok"})
        with capture_logs() as logs:
            event = queue.take()
            assert event is not None and queue.encoded(event) is None
        event = queue.take()
        assert event is not None and queue.encoded(event) == (
            b'{"post_type":"message","raw_message":"ok"}')
        queue.pong(b"%d" % queue.ping(0.0))
        # nothing is owed for an event nobody can be given: its outbox entry may go
        assert poison.result() is True and fine.result() is True
        assert queue.unsendable_events == 1
        [line] = [e for e in logs if e["log_level"] == "error"]
        assert line["event"] == "[onebot] event cannot be encoded: dropped"
        assert (line["sink"], line["kind"]) == ("framework", "reverse_ws")

    asyncio.run(main())


def test_the_bench_switch_confirms_on_write_and_pings_nothing() -> None:
    async def main() -> None:
        queue = EventQueue(10, "q", confirm_on_write=True)
        future = queue.publish({"n": 0})
        assert queue.take() == {"n": 0}
        assert queue.oldest_ping() is None  # nothing awaited: no watchdog, no lag
        assert not queue.written() and future.result() is True
        assert queue.ping(0.0) is None and queue.ping(0.0, probe=True) is None

    asyncio.run(main())


def test_a_peer_that_never_answered_or_lags_is_not_confirming() -> None:
    async def main() -> None:
        queue = EventQueue(10, "q")
        probe = queue.ping(100.0, probe=True)
        assert probe is not None
        assert not queue.confirming(100.1)  # it has read nothing yet, as far as we know
        queue.pong(b"%d" % probe)
        assert queue.confirming(100.2)
        queue.publish({"n": 0})
        queue.take()
        queue.ping(101.0)
        assert queue.confirming(101.5) and not queue.confirming(102.5)

    asyncio.run(main())


def test_a_lagging_peer_owed_nothing_lets_go_of_every_wait_and_keeps_its_events() -> None:
    """``owed_while_lagging=False`` (forward WS): once the watcher calls ``lagged``, every
    pending future turns False, in flight or waiting, the events stay queued and go out in
    order, and a pong later still takes them off; with the default, ``lagged`` changes
    nothing."""

    async def main() -> None:
        kept = EventQueue(10, "kept")
        kept_futures = [kept.publish({"n": n}) for n in range(2)]
        kept.take()
        kept.lagged()
        assert resolved(kept_futures) == [None, None]

        queue = EventQueue(10, "q", window=2, owed_while_lagging=False)
        futures = [queue.publish({"n": n}) for n in range(3)]
        assert queue.take() == {"n": 0} and queue.take() == {"n": 1}
        number = queue.ping(0.0)
        queue.lagged()
        assert resolved(futures) == [False, False, False]
        assert len(queue) == 3 and queue.in_flight == 2
        later = queue.publish({"n": 3})
        queue.lagged()
        assert later.done() and later.result() is False
        assert number is not None
        queue.pong(b"%d" % number)  # it answers after all: what it confirmed leaves
        assert len(queue) == 2 and queue.confirmed == 2
        assert queue.take() == {"n": 2} and queue.take() == {"n": 3}

    asyncio.run(main())


OPS = st.lists(st.sampled_from(["publish", "take", "ping", "pong", "pong_all", "requeue",
                                "lagged"]), max_size=60)


@given(OPS, st.booleans())
def test_confirmed_events_are_a_prefix_and_every_event_goes_out_in_order(
        ops: list[str], owed_while_lagging: bool) -> None:
    """Any interleaving of publish, send, ping, pong, reconnect and lag: what is confirmed is
    always a prefix of what was published, and the events written on each connection, with
    repeats after a reconnect removed, follow publish order. Without ``owed_while_lagging``
    a lag lets go of every pending future (False), and only then is one False."""

    async def main() -> None:
        queue = EventQueue(1000, "q", window=5, owed_while_lagging=owed_while_lagging)
        let_go = False
        futures: list[asyncio.Future[bool]] = []
        pings: list[int] = []
        first_sends: list[int] = []
        connection: list[int] = []
        for op in ops:
            if op == "publish":
                futures.append(queue.publish({"n": len(futures)}))
            elif op == "take":
                event: dict[str, Any] | None = queue.take()
                if event is not None:
                    connection.append(event["n"])
                    if event["n"] not in first_sends:
                        first_sends.append(event["n"])
            elif op == "ping":
                number = queue.ping(0.0)
                if number is not None:
                    pings.append(number)
            elif op == "pong" and pings:
                queue.pong(b"%d" % pings.pop(0))
            elif op == "pong_all" and pings:
                queue.pong(b"%d" % pings[-1])
                pings.clear()
            elif op == "requeue":
                queue.requeue()
                pings.clear()
                assert connection == sorted(connection)  # one connection: in order
                connection = []
            elif op == "lagged":
                queue.lagged()
                if not owed_while_lagging:
                    let_go = let_go or bool(futures)
                    assert all(f.done() for f in futures)
            done = [f.done() for f in futures]
            assert done == sorted(done, reverse=True), done  # confirmed: a prefix
            assert let_go or all(f.result() for f in futures if f.done())
        assert first_sends == sorted(first_sends)
        assert connection == sorted(connection)

    asyncio.run(main())
