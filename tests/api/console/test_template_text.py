"""No console template holds text a visitor reads outside the catalogs.

Every template is parsed by Jinja2 itself (with the i18n extension, as the console loads
them), so both branches of an ``{% if %}`` and every loop body are read, whatever a test
page would render. Two places can hold words a visitor reads:

- the template's own HTML: its text and the attributes a browser shows (``title``, ``alt``,
  ``placeholder``, ``aria-label``, a button input's ``value``). The HTML pieces are joined
  in document order with a mark where an expression or a ``{% trans %}`` block stands, and
  read with the standard library's HTML parser; a word left there is one nobody translates.
  Text inside ``<code>`` (config keys such as ``api.token``) and the project's name are not
  words to translate.
- the expressions: a string constant with a letter that reaches the page (``{{ "yes" }}``,
  ``{{ value or "none" }}``, ``{% set x = "Hello" %}``) unless it is inside ``_()`` /
  ``gettext()`` …, a comparison, a subscript or a dictionary's key (data names such as
  ``{"events in": _("…")}``), or a printf format (``"%.2f"``).

The checker is tested on small templates first, each with one kind of untranslated text, so
a template it passes is one it could have failed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import jinja2
import pytest
from jinja2 import nodes

TEMPLATES = (Path(__file__).resolve().parents[3] / "gensokyo_idmap" / "api" / "console"
             / "templates")
#: Where an expression or a {% trans %} block stands in the joined HTML.
MARK = "\x00"
#: Words that stay as they are in every language.
KEPT = ("gensokyo-idmap",)
GETTEXT = {"_", "gettext", "ngettext", "pgettext", "npgettext"}
VISIBLE_ATTRIBUTES = {"title", "alt", "placeholder", "aria-label", "aria-description"}
BUTTON_INPUTS = {"submit", "button", "reset"}
_PRINTF = re.compile(r"%(?:\([^)]*\))?[-+ #0]*\d*(?:\.\d+)?[sdifrxXeEgGc%]")
_LETTER = re.compile(r"[^\W\d_]")

ENVIRONMENT = jinja2.Environment(extensions=["jinja2.ext.i18n"], autoescape=True)


def has_words(text: str) -> bool:
    text = text.replace(MARK, " ")
    for kept in KEPT:
        text = text.replace(kept, " ")
    return bool(_LETTER.search(text))


def shown_text(text: str) -> str:
    return text.replace(MARK, "…").strip()


class _Reader(HTMLParser):
    """The visible text and attributes of the joined HTML, with where they are."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self.quiet = 0  # inside <code>, <script> or <style>

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("code", "script", "style"):
            self.quiet += 1
        shown = dict(attrs)
        for name, value in attrs:
            if value is None:
                continue
            visible = name in VISIBLE_ATTRIBUTES or (
                name == "value" and tag == "input" and shown.get("type") in BUTTON_INPUTS)
            if visible and has_words(value):
                self.found.append(f"<{tag} {name}={shown_text(value)!r}>")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("code", "script", "style") and self.quiet:
            self.quiet -= 1

    def handle_data(self, data: str) -> None:
        if not self.quiet and has_words(data):
            self.found.append(f"text {shown_text(data)!r}")


def _constants(node: nodes.Node) -> Iterator[str]:
    """The string constants of an expression that can reach the page."""
    if isinstance(node, nodes.Call) and isinstance(node.node, nodes.Name) and (
            node.node.name in GETTEXT):
        return
    if isinstance(node, nodes.Compare | nodes.Test):
        return
    if isinstance(node, nodes.Getitem):
        yield from _constants(node.node)
        return
    if isinstance(node, nodes.Pair):
        yield from _constants(node.value)  # a key names data, the value is shown
        return
    if isinstance(node, nodes.Const):
        if isinstance(node.value, str) and has_words(_PRINTF.sub(" ", node.value)):
            yield node.value
        return
    for child in node.iter_child_nodes():
        yield from _constants(child)


def untranslated(source: str) -> list[str]:
    """What a visitor would read of ``source`` that no catalog translates."""
    tree = ENVIRONMENT.parse(source)
    html: list[str] = []
    found: list[str] = []
    for output in tree.find_all(nodes.Output):
        for child in output.nodes:
            if isinstance(child, nodes.TemplateData):
                html.append(child.data)
            else:
                html.append(MARK)
                found += [f"constant {value!r}" for value in _constants(child)]
    for assign in tree.find_all((nodes.Assign, nodes.AssignBlock)):
        for child in assign.iter_child_nodes(exclude=("target",)):
            found += [f"constant {value!r}" for value in _constants(child)]
    reader = _Reader()
    reader.feed("".join(html))
    reader.close()
    return reader.found + found


@pytest.mark.parametrize("source, caught", [
    ("<p>Hello</p>", "text 'Hello'"),
    ("<h1>{{ _('Title') }} again</h1>", "text '… again'"),
    ('<img src="/x.svg" alt="a chart">', "<img alt='a chart'>"),
    ('<input type="submit" value="Go">', "<input value='Go'>"),
    ('<input title="{{ x }} items">', "<input title='… items'>"),
    ("{% if x %}<b>{{ x }}</b>{% else %}<i>nothing</i>{% endif %}", "text 'nothing'"),
    ("{{ 'yes' if x else _('no') }}", "constant 'yes'"),
    ("{{ value or 'none' }}", "constant 'none'"),
    ("{% set x = 'Hello' %}{{ x }}", "constant 'Hello'"),
    ("{% set names = {'a': 'Alpha'} %}{{ names.a }}", "constant 'Alpha'"),
    ("{% for n in xs %}<li>item {{ n }}</li>{% endfor %}", "text 'item …'"),
])
def test_the_checker_finds_text_outside_the_catalogs(source: str, caught: str) -> None:
    assert caught in untranslated(source), untranslated(source)


@pytest.mark.parametrize("source", [
    "<p>{{ _('Hello') }}</p>",
    "<p>{% trans %}Hello <code>api.token</code>{% endtrans %}</p>",
    "<p>{% trans n=3 %}{{ n }} item{% pluralize %}{{ n }} items{% endtrans %}</p>",
    '<img alt="{{ _("a chart") }}"><input type="hidden" name="confirm" value="yes">',
    "{% if page == 'overview' %}<a class='here'>{{ _('Overview') }}</a>{% endif %}",
    "{% set names = {'events in': _('events in')} %}{{ names['events in'] }}",
    "<p>{{ '%.2f' | format(x) }} — <code>qq.gateway</code> · gensokyo-idmap</p>",
    "<td>{{ '—' if x is none else x }}</td>{{ v | join(', ') }}",
])
def test_the_checker_passes_what_the_catalogs_translate(source: str) -> None:
    assert untranslated(source) == []


def test_no_template_holds_text_outside_the_catalogs() -> None:
    templates = sorted(TEMPLATES.glob("**/*.html"))
    assert len(templates) >= 9
    found = {path.name: untranslated(path.read_text("utf-8")) for path in templates}
    assert {name: text for name, text in found.items() if text} == {}
