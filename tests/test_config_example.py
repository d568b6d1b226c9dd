"""config_example: the example config ships inside the package, one text with the checkout's
examples/config.yml, and ``write_example`` never replaces a file it was not told to."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

import gensokyo_idmap
from gensokyo_idmap.config import load_config
from gensokyo_idmap.config_example import (
    TO_FILL_IN,
    example_path,
    example_text,
    write_example,
)
from gensokyo_idmap.errors import BadInputError, IdmapError

ROOT = Path(__file__).resolve().parent.parent
PACKAGED = Path(gensokyo_idmap.__file__).parent / "data" / "config.yml"


def test_examples_config_is_the_packaged_file() -> None:
    # one source of truth: the checkout's examples/config.yml is a link to the package's file
    assert (ROOT / "examples" / "config.yml").resolve() == PACKAGED.resolve()
    assert example_text() == PACKAGED.read_text(encoding="utf-8")
    with example_path() as path:
        assert path.read_text(encoding="utf-8") == example_text()
        assert load_config(path).bot.app_id == "102000001"


def test_every_key_to_fill_in_is_in_the_example() -> None:
    config = load_config(PACKAGED).model_dump(mode="json")
    for keys, _ in TO_FILL_IN:
        for key in keys.split(" / "):
            section, _, name = key.partition(".")
            if "." not in key:  # "forward_ws" after "onebot.reverse_ws /"
                section, name = "onebot", key
            assert name in config[section], key


def test_write_example_writes_the_text_for_the_owner_only(tmp_path: Path) -> None:
    written = write_example(tmp_path / "new" / "site")
    assert written == tmp_path / "new" / "site" / "config.yml"
    assert written.read_text(encoding="utf-8") == example_text()
    assert stat.S_IMODE(written.stat().st_mode) == 0o600  # bot.secret goes there


def test_write_example_keeps_an_existing_file_unless_forced(tmp_path: Path) -> None:
    target = tmp_path / "config.yml"
    target.write_text("bot: {secret: filled-in}\n", encoding="utf-8")
    with pytest.raises(BadInputError, match="--force"):
        write_example(tmp_path)
    assert target.read_text(encoding="utf-8") == "bot: {secret: filled-in}\n"
    write_example(tmp_path, force=True)
    assert target.read_text(encoding="utf-8") == example_text()


def test_write_example_names_what_it_cannot_write(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    with pytest.raises(IdmapError, match=r"cannot write .*file/config\.yml"):
        write_example(blocker)
