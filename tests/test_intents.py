"""Gateway intents by name: the platform's bits, and the Go daemon's handler names."""

from __future__ import annotations

import pytest

from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.intents import GENSOKYO_HANDLERS, INTENTS, intents_value


def test_names_are_the_platforms_bits_in_any_case() -> None:
    assert intents_value(["GROUP_AND_C2C_EVENT"]) == 33554432
    assert intents_value(["public_guild_messages", "Direct_Message"]) == (1 << 30) | (1 << 12)
    assert intents_value([]) == 0
    assert len(set(INTENTS.values())) == len(INTENTS)  # one bit each


@pytest.mark.parametrize("bad", ["GUILD", "", 512, None])
def test_an_unknown_name_is_refused_naming_it(bad: object) -> None:
    with pytest.raises(BadInputError) as err:
        intents_value(["GUILDS", bad], field="qq.intents")
    assert err.value.field == "qq.intents" and repr(bad) in err.value.message


def test_every_go_daemon_handler_names_a_known_intent() -> None:
    assert {name for name in GENSOKYO_HANDLERS.values() if name is not None} <= set(INTENTS)
    assert GENSOKYO_HANDLERS["ATMessageEventHandler"] == "PUBLIC_GUILD_MESSAGES"
    assert GENSOKYO_HANDLERS["CreateMessageHandler"] == "GUILD_MESSAGES"
