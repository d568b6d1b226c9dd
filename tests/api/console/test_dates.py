"""A moment on a console page: ``<time datetime=ISO>`` in UTC with the zone named."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap.api.console.dates import NONE, time_tag


def test_a_moment_is_a_time_element_in_utc() -> None:
    assert time_tag(1_700_000_000.75) == (
        '<time datetime="2023-11-14T22:13:20Z">2023-11-14 22:13:20 UTC</time>')
    assert time_tag(0) == '<time datetime="1970-01-01T00:00:00Z">1970-01-01 00:00:00 UTC</time>'


@pytest.mark.parametrize("value", [None, float("nan"), float("inf"), 1e20, True, "17", -1e13])
def test_no_moment_is_a_dash(value: object) -> None:
    assert time_tag(value) == NONE  # type: ignore[arg-type]


@given(st.floats(min_value=0, max_value=4_102_444_800))  # up to 2100
def test_the_text_and_the_attribute_name_one_moment(seconds: float) -> None:
    found = re.fullmatch(r'<time datetime="(\S+)">(.+) UTC</time>', str(time_tag(seconds)))
    assert found
    moment = datetime.strptime(found.group(1), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert found.group(2) == moment.strftime("%Y-%m-%d %H:%M:%S")
    assert -1e-3 < seconds - moment.timestamp() < 1  # the second it falls in (µs rounding)
