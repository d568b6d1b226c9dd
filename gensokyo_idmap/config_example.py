"""The commented example config, shipped inside the package (``data/config.yml``).

An installed wheel has no checkout around it: ``gensokyo-idmap init`` writes this file for
a new install, and ``demo`` runs with it when no ``--config`` is given, so both work from
any directory. In a checkout ``examples/config.yml`` is a link to the same file: one text,
which tests/test_docs.py holds to the config's defaults.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Final

from gensokyo_idmap.errors import BadInputError, IdmapError

__all__ = ["CONFIG_NAME", "TO_FILL_IN", "example_path", "example_text", "write_example"]

#: The file ``init`` writes in its directory.
CONFIG_NAME: Final = "config.yml"

#: What a new install must set before the daemon reaches the platform: key → why.
TO_FILL_IN: Final[tuple[tuple[str, str], ...]] = (
    ("bot.app_id", "your bot's AppID (the example's 102000001 is a placeholder)"),
    ("bot.secret", "its AppSecret from the QQ bot console (or GSK_BOT__SECRET in the "
                   "environment)"),
    ("webhook.listen / qq.gateway", "how events arrive: the platform's HTTPS callback "
                                    "through your TLS proxy, or the WebSocket gateway"),
    ("onebot.reverse_ws / forward_ws", "where your bot framework dials, or is dialled"),
    ("idmap.data_dir", "where openid-map.db lives (./data from the directory the daemon "
                       "starts in): back it up"),
)


def _resource() -> resources.abc.Traversable:
    return resources.files("gensokyo_idmap").joinpath("data", CONFIG_NAME)


def example_text() -> str:
    """The example config as shipped."""
    return _resource().read_text(encoding="utf-8")


@contextmanager
def example_path() -> Iterator[Path]:
    """A file path to the example config (a temporary copy if the package is zipped)."""
    with resources.as_file(_resource()) as path:
        yield path


def write_example(directory: Path, *, force: bool = False) -> Path:
    """Write the example as ``directory/config.yml`` (mode 0600: it is where bot.secret
    goes); an existing file is kept unless ``force``, so a second ``init`` never wipes a
    filled-in secret."""
    target = directory / CONFIG_NAME
    if target.exists() and not force:
        raise BadInputError("DIRECTORY", str(target), "holds a config.yml already (--force "
                            "replaces it)")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(example_text())
    except OSError as exc:
        raise IdmapError(f"cannot write {target}: {exc.strerror}") from None
    return target
