"""A real Koishi bot (``koishi-plugin-adapter-onebot``, forward WebSocket) gets a group
message that mentions another member (issue 33.5), sent by the emulated platform as the
platform does (``<@member_openid>`` in the content, a ``mentions[]`` entry each, an
@everyone too): the session's elements hold an ``at`` whose ``id`` is that member's vUIN —
the one the identity store gave the member's OpenID, created with the message — and an
``at`` of ``type`` ``all``. Harness: :class:`tests.e2e.frameworks.KoishiRun`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.testing import APP, EmulatedPlatform, group_message, mentioning

from .frameworks import GROUP, USER, KoishiRun

TOKEN = "koishi-mentions-token-5Rb"
OTHER = "73A48B12B0D76B961B4349B5599FA43C"


@pytest.mark.slow
def test_koishi_sees_an_at_of_the_member_a_group_message_mentions(tmp_path: Path) -> None:
    koishi = KoishiRun(tmp_path, TOKEN)
    records = koishi.records

    async def steps(platform: EmulatedPlatform) -> None:
        await platform.push("GROUP_MESSAGE_CREATE", mentioning(
            group_message(1, GROUP, USER) | {"content": "look"}, OTHER, everyone=True))
        await koishi.after("the message at Koishi", "event")

    koishi.run(steps, timeout=180)  # no error on the way
    other, user = koishi.vuins(OpenId(APP, OTHER), OpenId(APP, USER))
    assert isinstance(other, int) and isinstance(user, int) and other != user
    [event] = records.of("event")
    assert event["userId"] == str(user), event
    ats = [element["attrs"] for element in event["elements"] if element["type"] == "at"]
    assert ats == [{"id": str(other)}, {"type": "all"}], event
    assert [element["type"] for element in event["elements"]] == ["text", "at", "text", "at"]
