"""A test kit for bots that talk to gensokyo-idmap: the QQ platform emulated on loopback.

Public, and documented for bot developers in ``docs/testing.md``. Nothing here is mocked: the
emulated platform speaks the real wire format (token endpoint, ``/gateway/bot``, the WebSocket
gateway with Identify / Resume / heartbeats, the OpenAPI send, upload and recall endpoints
with the platform's refusals, and Ed25519-signed webhook callbacks), so a bot's own tests can
run the real daemon between the emulated platform and the bot.

- :mod:`.platform_emulator`: :class:`EmulatedPlatform` (token, gateway, OpenAPI, guilds)
  and the ``d`` payloads of a group and a C2C message (and of one quoting another, or
  mentioning others) and of the guild events (a channel message, a guild DM, a recall, a
  member change).
- :mod:`.webhook_sender`: :class:`WebhookSender`, signed webhook deliveries as the platform
  posts them.
- :mod:`.loopback`: free ports, a framework's reverse-WS endpoint in the test's process and
  frameworks that record what the daemon sent.
- :mod:`.daemon`: a config for loopback (:func:`daemon_config`) and ``gensokyo-idmap serve``
  as a child process (:func:`running_daemon`, :class:`DaemonProcess`).
- :mod:`.wait`: :func:`until` a condition holds and :func:`until_listening`, bounded waits
  instead of fixed sleeps.

The daemon itself never imports this package (an import-linter contract in pyproject.toml
says so), and this package imports nothing of the daemon but the QQ side's client modules
and the error tree: it needs only the daemon's own runtime dependencies, not pytest.
"""

from __future__ import annotations

from gensokyo_idmap.testing.daemon import (
    DaemonProcess,
    daemon_command,
    daemon_config,
    running_daemon,
    write_config,
)
from gensokyo_idmap.testing.loopback import (
    RecordingFramework,
    StableVuinFramework,
    framework_server,
    free_port,
    ws_url,
)
from gensokyo_idmap.testing.platform_emulator import (
    APP,
    SECRET,
    EmulatedPlatform,
    c2c_message,
    channel_message,
    direct_message,
    group_message,
    guild_member,
    mentioning,
    message_delete,
    quoting,
)
from gensokyo_idmap.testing.wait import until, until_listening
from gensokyo_idmap.testing.webhook_sender import Delivery, Prepared, Validation, WebhookSender

__all__ = [
    "APP",
    "SECRET",
    "DaemonProcess",
    "Delivery",
    "EmulatedPlatform",
    "Prepared",
    "RecordingFramework",
    "StableVuinFramework",
    "Validation",
    "WebhookSender",
    "c2c_message",
    "channel_message",
    "daemon_command",
    "daemon_config",
    "direct_message",
    "framework_server",
    "free_port",
    "group_message",
    "guild_member",
    "mentioning",
    "message_delete",
    "quoting",
    "running_daemon",
    "until",
    "until_listening",
    "write_config",
    "ws_url",
]
