"""A real OneBot client — NoneBot2 with its OneBot v11 adapter — fed by the daemon.

Three processes: the emulated QQ platform (token endpoint, /gateway/bot, gateway) runs in
this test's event loop; NoneBot (``tests/e2e/nonebot_app/bot.py``) and the daemon
(``gensokyo-idmap serve``) run as subprocesses, the daemon dialling NoneBot by reverse
WebSocket with an access token. The NoneBot plugin appends every frame and message event it
gets to a JSON-lines file, which this test reads.

Checked: a group message and a private message reach NoneBot's plugin as OneBot v11 message
events with integer ids — ``user_id`` / ``group_id`` the vUINs the identity store holds for
those OpenIDs, ``message_id`` an int32, ``self_id`` an int — and after a SIGTERM and a
restart on the same data dir, a message from the same user and group carries the same
vUINs. The plugin answers ``ping`` with ``pong`` (NoneBot's ``send_msg``): the emulator
records ``POST /v2/users/<openid>/messages`` and ``POST /v2/groups/<group_openid>/messages``
carrying the original ``msg_id``, and NoneBot gets an int ``message_id`` back.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.testing import APP, EmulatedPlatform, c2c_message, group_message, until

from .frameworks import GROUP, USER, WAIT, NoneBotRun

TOKEN = "nb-e2e-token-7Qx"
INT32 = range(-(2**31), 2**31)


@pytest.mark.slow
def test_nonebot_gets_group_and_private_messages_with_durable_vuins(tmp_path: Path) -> None:
    nb = NoneBotRun(tmp_path, TOKEN)
    records, context = nb.records, nb.context

    async def steps(platform: EmulatedPlatform) -> None:
        # first daemon: gateway Identify, reverse WS accepted by NoneBot
        assert len(platform.identifies) == 1 and nb.connections() == 1, context()
        await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(1, GROUP, USER))
        await until(lambda: len(records.of("event")) == 1, WAIT,
                    lambda: f"group message at NoneBot\n{context()}")
        await platform.push("C2C_MESSAGE_CREATE", c2c_message(2))
        await until(lambda: len(records.of("event")) == 2, WAIT,
                    lambda: f"private message at NoneBot\n{context()}")
        # the plugin answers "ping" with "pong" (send_msg): a passive C2C reply
        await until(lambda: bool(
            records.of("send_error") or records.of("send_result")), WAIT,
                    lambda: f"the pong reply\n{context()}")
        assert not records.of("send_error"), context()
        # (msg_seq counts from this process's offset; the platform wants it unique per
        # msg_id, and an offset per start keeps it so across restarts)
        [(path, body)] = platform.api_requests("POST", "/messages")
        seq = body.pop("msg_seq")
        assert type(seq) is int and 0 < seq < 2**31, body
        assert (path, body) == (f"/v2/users/{USER}/messages", {
            "msg_type": 0, "content": "pong", "msg_id": "ROBOT1.0_c2c2"}), context()
        # and in a group: the reply names the group message it answers
        await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(4, GROUP, USER)
                            | {"content": " ping"})
        await until(lambda: len(records.of("send_result")) == 2, WAIT,
                    lambda: f"the group pong\n{context()}")
        assert platform.api_requests("POST", "/messages")[1] == (
            f"/v2/groups/{GROUP}/messages", {"msg_type": 0, "content": "pong",
                                             "msg_seq": seq, "msg_id": "ROBOT1.0_gw4"})
        await nb.stop_daemon()

        # the restart, on the same data dir: NoneBot must take the new connection
        await nb.daemon.start()
        await until(lambda: len(platform.resumes) == 1, WAIT,
                    lambda: f"gateway Resume\n{context()}")
        await until(lambda: nb.connections() == 2, WAIT,
                    lambda: f"NoneBot reconnection\n{context()}")
        await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(3, GROUP, USER))
        await until(lambda: len(records.of("event")) == 4, WAIT,
                    lambda: f"group message after the restart\n{context()}")
        await nb.stop_daemon()

    started = time.monotonic()
    nb.run(steps)
    elapsed = time.monotonic() - started

    user_vuin, group_vuin = nb.vuins(OpenId(APP, USER), OpenId(APP, GROUP))
    assert isinstance(user_vuin, int) and isinstance(group_vuin, int)
    assert user_vuin != group_vuin

    raw = records.of("raw")  # as sent on the wire, before NoneBot's models coerce anything
    events = records.of("event")  # as NoneBot's plugin got them
    assert len(raw) == len(events) == 4, context()
    for frame in raw:
        assert type(frame["self_id"]) is int, frame
        assert type(frame["user_id"]) is int, frame
        assert type(frame["message_id"]) is int and frame["message_id"] in INT32, frame
        assert frame.get("group_id") is None or type(frame["group_id"]) is int, frame

    group_1, private_2, group_4, group_3 = events
    assert group_4["plain_text"].strip() == "ping" and group_4["user_id"] == user_vuin
    for event, text in ((group_1, "m1"), (group_3, "m3")):
        assert event["post_type"] == "message" and event["message_type"] == "group", event
        assert event["sub_type"] == "normal", event
        assert (event["user_id"], event["group_id"]) == (user_vuin, group_vuin), event
        # GROUP_AT_MESSAGE_CREATE: the leading @bot made NoneBot mark the event to_me
        assert event["to_me"] is True, event
        assert event["plain_text"] == text, event
    assert private_2["message_type"] == "private" and private_2["sub_type"] == "friend"
    assert private_2["user_id"] == user_vuin, private_2
    assert private_2["plain_text"] == "ping" and private_2["to_me"] is True, private_2
    for event in events:
        assert type(event["self_id"]) is int and event["bot_self_id"] == str(event["self_id"])
        assert type(event["message_id"]) is int and event["message_id"] in INT32, event
    assert len({event["message_id"] for event in events}) == 4, events

    calls = [entry for entry in records.all() if "call_api" in entry]
    assert [call["call_api"] for call in calls] == ["send_msg", "send_msg"], calls
    assert all(isinstance(result["message_id"], int) for result in records.of("send_result"))
    outcome = records.of("send_result") or records.of("send_error")
    print(f"\nNoneBot e2e took {elapsed:.1f} s; vUINs user={user_vuin} group={group_vuin}; "
          f"NoneBot called {calls}; outcome {outcome}")
