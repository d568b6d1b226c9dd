"""README.zh-CN.md gives the same commands as the English README's first screens (install,
run as a service, try it): the code blocks of README.md up to ``## Two commands`` and every
code block of the Chinese page, in the same order, each with the same lines once a comment
(`` # …``, which may be translated) is taken off. tests/test_readme.py runs the English
ones, so the Chinese page's commands are those that run."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENGLISH = ROOT / "README.md"
CHINESE = ROOT / "README.zh-CN.md"
#: Where the English README's first screens end.
END = "## Two commands"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)
_COMMENT = re.compile(r"\s+#\s.*$|^#\s.*$")


def commands(text: str) -> list[tuple[str, list[str]]]:
    """Each code block of ``text``: its fence's language and its lines, comments off."""
    return [(language, [_COMMENT.sub("", line).rstrip() for line in body.splitlines()])
            for language, body in _FENCE.findall(text)]


def test_the_chinese_readme_gives_the_english_first_screens_commands() -> None:
    english = ENGLISH.read_text("utf-8")
    assert END in english
    wanted = commands(english[:english.index(END)])
    assert len(wanted) >= 4 and any(lang == "sh" for lang, _ in wanted)
    assert commands(CHINESE.read_text("utf-8")) == wanted


def test_each_readme_links_the_other() -> None:
    assert "](README.zh-CN.md)" in ENGLISH.read_text("utf-8")
    assert "](README.md)" in CHINESE.read_text("utf-8")


def test_a_changed_command_is_caught() -> None:
    block = "```sh\ngensokyo-idmap init    # 写出配置\n```\n"
    assert commands(block) == [("sh", ["gensokyo-idmap init"])]
    assert commands(block.replace("init", "init --force")) != commands(block)
    assert commands(block.replace("写出配置", "writes the config")) == commands(block)
