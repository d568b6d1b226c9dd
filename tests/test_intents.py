"""Gateway intents by name: the platform's bits, the Go daemon's handler names, and what a
real daemon's Identify carries."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.intents import GENSOKYO_HANDLERS, INTENTS, intents_value
from gensokyo_idmap.testing import (
    DaemonProcess,
    EmulatedPlatform,
    daemon_config,
    until,
    write_config,
)


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


@pytest.mark.parametrize(("configured", "bits"), [
    (["GROUP_AND_C2C_EVENT", "public_guild_messages", "DIRECT_MESSAGE", "GUILD_MEMBERS"],
     (1 << 25) | (1 << 30) | (1 << 12) | (1 << 1)),
    ((1 << 9) | (1 << 25), (1 << 9) | (1 << 25)),
])
def test_the_configured_intents_reach_the_gateways_identify(
        tmp_path: Path, configured: object, bits: int) -> None:
    """qq.intents, names or a number, is what a real daemon's Identify carries."""
    async def main() -> list[dict[str, Any]]:
        platform = EmulatedPlatform()
        await platform.start()
        config = daemon_config(tmp_path / "data", platform=platform)
        config["qq"]["intents"] = configured
        daemon = DaemonProcess(write_config(tmp_path / "config.yml", config), tmp_path)
        try:
            await daemon.start()
            await until(lambda: bool(platform.identifies), 20, "the daemon's Identify")
            assert await daemon.stop() == 0
            return list(platform.identifies)
        finally:
            await daemon.kill()
            await platform.close()

    identifies = asyncio.run(main())
    assert [identify["intents"] for identify in identifies] == [bits]
