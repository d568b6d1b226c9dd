"""The ``gensokyo-idmap`` console script's entry point.

The daemon runs on POSIX systems only: its stores hold their locks with ``fcntl``, which
Windows lacks. The CLI imports the stores, so on Windows ``import gensokyo_idmap.cli`` would
end in an ImportError's traceback; this module imports nothing of the package and says so
in one line first.

It also keeps out of the process what structlog would load only because it is installed
(:data:`UNUSED_EXTRAS`): ``import structlog`` imports ``rich`` (and through it
``pygments``) for its development renderer's pretty tracebacks, and ``greenlet`` for its
deprecated thread-local context, whenever they are on the path: a test or lint environment,
or another package of the host that needs them. The daemon uses neither (its console lines
are :class:`~gensokyo_idmap.logrender.PlainConsoleRenderer`'s, tracebacks in structlog's
plain format), and together they were 4.5 MiB of an idle daemon's 66 (bench/idle_imports.py).
A ``None`` in ``sys.modules`` makes their import fail with ImportError, which structlog
takes as "not installed".

And it turns off pydantic's plugin lookup (:func:`skip_pydantic_plugins`): at the first
model it builds, pydantic reads the entry points of every installed distribution to find
plugins (``importlib.metadata``: each distribution's metadata files read and parsed). The
daemon's config models need none, and the lookup's objects stayed in an idle daemon's heap
for its whole life. pydantic's documented ``PYDANTIC_DISABLE_PLUGINS=1`` skips it; an
operator who set the variable (to name the plugins to leave out, or to an empty value that
keeps them all) keeps theirs.
"""

from __future__ import annotations

import os
import sys
from typing import Final

__all__ = ["PYDANTIC_PLUGINS_VARIABLE", "UNUSED_EXTRAS", "keep_out_unused_extras", "main",
           "skip_pydantic_plugins", "unsupported_platform"]

#: Modules structlog imports when they are installed and the daemon never uses.
UNUSED_EXTRAS: Final = ("rich", "greenlet", "better_exceptions")
#: pydantic's switch for its plugins: ``1`` (or ``true``, ``__all__``) loads none.
PYDANTIC_PLUGINS_VARIABLE: Final = "PYDANTIC_DISABLE_PLUGINS"


def unsupported_platform(platform: str) -> str | None:
    """Why the daemon cannot run on ``platform`` (a ``sys.platform`` value), or None."""
    if platform == "win32":  # Cygwin's and MSYS2's Pythons have fcntl
        return ("gensokyo-idmap runs on Linux, macOS and other POSIX systems (its stores "
                "lock their files with fcntl), not on Windows: run it under WSL or in a "
                "Linux container")
    return None


def keep_out_unused_extras() -> None:
    """Make :data:`UNUSED_EXTRAS` unimportable in this process (those already imported
    stay): for the process's entry point, before anything imports structlog; never for a
    library's host, whose own code may use them."""
    for name in UNUSED_EXTRAS:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]


def skip_pydantic_plugins() -> None:
    """No pydantic plugin lookup in this process, unless its environment already says
    what to do with them (module docstring): for the process's entry point, before its
    first model is built (pydantic reads the variable then); never for a library's host."""
    os.environ.setdefault(PYDANTIC_PLUGINS_VARIABLE, "1")


def main() -> None:
    reason = unsupported_platform(sys.platform)
    if reason is not None:
        print(f"error: {reason}", file=sys.stderr)
        sys.exit(1)
    keep_out_unused_extras()
    skip_pydantic_plugins()
    from gensokyo_idmap.cli import main as cli_main

    cli_main()
