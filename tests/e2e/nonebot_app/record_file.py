"""The one writer of ``NB_RECORD_FILE``, shared by the app (bot.py) and its plugin."""

from __future__ import annotations

import json
import os
from typing import Any


def record(entry: dict[str, Any]) -> None:
    """Append one JSON line to ``NB_RECORD_FILE`` (one write, so lines never interleave)."""
    line = json.dumps(entry, ensure_ascii=False, default=str) + "\n"
    with open(os.environ["NB_RECORD_FILE"], "a", encoding="utf-8") as out:
        out.write(line)
