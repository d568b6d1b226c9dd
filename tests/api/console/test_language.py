"""Which language a console page is written in: the cookie's choice, else Accept-Language
(weights, order, ranges we do not speak), else English."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap.api.console.language import (
    DEFAULT,
    LANGUAGES,
    from_accept_language,
    pick,
    supported,
)


@pytest.mark.parametrize("header, wanted", [
    ("zh-CN,zh;q=0.9,en;q=0.8", "zh-CN"),
    ("en-US,en;q=0.9,zh-CN;q=0.8", "en"),
    ("zh", "zh-CN"),
    ("ZH-hans-cn", "zh-CN"),
    ("zh-TW,zh-HK;q=0.9", "zh-CN"),  # the only Chinese pages there are
    ("fr-FR,fr;q=0.9,zh;q=0.5,en;q=0.4", "zh-CN"),  # the first of ours by weight
    ("en;q=0.2, zh-CN;q=0.7", "zh-CN"),  # the weight decides, not the order
    ("zh-CN;q=0.5, en;q=0.5", "zh-CN"),  # among equals, the first named
    ("*", "en"),
    ("de, *;q=0.1", "en"),
    ("zh;q=0, en;q=0.1", "en"),  # q=0: not acceptable
    ("  zh-CN ; q = 0.8 ,en;q=0.3", "zh-CN"),
])
def test_accept_language_picks_the_highest_weight_we_speak(header: str, wanted: str) -> None:
    assert from_accept_language(header) == wanted


@pytest.mark.parametrize("header", [None, "", "fr", "de-DE,ja;q=0.5", "zh;q=0",
                                    "zh;q=2", "zh;q=abc", "zh-;q=1", ";;;", "zh_CN"])
def test_a_header_naming_nothing_we_speak_or_unreadable_gives_none(header: str | None
                                                                   ) -> None:
    assert from_accept_language(header) is None


def test_the_cookie_wins_when_it_names_one_of_ours() -> None:
    assert pick("en-US", "zh-CN") == "zh-CN"
    assert pick("zh-CN", "en") == "en"
    assert pick("zh-CN", "fr") == "zh-CN"  # not ours: the header decides
    assert pick(None, "zh-cn") == DEFAULT  # the cookie holds exactly what the switch wrote
    assert pick(None, None) == DEFAULT


def test_supported_reads_ranges() -> None:
    assert supported("zh-Hant-TW") == "zh-CN" and supported("en-GB") == "en"
    assert supported("*") == "en" and supported("ja") is None and supported("") is None


@given(st.text(max_size=300), st.one_of(st.none(), st.text(max_size=20)))
def test_any_header_and_cookie_give_a_language_of_ours(header: str, cookie: str | None
                                                       ) -> None:
    assert pick(header, cookie) in LANGUAGES


tag = st.sampled_from(["en", "en-US", "zh", "zh-CN", "fr", "de-DE", "ja", "*"])
weight = st.sampled_from(["", ";q=1", ";q=0.9", ";q=0.5", ";q=0.123", ";q=0"])


@given(st.lists(st.tuples(tag, weight), min_size=1, max_size=6))
def test_the_pick_is_the_heaviest_range_we_speak(ranges: list[tuple[str, str]]) -> None:
    header = ", ".join(t + w for t, w in ranges)
    weights = [(float(w[3:]) if w else 1.0, -n, supported(t))
               for n, (t, w) in enumerate(ranges)]
    ours = [entry for entry in weights if entry[2] is not None and entry[0] > 0]
    assert from_accept_language(header) == (max(ours)[2] if ours else None)
