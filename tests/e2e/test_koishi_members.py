"""A real Koishi bot (``koishi-plugin-adapter-onebot``, forward WebSocket) learns the bot's
name, a group member's role and the member themselves from the daemon (issue 33 items 2
and 3).

Koishi's adapter takes the bot's user from ``get_login_info`` (its ``nickname`` is the
bot's name), a message's member from ``sender`` (``card`` as the nick, ``role`` as its
one role) and answers ``checkPermission('onebot.group.admin' | 'onebot.group.owner')``
from that role. The bot (``tests/e2e/koishi_app/bot.cjs``) records the name once logged in
and, on ``whoami``, the author as the event names them, both checks and
``getGuildMember`` (``get_group_member_info``). Checked: the name is the platform's
``GET /users/@me`` one; an admin's message (``member_role`` ``admin``) passes the admin
check and a member's does not; ``getGuildMember`` answers the author with the same name
and role. Harness: :class:`tests.e2e.frameworks.KoishiRun`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gensokyo_idmap.testing import EmulatedPlatform, group_message

from .frameworks import GROUP, USER, KoishiRun

TOKEN = "koishi-members-token-2Fm"
MEMBER = "1F1E2D3C4B5A69788796A5B4C3D2E1F1"


@pytest.mark.slow
def test_koishi_sees_the_bots_name_and_who_is_admin(tmp_path: Path) -> None:
    koishi = KoishiRun(tmp_path, TOKEN)
    koishi.platform.bot_user["username"] = "Moriya Bot"
    records, context = koishi.records, koishi.context

    async def steps(platform: EmulatedPlatform) -> None:
        await koishi.after("Koishi logged in", "login")
        await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(
            1, GROUP, USER, username="Sanae", role="admin") | {"content": " whoami"})
        await platform.push("GROUP_AT_MESSAGE_CREATE", group_message(
            2, GROUP, MEMBER, username="Suwako", role="member") | {"content": " whoami"})
        await koishi.after("Koishi's whoami", "whoami", count=2)

    koishi.run(steps)  # no error on the way, no warning in Koishi's log
    assert records.of("login")[-1] == {"name": "Moriya Bot"}, context()
    admin, member = records.of("whoami")
    assert (admin["name"], admin["roles"], admin["admin"], admin["owner"]) == (
        "Sanae", ["admin"], True, False), admin
    assert (member["name"], member["roles"], member["admin"]) == (
        "Suwako", ["member"], False), member
    for seen in (admin, member):  # getGuildMember: get_group_member_info of the author
        assert seen["fetched"]["user"] == seen["userId"], seen
        assert (seen["fetched"]["name"], seen["fetched"]["roles"]) == (
            seen["name"], seen["roles"]), seen
