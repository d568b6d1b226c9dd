"""The console's gettext catalogs are complete and up to date.

- ``console.pot`` holds exactly the messages extraction finds now in the templates and the
  console's Python modules (Babel, with pyproject.toml's ``[tool.babel]`` mapping, as
  ``make catalogs`` runs it): a message added, changed or dropped in a template without
  ``make catalogs`` fails here.
- every language's ``console.po`` has every message of the template, each translated: not
  empty, not fuzzy, not a placeholder (``TODO``…, or the English itself where there are
  words to translate), with the same ``%(name)s`` values and the same HTML tags as the
  English, so that formatting a page can neither fail nor lose a value or a tag;
- the ``console.mo`` the package ships says what its ``.po`` says (it is what ``make
  catalogs`` compiles), and the console loads it.

English is the source language: its text is the message ids, so it has no catalog.
"""

from __future__ import annotations

import gettext
import io
import re
from pathlib import Path

import pytest

from gensokyo_idmap.api.console.language import DEFAULT, LANGUAGES
from gensokyo_idmap.api.console.translations import DOMAIN, Catalogs, catalog_path

babel_frontend = pytest.importorskip("babel.messages.frontend",
                                     reason="Babel comes with the test extras (make test)")
from babel.messages.catalog import Catalog, Message  # noqa: E402
from babel.messages.mofile import write_mo  # noqa: E402
from babel.messages.pofile import read_po  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
CONSOLE = ROOT / "gensokyo_idmap" / "api" / "console"
LOCALE = CONSOLE / "locale"
TRANSLATED = [language for language in LANGUAGES if language != DEFAULT]
#: Words that stay as they are in Chinese too (names of things, not words of a sentence).
KEPT_TERMS = ("vUIN", "OpenID", "AppID", "rUIN", "CSRF", "OneBot", "Webhook", "API")
PLACEHOLDERS = {"todo", "tbd", "fixme", "xxx", "translate me", "待翻译", "翻译"}
_VALUE = re.compile(r"%\((\w+)\)s|%%")
#: HTML a message may hold (``<PLATFORM>`` in a message is a placeholder of a format, not HTML)
_TAG = re.compile(r"</?(?:a|abbr|b|br|code|em|i|kbd|span|strong|time)\b[^>]*>")
_CODE = re.compile(r"<code>.*?</code>")
_CJK = re.compile(r"[\u3400-\u9fff]")


def po_path(language: str) -> Path:
    return LOCALE / language.replace("-", "_") / "LC_MESSAGES" / f"{DOMAIN}.po"


def read(path: Path, locale: str | None = None) -> Catalog:
    with path.open("rb") as handle:
        return read_po(handle, locale=locale)


def messages(catalog: Catalog) -> dict[tuple[str | tuple[str, ...], str | None], Message]:
    return {(m.id, m.context): m for m in catalog if m.id}


def extracted(tmp_path: Path) -> Catalog:
    """What ``make catalogs``' extraction finds in the sources now."""
    out = tmp_path / "extracted.pot"
    babel_frontend.CommandLineInterface().run([
        "pybabel", "--quiet", "extract", "-F", str(ROOT / "pyproject.toml"),
        "--add-comments=TRANSLATORS:", "--no-wrap", "-o", str(out), str(CONSOLE)])
    return read(out)


def has_words(message: str) -> bool:
    """Whether ``message`` holds words to translate (not only values, tags, code and the
    names that stay as they are)."""
    text = _TAG.sub(" ", _CODE.sub(" ", _VALUE.sub(" ", message)))
    for term in KEPT_TERMS:
        text = re.sub(re.escape(term), " ", text, flags=re.IGNORECASE)
    return bool(re.search(r"[A-Za-z]{2,}", text))


