"""A tiny NoneBot2 app (OneBot v11 adapter, reverse WebSocket) for the end-to-end test.

Run it as a process: ``python tests/e2e/nonebot_app/bot.py``. Everything comes from the
environment:

- ``PORT`` (required) and ``HOST`` (default ``127.0.0.1``): where NoneBot listens; the
  daemon dials ``ws://HOST:PORT/onebot/v11/ws``.
- ``ONEBOT_ACCESS_TOKEN``: the token the daemon must present (unset: anything is accepted).
- ``NB_RECORD_FILE`` (required): JSON lines appended by this app and its plugin
  (:mod:`nb_recorder`, through :mod:`record_file`):

  - ``{"raw": {...}}`` every message event frame exactly as it came off the socket (in
    the order it came), before NoneBot's pydantic models coerce any types;
    ``{"raw_notice": {...}}`` the same for a notice event frame;
  - ``{"event": {...}}`` every message event a plugin received, as NoneBot parsed it;
  - ``{"call_api": "<action>", "params": {...}}`` every action NoneBot sent to the daemon;
  - ``{"send_result": ...}`` / ``{"send_error": "..."}`` the outcome of answering ``ping``;
  - what the commands of :mod:`nb_replies` did (``card``, ``late ping`` …).
- ``API_TIMEOUT`` (default 30 s in NoneBot): how long an action waits for its answer.

The plugin :mod:`nb_members` records admin and owner messages and answers ``whoami``.

``DRIVER`` is always ``~fastapi`` (the adapter needs a server-capable driver). NoneBot also
reads ``.env`` / ``.env.prod`` from the working directory: start it in an empty one (the
test uses its tmp dir) so that only the environment counts.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import nonebot
from nonebot.adapters.onebot.v11 import Adapter, Bot, Event
from nonebot.utils import DataclassEncoder

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the plugin and record_file live beside this file

from record_file import record  # noqa: E402


class RecordingAdapter(Adapter):
    """The stock OneBot v11 adapter, also recording raw event frames and outgoing actions."""

    @classmethod
    def json_to_event(cls, json_data: Any) -> Event | None:
        if isinstance(json_data, dict) and json_data.get("post_type") == "message":
            record({"raw": json_data})
        elif isinstance(json_data, dict) and json_data.get("post_type") == "notice":
            record({"raw_notice": json_data})
        return super().json_to_event(json_data)

    async def _call_api(self, bot: Bot, api: str, **data: Any) -> Any:
        # params as they go on the wire (message segments encoded the adapter's way)
        record({"call_api": api, "params": json.loads(json.dumps(data, cls=DataclassEncoder))})
        return await super()._call_api(bot, api, **data)


def main() -> None:
    nonebot.init(
        driver="~fastapi",
        host=os.environ.get("HOST", "127.0.0.1"),
        port=int(os.environ["PORT"]),
        log_level=os.environ.get("LOG_LEVEL", "INFO"),
    )
    nonebot.get_driver().register_adapter(RecordingAdapter)
    nonebot.load_plugin("nb_recorder")
    nonebot.load_plugin("nb_replies")  # commands of test_nonebot_replies (issue 33)
    nonebot.load_plugin("nb_members")  # roles, members and the bot's name (issue 33)
    nonebot.run()


if __name__ == "__main__":
    main()
