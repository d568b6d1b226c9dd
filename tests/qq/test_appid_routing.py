"""qq.appid_routing.callback_bot: which bot a webhook callback is for (issue 34.2)."""

from __future__ import annotations

from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.qq.appid_routing import callback_bot


def test_one_bot_gets_every_callback_and_checks_the_header_itself() -> None:
    for header in (None, "102000001", "999"):
        assert callback_bot(["102000001"], header) == "102000001"


def test_several_bots_are_picked_by_the_header() -> None:
    assert callback_bot(["102000001", "102000002"], "102000002") == "102000002"
    assert callback_bot(["102000001", "102000002"], "102000001") == "102000001"


def test_an_unknown_or_missing_appid_among_several_is_refused_naming_them() -> None:
    unknown = callback_bot(["102000001", "102000002"], "102000003")
    assert isinstance(unknown, BadInputError) and unknown.field == "X-Bot-Appid"
    assert "is no bot of this daemon (it serves 102000001, 102000002)" in unknown.reason
    missing = callback_bot(["102000001", "102000002"], None)
    assert isinstance(missing, BadInputError)
    assert "missing: this webhook serves several bots (102000001, 102000002)" in missing.reason
