"""The console's text in the visitor's language: the compiled gettext catalogs shipped in
the package (``locale/<ll_CC>/LC_MESSAGES/console.mo``); their hook into the templates is
:func:`.rendering.install`.

English is the source language: a page's English text is the catalog's message ids, so
English needs no catalog. Every other language of :data:`~.language.LANGUAGES` has a
compiled catalog, read once with the standard library's :mod:`gettext` (Babel only
extracts and compiles them: ``make catalogs``, docs/translations.md). A missing catalog is an
error when the console is built, not a page silently in English: the wheel is broken.
"""

from __future__ import annotations

import gettext
import io
from collections.abc import Mapping
from importlib import resources
from typing import Final

from gensokyo_idmap.api.console.language import DEFAULT, LANGUAGES
from gensokyo_idmap.errors import IdmapError

__all__ = ["DOMAIN", "Catalogs", "catalog_path"]

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