def problems(message: Message) -> list[str]:
    """What is wrong with one translated message (empty: nothing)."""
    ids = message.id if isinstance(message.id, tuple) else (message.id,)
    strings = message.string if isinstance(message.string, tuple) else (message.string,)
    found = []
    if message.fuzzy:
        found.append("fuzzy: check the translation, then drop the flag")
    for text in strings:
        if not text or not text.strip():
            found.append("not translated")
            continue
        if text.strip().lower() in PLACEHOLDERS:
            found.append(f"a placeholder: {text!r}")
        if has_words(ids[0]) and (text == ids[0] or not _CJK.search(text)):
            found.append(f"not Chinese: {text!r}")
        if set(_VALUE.findall(text)) != set(_VALUE.findall(ids[-1])):
            found.append(f"its values differ: {_VALUE.findall(text)} vs the English")
        if sorted(_TAG.findall(text)) != sorted(_TAG.findall(ids[0])):
            found.append(f"its tags differ: {_TAG.findall(text)} vs {_TAG.findall(ids[0])}")
    return found


def test_the_template_holds_what_extraction_finds_now(tmp_path: Path) -> None:
    now = messages(extracted(tmp_path))
    kept = messages(read(LOCALE / f"{DOMAIN}.pot"))
    assert len(now) > 100
    added = sorted(str(key) for key in now.keys() - kept.keys())
    dropped = sorted(str(key) for key in kept.keys() - now.keys())
    assert (added, dropped) == ([], []), "run `make catalogs` (docs/translations.md)"
    for key, message in now.items():
        assert kept[key].flags == message.flags, key  # python-format, as extracted
        assert kept[key].auto_comments == message.auto_comments, key  # translators' notes


@pytest.mark.parametrize("language", TRANSLATED)
def test_every_message_has_its_translation(language: str) -> None:
    template = messages(read(LOCALE / f"{DOMAIN}.pot"))
    catalog = read(po_path(language), locale=language.replace("-", "_"))
    translated = messages(catalog)
    assert sorted(map(str, template.keys() - translated.keys())) == [], (
        "run `make catalogs`, then translate what it adds")
    assert sorted(map(str, translated.keys() - template.keys())) == [], (
        "run `make catalogs`: it drops what no page says any more")
    wrong = {str(key): problems(message) for key, message in translated.items()}
    assert {key: why for key, why in wrong.items() if why} == {}


@pytest.mark.parametrize("language", TRANSLATED)
def test_the_shipped_mo_is_the_po_compiled(language: str) -> None:
    compiled = io.BytesIO()
    write_mo(compiled, read(po_path(language), locale=language.replace("-", "_")))
    shipped = (CONSOLE / catalog_path(language)).read_bytes()
    def texts(mo: bytes) -> dict[object, str]:
        """The messages of a compiled catalog, its header (dates) left out."""
        catalog = gettext.GNUTranslations(io.BytesIO(mo))._catalog  # type: ignore[attr-defined]
        return {key: text for key, text in catalog.items() if key != ""}

    assert len(texts(shipped)) > 100
    assert texts(shipped) == texts(compiled.getvalue()), (
        "run `make catalogs` and commit the .mo it compiles")


def test_the_checks_can_fail() -> None:
    """The translation checks, on messages that each break one rule."""
    def checked(msgid: str, msgstr: str, fuzzy: bool = False) -> list[str]:
        return problems(Message(msgid, msgstr, flags={"fuzzy"} if fuzzy else ()))

    assert checked("Overview", "") == ["not translated"]
    assert checked("Overview", "TODO") == ["a placeholder: 'TODO'", "not Chinese: 'TODO'"]
    assert checked("Overview", "Overview") == ["not Chinese: 'Overview'"]
    assert checked("Overview", "概览", fuzzy=True)[0].startswith("fuzzy")
    assert checked("vUIN %(vuin)s is not known", "未知的 vUIN")[0].startswith(
        "its values differ")
    assert checked("No <code>a</code>.", "无 a。")[0].startswith("its tags differ")
    assert checked("Overview", "概览") == []
    assert checked("vUIN <span id=\"v\">%(v)s</span>", "vUIN <span id=\"v\">%(v)s</span>") == []


def test_the_console_reads_the_shipped_catalogs() -> None:
    catalogs = Catalogs()
    assert catalogs["zh-CN"].gettext("Overview") == "概览"
    assert catalogs["en"].gettext("Overview") == "Overview"
    assert catalogs["fr"].gettext("Overview") == "Overview"  # no such language: English
