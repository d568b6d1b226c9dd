"""The JSON-lines file a real framework's bot writes in the e2e tests (NoneBot's plugin,
the Koishi bot): one object per line, keyed by what it records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class Records:
    """The JSON lines a bot wrote (``{"<kind>": …}`` each), read afresh on every call."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def all(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text("utf-8").splitlines() if line]

    def of(self, kind: str) -> list[Any]:
        return [entry[kind] for entry in self.all() if kind in entry]


def run_context(framework: str, lines: list[str], log_dir: Path, records: Records) -> str:
    """What a failed wait shows: the tail of the framework's output, of each daemon log in
    ``log_dir`` and of the records."""
    parts = [f"--- {framework} output (tail) ---", *lines[-40:]]
    for log_file in sorted(log_dir.glob("daemon-*.log")):
        parts.append(f"--- {log_file.name} (tail) ---")
        parts.extend(log_file.read_text("utf-8", "replace").splitlines()[-40:])
    parts.append("--- records ---")
    parts.extend(json.dumps(entry) for entry in records.all()[-20:])
    return "\n".join(parts)
