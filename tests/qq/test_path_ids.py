"""Ids that become a platform URL's path segment: only their documented forms pass, and
what passes can neither leave its segment nor add a query or fragment."""

from __future__ import annotations

from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.qq.path_ids import IdForm, path_segment

from ..conftest import ANY_TEXT

#: seen in real payloads and in the emulated platform
GOOD = {IdForm.GUILD_SIDE: ["8000000001", "144115218677563300", "0", "9" * 20],
        IdForm.OPENID: ["0F1E2D3C4B5A69788796A5B4C3D2E1F0", "user_1-b", "A" * 128],
        IdForm.MESSAGE_ID: ["ROBOT1.0_grpMsg0001", "08f1guild000001", "i-1",
                            "ROBOT1.0_a.b-c_d!!", "x" * 256]}
#: what a framework sent (issue: the first reached the C2C endpoint with the bot's token)
BAD = ["../../v2/users/0F1E2D3C4B5A69788796A5B4C3D2E1F0", "../../users/@me", "8000001?x=1#",
       "..", ".", "", "%2e%2e", "a/b", "a b", "a\n", "８０００", "a#", "a?b", "a%00", "x" * 257]
#: harmless as a segment, but not of that form
BAD_FOR = {IdForm.GUILD_SIDE: ["-1", "9" * 21, "1e3", "0x10"],
           IdForm.OPENID: ["A" * 129, "a.b", "a!"], IdForm.MESSAGE_ID: ["-1", "_a", ".a"]}


@pytest.mark.parametrize("form", list(IdForm))
def test_documented_forms_pass_unchanged(form: IdForm) -> None:
    for value in GOOD[form]:
        assert unquote(path_segment(form, "f", value)) == value


@pytest.mark.parametrize(("form", "value"), [(form, value) for form in IdForm
                                              for value in BAD + BAD_FOR[form]])
def test_hostile_ids_are_refused_naming_the_field(form: IdForm, value: str) -> None:
    with pytest.raises(BadInputError) as err:
        path_segment(form, "channel_id", value)
    assert err.value.field == "channel_id" and str(err.value).startswith("channel_id: ")


@pytest.mark.parametrize("value", [None, 8000000001, b"8000000001", ["1"]])
def test_only_text_is_an_id(value: object) -> None:
    with pytest.raises(BadInputError):
        path_segment(IdForm.GUILD_SIDE, "guild_id", value)


@given(form=st.sampled_from(list(IdForm)), value=ANY_TEXT | st.text(
    alphabet="0123456789abcXYZ._-~!=+/?#%:@ \n", max_size=12))
def test_whatever_passes_stays_one_segment(form: IdForm, value: str) -> None:
    try:
        segment = path_segment(form, "f", value)
    except BadInputError:
        return
    assert segment not in ("", ".", "..")
    assert not set(segment) & set("/?#\\ \t\r\n")
    assert unquote(segment) == value and value.isascii()
