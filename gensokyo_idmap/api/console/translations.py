"""The console's text in the visitor's language: the compiled gettext catalogs shipped in
the package (``locale/<ll_CC>/LC_MESSAGES/console.mo``) and their hook into the templates.

English is the source language: a page's English text is the catalog's message ids, so
English needs no catalog. Every other language of :data:`~.language.LANGUAGES` has a
compiled catalog, read once with the standard library's :mod:`gettext` (Babel only
extracts and compiles them: ``make catalogs``, docs/translations.md). A missing catalog is an
error when the console is built, not a page silently in English: the wheel is broken.

Templates use Jinja2's i18n extension (``{% trans %}`` and ``_()``) with new-style
gettext (values are given as ``%(name)s`` and escaped) and trimmed whitespace; the
functions it calls read the page's translations from the template's context
(``texts``), so one environment serves every language.
"""

from __future__ import annotations

import gettext
import io
from collections.abc import Mapping
from importlib import resources
from typing import Any, Final

import jinja2

from gensokyo_idmap.api.console.language import DEFAULT, LANGUAGES
from gensokyo_idmap.errors import IdmapError

__all__ = ["DOMAIN", "Catalogs", "catalog_path", "install"]

#: The gettext domain, and so the catalogs' file names.
DOMAIN: Final = "console"


def catalog_path(language: str) -> str:
    """Where a language's compiled catalog is, inside the package (``zh-CN`` →
    ``locale/zh_CN/LC_MESSAGES/console.mo``)."""
    return f"locale/{language.replace('-', '_')}/LC_MESSAGES/{DOMAIN}.mo"


def _load(language: str) -> gettext.NullTranslations:
    if language == DEFAULT:
        return gettext.NullTranslations()
    path = catalog_path(language)
    try:
        data = resources.files(__package__).joinpath(path).read_bytes()
    except OSError as err:
        raise IdmapError(f"the console's {language} catalog {path} is missing from the "
                         f"package ({err.strerror}): reinstall gensokyo-idmap") from None
    return gettext.GNUTranslations(io.BytesIO(data))


class Catalogs:
    """The translations of every console language, read once."""

    def __init__(self) -> None:
        self._by_language: Mapping[str, gettext.NullTranslations] = {
            language: _load(language) for language in LANGUAGES}

    def __getitem__(self, language: str) -> gettext.NullTranslations:
        return self._by_language.get(language) or self._by_language[DEFAULT]


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
