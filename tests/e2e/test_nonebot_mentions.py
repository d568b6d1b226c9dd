"""A real NoneBot2 bot (OneBot v11 adapter, reverse WS) gets a group message that mentions
another member (issue 33.5): the emulated platform sends it as the platform does
(``<@member_openid>`` in the content, a ``mentions[]`` entry each), once as every group
message (``GROUP_MESSAGE_CREATE``) and once addressed to the bot (``GROUP_AT_MESSAGE_CREATE``,
with an @everyone too), and NoneBot's ``event.message`` holds an ``at`` of that member's
vUIN: the one the identity store gave the member's OpenID, created with the message (the
member never spoke). Harness: :class:`tests.e2e.frameworks.NoneBotRun`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.testing import APP, EmulatedPlatform, group_message, mentioning

from .frameworks import GROUP, USER, NoneBotRun

TOKEN = "nb-mentions-token-8Hs"
OTHER = "73A48B12B0D76B961B4349B5599FA43C"


def _at(qq: int | str) -> dict[str, object]:
    return {"type": "at", "data": {"qq": str(qq)}}


@pytest.mark.slow
def test_nonebot_sees_an_at_of_the_member_a_group_message_mentions(tmp_path: Path) -> None:
    nb = NoneBotRun(tmp_path, TOKEN)
    records, context = nb.records, nb.context

    async def steps(platform: EmulatedPlatform) -> None:
        await platform.push("GROUP_MESSAGE_CREATE", mentioning(
            group_message(1, GROUP, USER) | {"content": "look"}, OTHER))
        await platform.push("GROUP_AT_MESSAGE_CREATE", mentioning(
            group_message(2, GROUP, USER) | {"content": " ask"}, OTHER, everyone=True))
        await nb.after("the two messages at NoneBot", "event", count=2)

    nb.run(steps)

    other, user = nb.vuins(OpenId(APP, OTHER), OpenId(APP, USER))
    assert isinstance(other, int) and isinstance(user, int) and other != user, context()
    plain, addressed = records.of("event")
    # every group message: not addressed to the bot; the at of the member where they were
    assert plain["user_id"] == user and plain["to_me"] is False, plain
    assert plain["message"] == [{"type": "text", "data": {"text": "look "}}, _at(other)]
    # the @bot one: NoneBot takes the leading at of the bot off (to_me) and keeps the rest
    assert addressed["to_me"] is True, addressed
    assert addressed["original_message"][0] == _at(addressed["self_id"]), addressed
    assert addressed["message"] == [{"type": "text", "data": {"text": "ask "}}, _at(other),
                                    {"type": "text", "data": {"text": " "}}, _at("all")]
    for frame in records.of("raw"):  # on the wire, before NoneBot's models
        assert f"[CQ:at,qq={other}]" in frame["raw_message"], frame
