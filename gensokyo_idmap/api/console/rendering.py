"""The console's pages rendered from its templates (Jinja2), in the visitor's language.

This module is imported at the first page a visitor opens, not with the console
(:meth:`~.pages.Console._templates`): Jinja2 and MarkupSafe were 2.3 MiB of an idle
daemon's memory (``bench/idle_imports.py``), and a daemon serves its frameworks, ``/v1`` and
``/metrics`` for weeks without anyone opening the console. Once a page was shown they stay.

Jinja2 is used directly, not through aiohttp-jinja2, whose ``setup`` puts the environment
into the application before it starts (so it would load with the console): escaped by
default, a missing value an error, the i18n extension; a page is ``text/html`` in UTF-8.

Templates use Jinja2's i18n extension (``{% trans %}`` and ``_()``) with new-style gettext
(values are given as ``%(name)s`` and escaped) and trimmed whitespace; the functions it
calls read the page's translations from the template's context (``texts``,
:class:`~.translations.Catalogs`), so one environment serves every language.
"""

from __future__ import annotations

import gettext
from collections.abc import Callable, Mapping
from typing import Any

import jinja2
from aiohttp import web

__all__ = ["Templates", "install"]


@jinja2.pass_context
def _gettext(context: jinja2.runtime.Context, message: str) -> str:
    texts: gettext.NullTranslations = context["texts"]
    return texts.gettext(message)


@jinja2.pass_context
def _ngettext(context: jinja2.runtime.Context, singular: str, plural: str, n: int) -> str:
    texts: gettext.NullTranslations = context["texts"]
    return texts.ngettext(singular, plural, n)


@jinja2.pass_context
def _pgettext(context: jinja2.runtime.Context, where: str, message: str) -> str:
    texts: gettext.NullTranslations = context["texts"]
    return texts.pgettext(where, message)


@jinja2.pass_context
def _npgettext(context: jinja2.runtime.Context, where: str, singular: str, plural: str,
               n: int) -> str:
    texts: gettext.NullTranslations = context["texts"]
    return texts.npgettext(where, singular, plural, n)


def install(environment: jinja2.Environment) -> None:
    """Make ``environment``'s i18n extension translate with each page's ``texts``."""
    environment.policies["ext.i18n.trimmed"] = True
    installer: Any = environment
    installer.install_gettext_callables(_gettext, _ngettext, newstyle=True,
                                        pgettext=_pgettext, npgettext=_npgettext)


class Templates:
    """The package's templates, with the console's ``filters`` and the i18n hook."""

    def __init__(self, filters: Mapping[str, Callable[..., Any]]) -> None:
        self.environment = jinja2.Environment(
            loader=jinja2.PackageLoader(__package__, "templates"), autoescape=True,
            undefined=jinja2.StrictUndefined, extensions=["jinja2.ext.i18n"])
        self.environment.filters.update(filters)
        install(self.environment)

    def render(self, template: str, context: Mapping[str, Any], status: int = 200
               ) -> web.Response:
        """``template`` rendered with ``context``, as an HTML answer."""
        text = self.environment.get_template(template).render(context)
        return web.Response(text=text, status=status, content_type="text/html",
                            charset="utf-8")
