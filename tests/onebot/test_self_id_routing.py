"""onebot.self_id_routing.choose_bot: which bot a forward-WS or HTTP API request is for
(issue 34.3): the path prefix, the X-Self-ID header, one bot as before, refusals that name
the self_ids."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap.onebot.self_id_routing import Chosen, Refused, choose_bot

TWO = [10001, 20002]


@pytest.mark.parametrize(("path", "header", "chosen"), [
    ("/10001/", None, Chosen(10001, "/")),
    ("/10001", None, Chosen(10001, "/")),
    ("/20002/api", None, Chosen(20002, "/api")),
    ("/20002/event/", None, Chosen(20002, "/event/")),
    ("/20002/send_msg", None, Chosen(20002, "/send_msg")),
    ("/", "20002", Chosen(20002, "/")),
    ("/api", " 10001 ", Chosen(10001, "/api")),
    ("/10001/api", "10001", Chosen(10001, "/api")),  # both, agreeing
])
def test_several_bots_are_chosen_by_prefix_or_header(path: str, header: str | None,
                                                     chosen: Chosen) -> None:
    assert choose_bot(TWO, header, path) == chosen


@pytest.mark.parametrize(("path", "header", "status", "says"), [
    ("/", None, 400, "several bots (self_ids: 10001, 20002): choose one with the X-Self-ID "
                     "header or the path prefix /<self_id>/"),
    ("/api", None, 400, "self_ids: 10001, 20002"),
    ("/send_msg", None, 400, "self_ids: 10001, 20002"),
    ("/30003/api", None, 404, "no bot with self_id 30003 here (self_ids: 10001, 20002)"),
    ("/", "30003", 400, "X-Self-ID '30003' is no bot of this daemon (self_ids: 10001, 20002)"),
    ("/", "bot", 400, "X-Self-ID 'bot' is no bot"),
    ("/", "", 400, "X-Self-ID '' is no bot"),
    ("/10001/", "20002", 400, "X-Self-ID 20002 and the path's /10001/ name different bots"),
])
def test_every_refusal_names_why_and_the_self_ids(path: str, header: str | None, status: int,
                                                  says: str) -> None:
    refused = choose_bot(TWO, header, path)
    assert isinstance(refused, Refused)
    assert refused.status == status and says in refused.reason


@pytest.mark.parametrize(("path", "header"), [
    ("/", None), ("/api", None), ("/event/", None), ("/send_msg", None),
    ("/", "999"),  # one bot: the header is not read, as before
    ("/", "not a number"),
])
def test_one_bot_takes_every_request_as_before(path: str, header: str | None) -> None:
    assert choose_bot([10001], header, path) == Chosen(10001, path)


def test_one_bot_also_takes_its_own_prefix_and_refuses_another() -> None:
    assert choose_bot([10001], None, "/10001/api") == Chosen(10001, "/api")
    refused = choose_bot([10001], None, "/20002/api")
    assert isinstance(refused, Refused) and refused.status == 404


@given(self_ids=st.lists(st.integers(1, 2**40), min_size=1, max_size=5, unique=True),
       header=st.none() | st.text(max_size=12),
       path=st.sampled_from(["/", "/api", "/event", "/send_msg", "/x/y"]),
       prefix=st.none() | st.integers(0, 2**40))
def test_a_choice_is_always_a_served_bot_and_the_rest_of_the_path(
        self_ids: list[int], header: str | None, path: str, prefix: int | None) -> None:
    full = path if prefix is None else f"/{prefix}{path}"
    result = choose_bot(self_ids, header, full)
    if isinstance(result, Chosen):
        assert result.self_id in self_ids
        assert result.path == path and result.path.startswith("/")
        if prefix is not None:
            assert result.self_id == prefix
    else:
        assert result.status in (400, 404)
        assert all(str(self_id) in result.reason for self_id in self_ids)
        if len(self_ids) > 1 and prefix is None and header is None:
            assert result.status == 400
