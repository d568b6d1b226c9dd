"""The domain's errors as the console shows them: in English exactly as the domain wrote
them, in Chinese through the catalog, each pattern matching what the domain really says."""

from __future__ import annotations

import ast
import gettext
import re
from pathlib import Path

import pytest

from gensokyo_idmap.api.console.error_text import FIELDS, KNOWN, error_text
from gensokyo_idmap.api.console.translations import Catalogs
from gensokyo_idmap.errors import BadInputError, IdmapError, NotFoundError
from gensokyo_idmap.identity import parse_identity_input, parse_vuin
from gensokyo_idmap.runtime.msgid import check_virtual_id

PACKAGE = Path(__file__).resolve().parents[3] / "gensokyo_idmap"
ENGLISH = gettext.NullTranslations()
CHINESE = Catalogs()["zh-CN"]
CJK = re.compile(r"[\u4e00-\u9fff]")


def raised(call: object, *args: object) -> IdmapError:
    with pytest.raises(IdmapError) as caught:
        call(*args)  # type: ignore[operator]
    return caught.value


REAL = [raised(parse_vuin, "abc", "new"), raised(parse_vuin, "0", "old"),
        raised(parse_vuin, "", "vuin"),
        raised(parse_identity_input, "12345", "102000001", "key"),
        raised(parse_identity_input, " ", "102000001", "key"),
        raised(parse_identity_input, "ABC", None, "key"),
        raised(parse_identity_input, "-5", "102000001", "q"),
        raised(parse_identity_input, "rUIN-QQ", "102000001", "q"),
        raised(check_virtual_id, "0", "virtual id"),
        NotFoundError("vUIN 987654 is not known"),
        NotFoundError("vUIN 5 has no identities to move"),
        NotFoundError("virtual message id 17 is unknown or expired"),
        NotFoundError("real message id 'x-1' is unknown or expired")]


@pytest.mark.parametrize("err", REAL, ids=lambda err: err.message)
def test_english_is_the_domains_message_and_chinese_is_chinese(err: IdmapError) -> None:
    assert error_text(err, ENGLISH) == err.message
    shown = error_text(err, CHINESE)
    reason = err.reason if isinstance(err, BadInputError) else err.message
    assert CJK.search(shown) and reason not in shown, shown


def test_an_unknown_message_is_shown_as_the_domain_wrote_it() -> None:
    err = IdmapError("the store is on fire")
    assert error_text(err, CHINESE) == "the store is on fire"
    bad = BadInputError("colour", "x", "must be a colour")
    assert error_text(bad, CHINESE) == "colour：must be a colour（收到的是 'x'）"


def _domain_strings() -> set[str]:
    """Every string constant of the package outside the console (f-strings' constant
    parts too)."""
    found: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        if "console" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
    return found


def test_each_known_pattern_is_something_the_domain_says() -> None:
    """A pattern whose English the domain no longer writes would silently stop translating:
    each pattern's fixed text is in the package's source (a string, or the fixed parts of
    an f-string; a message split over lines is joined by Python into one constant)."""
    strings = _domain_strings()
    source = "\n".join(strings)
    for pattern, message in KNOWN:
        # the fixed text between the values (and between brackets: an f-string may add a
        # bracketed part to a message held apart, as "… (HTTP 403)")
        fixed = [part.strip() for part in re.split(r"%\(\w+\)s|(?<=\S) \(", message)
                 if part.strip(" ()")]
        assert all(part in source for part in fixed), (pattern.pattern, fixed)
        examples = [message % {name: value for name in pattern.groupindex}
                    for value in ("1", "'x-1'")]
        assert any(pattern.fullmatch(example) for example in examples), pattern.pattern


def test_the_fields_are_the_consoles_form_fields() -> None:
    pages = "".join((PACKAGE / "api" / "console" / name).read_text("utf-8")
                    for name in ("pages.py", "browse_pages.py", "operate_pages.py"))
    for field in FIELDS:
        assert f'"{field}"' in pages, field
