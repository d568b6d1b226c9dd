"""``gensokyo_idmap.testing`` is a kit for bot developers: importing it costs no test
framework and none of the daemon (import-linter holds the static side in pyproject.toml;
this checks what an import really loads)."""

from __future__ import annotations

import json
import subprocess
import sys

import gensokyo_idmap.testing


def test_importing_the_kit_loads_no_test_framework_and_not_the_daemon() -> None:
    probe = ("import json, sys; import gensokyo_idmap.testing; "
             "print(json.dumps(sorted(sys.modules)))")
    loaded = set(json.loads(subprocess.run([sys.executable, "-c", probe], check=True,
                                           capture_output=True, text=True).stdout))
    assert "gensokyo_idmap.testing.platform_emulator" in loaded  # the probe imported it
    for module in ("pytest", "hypothesis", "gensokyo_idmap.app", "gensokyo_idmap.cli",
                   "gensokyo_idmap.store.lmdb.identity"):
        assert module not in loaded, module


def test_the_public_names_are_deliberate() -> None:
    assert sorted(gensokyo_idmap.testing.__all__) == [
        "APP", "DaemonProcess", "Delivery", "EmulatedPlatform", "Prepared",
        "RecordingFramework", "SECRET", "StableVuinFramework", "Validation", "WebhookSender",
        "c2c_message", "channel_message", "daemon_command", "daemon_config", "direct_message",
        "framework_server", "free_port", "group_message", "guild_member", "mentioning",
        "message_delete", "quoting", "running_daemon", "until", "until_listening", "write_config", "ws_url",
    ]
    for name in gensokyo_idmap.testing.__all__:
        assert hasattr(gensokyo_idmap.testing, name), name
