"""bots.resolve_bots: each bot's settings, the shared sections under its own keys
(issue 34.1)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pydantic import SecretStr

from gensokyo_idmap.bots import resolve_bots
from gensokyo_idmap.config import Config

SECRET = "Zq9-DISTINCT-bot-secret-7Hx2"


def config(**sections: Any) -> Config:
    return Config.model_validate(sections)


def test_bot_is_a_list_of_one_with_every_name_it_always_had() -> None:
    [bot] = resolve_bots(config(
        bot={"app_id": "102000001", "secret": SECRET},
        onebot={"self_id": 42, "access_token": "t", "reverse_ws": ["ws://a/ws"],
                "http_post": [{"url": "http://p/"}]},
        qq={"gateway": True}))
    assert (bot.key, bot.app_id, bot.self_id, bot.listed) == ("bot", "102000001", 42, False)
    assert bot.secret_value == SECRET and bot.platform_ready and bot.qq.gateway
    assert bot.reverse_ws == (("ws://a/ws", "t"),)
    assert [post.url for post in bot.http_post] == ["http://p/"]
    assert bot.outbox_name("reverse_ws", "ws://a/ws") == "reverse_ws ws://a/ws"
    assert bot.session_file == "gateway-session.json"


def test_an_empty_config_is_one_bot_without_a_platform() -> None:
    [bot] = resolve_bots(Config())
    assert (bot.app_id, bot.self_id, bot.platform_ready) == ("", 1, False)


def test_each_entry_takes_the_shared_sections_under_its_own_keys() -> None:
    shared_post = {"url": "http://shared/"}
    first, second = resolve_bots(config(
        qq={"gateway": True, "intents": 7, "api_base": "https://api.example"},
        onebot={"access_token": "shared-token", "reverse_ws": ["ws://shared/ws"],
                "http_post": [shared_post]},
        bots=[{"app_id": "102000001", "secret": SECRET},
              {"app_id": "102000002", "self_id": 9,
               "qq": {"api_base": "https://sandbox.example", "shard": [1, 2]},
               "onebot": {"reverse_ws": [{"url": "ws://own/ws", "access_token": "own"}],
                          "http_post": []}}]))
    assert (first.app_id, first.self_id, first.key) == ("102000001", 102000001, "bots.0")
    assert first.qq.api_base == "https://api.example" and first.qq.shard == (0, 1)
    assert first.reverse_ws == (("ws://shared/ws", "shared-token"),)
    assert [post.url for post in first.http_post] == ["http://shared/"]
    assert (second.app_id, second.self_id, second.key) == ("102000002", 9, "bots.1")
    assert not second.platform_ready  # no secret
    # its own keys over the shared ones, the rest shared
    assert second.qq.api_base == "https://sandbox.example" and second.qq.shard == (1, 2)
    assert second.qq.gateway is True and second.qq.intents == 7
    assert second.reverse_ws == (("ws://own/ws", "own"),) and second.http_post == ()


def test_listed_bots_keep_their_names_apart() -> None:
    first, second = resolve_bots(config(bots=[{"app_id": "102000001"},
                                              {"app_id": "102000002", "self_id": 9}]))
    assert first.outbox_name("reverse_ws", "ws://x/") == "reverse_ws ws://x/ (self_id 102000001)"
    assert second.outbox_name("http_post", "http://x/") == "http_post http://x/ (self_id 9)"
    assert first.session_file == "gateway-session-102000001.json"
    assert second.session_file == "gateway-session-102000002.json"


def test_no_secret_or_token_in_a_bots_repr() -> None:
    [bot] = resolve_bots(config(bots=[{"app_id": "1", "secret": SECRET}],
                                onebot={"access_token": SECRET, "reverse_ws": ["ws://a/"]}))
    assert SECRET not in repr(bot) and SECRET not in bot.describe()
    assert bot.secret == SecretStr(SECRET)


@given(st.lists(st.integers(1, 10**6), min_size=1, max_size=6, unique=True))
def test_every_bot_is_resolved_once_in_its_order(app_ids: list[int]) -> None:
    bots = resolve_bots(config(bots=[{"app_id": str(n)} for n in app_ids]))
    assert [bot.app_id for bot in bots] == [str(n) for n in app_ids]
    assert [bot.self_id for bot in bots] == app_ids
    assert len({bot.session_file for bot in bots}) == len(app_ids)
    assert len({bot.outbox_name("reverse_ws", "ws://x/") for bot in bots}) == len(app_ids)
