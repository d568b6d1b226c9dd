"""A real NoneBot2 bot (OneBot v11 adapter, reverse WS) asks who a message's author is and
checks their role, in a QQ channel and in a group (issue 33 items 2 and 3).

The NoneBot app's plugin ``nb_members`` records every message passing NoneBot's
``GROUP_ADMIN`` / ``GROUP_OWNER`` permission (they read ``sender.role``), and on ``whoami``
asks the daemon ``get_group_member_info`` of the author in that chat and
``get_login_info``. Checked, over the daemon (``gensokyo-idmap serve``) and the emulated
platform:

- in a channel, the author of the message is a member (no "was not seen in group"), named
  and with the role their guild roles give (``2``: admin), and ``get_login_info`` names the
  bot as the platform's ``GET /users/@me`` does;
- an admin's message (``member.roles`` ``2`` in a channel, ``member_role`` ``admin`` in a
  group) passes ``GROUP_ADMIN``, the owner's passes ``GROUP_OWNER``, a member's passes
  neither.

Harness: :class:`tests.e2e.frameworks.NoneBotRun`."""

from __future__ import annotations

from pathlib import Path

import pytest

from gensokyo_idmap.testing import APP, EmulatedPlatform, channel_message, group_message

from .frameworks import GROUP, USER, NoneBotRun

TOKEN = "nb-members-token-8Wz"
MEMBER = "1F1E2D3C4B5A69788796A5B4C3D2E1F1"
OWNER = "2F1E2D3C4B5A69788796A5B4C3D2E1F2"
GUILD_MEMBER = "144115218677563301"


@pytest.mark.slow
def test_nonebot_knows_members_their_roles_and_the_bots_name(tmp_path: Path) -> None:
    nb = NoneBotRun(tmp_path, TOKEN)
    nb.platform.bot_user["username"] = "Hakurei Bot"
    records, context = nb.records, nb.context

    # (event type, d): each one NoneBot's plugin records as an "event", in this order
    messages = [
        ("AT_MESSAGE_CREATE", channel_message(1, "whoami", nick="Boss", roles=("1", "2"))),
        ("AT_MESSAGE_CREATE", channel_message(2, "hi", user=GUILD_MEMBER, username="bob",
                                              nick="", roles=("1", "5"))),
        ("GROUP_AT_MESSAGE_CREATE", group_message(3, GROUP, USER, username="Reimu",
                                                  role="admin") | {"content": " whoami"}),
        ("GROUP_AT_MESSAGE_CREATE", group_message(4, GROUP, MEMBER, username="Marisa",
                                                  role="member")),
        ("GROUP_AT_MESSAGE_CREATE", group_message(5, GROUP, OWNER, username="Yukari",
                                                  role="owner")),
        ("GROUP_AT_MESSAGE_CREATE", group_message(6, GROUP, MEMBER)),  # no role: a member
    ]

    async def steps(platform: EmulatedPlatform) -> None:
        for n, (t, d) in enumerate(messages, start=1):
            await platform.push(t, d)
            await nb.after(f"message {n} at NoneBot", "event", count=n)
        await nb.after("the whoami answers", "whoami", "whoami_error", count=2)

    nb.run(steps)

    assert records.of("whoami_error") == [], context()
    events = records.of("event")
    channel_admin, channel_member, group_admin, group_member, group_owner, unnamed = events
    assert channel_admin["sender"]["role"] == "admin", channel_admin
    assert (channel_admin["sender"]["nickname"], channel_admin["sender"]["card"]) == (
        "alice", "Boss")
    # a channel admin (5) is no admin: the payload does not say of which channel
    assert channel_member["sender"]["role"] == "member", channel_member
    assert group_admin["sender"]["nickname"] == "Reimu"
    assert unnamed["sender"]["role"] == "member"

    # the author's get_group_member_info in the channel, and in the group
    in_channel, in_group = records.of("whoami")
    assert in_channel["message_id"] == channel_admin["message_id"]
    member = in_channel["member"]
    assert (member["group_id"], member["user_id"]) == (
        channel_admin["group_id"], channel_admin["user_id"]), member
    assert (member["nickname"], member["card"], member["role"]) == ("alice", "Boss", "admin")
    assert in_group["member"]["user_id"] == group_admin["user_id"]
    assert (in_group["member"]["nickname"], in_group["member"]["role"]) == ("Reimu", "admin")
    # the bot named as the platform names it
    for answer in (in_channel, in_group):
        assert answer["login"] == {"user_id": int(APP), "nickname": "Hakurei Bot"}, answer

    # NoneBot's permissions follow what the platform said
    assert sorted(records.of("group_admin")) == sorted(
        [channel_admin["message_id"], group_admin["message_id"]]), context()
    assert records.of("group_owner") == [group_owner["message_id"]], context()
    assert group_member["message_id"] not in records.of("group_admin")
