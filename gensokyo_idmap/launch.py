"""The ``gensokyo-idmap`` console script's entry point.

The daemon runs on POSIX systems only: its stores hold their locks with ``fcntl``, which
Windows lacks. The CLI imports the stores, so on Windows ``import gensokyo_idmap.cli`` would
end in an ImportError's traceback; this module imports nothing of the package and says so
in one line first.
"""

from __future__ import annotations

import sys

__all__ = ["main", "unsupported_platform"]


def unsupported_platform(platform: str) -> str | None:
    """Why the daemon cannot run on ``platform`` (a ``sys.platform`` value), or None."""
    if platform == "win32":  # Cygwin's and MSYS2's Pythons have fcntl
        return ("gensokyo-idmap runs on Linux, macOS and other POSIX systems (its stores "
                "lock their files with fcntl), not on Windows: run it under WSL or in a "
                "Linux container")
    return None


def main() -> None:
    reason = unsupported_platform(sys.platform)
    if reason is not None:
        print(f"error: {reason}", file=sys.stderr)
        sys.exit(1)
    from gensokyo_idmap.cli import main as cli_main

    cli_main()
