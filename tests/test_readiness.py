"""The readiness rule: a snapshot of the daemon's parts in, what is missing out (pure)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap.readiness import GatewayReadiness, PlatformReadiness, missing

READY = PlatformReadiness(app_id=True, secret=True, token_obtained=True, webhook=True)


def test_a_configured_daemon_with_a_token_and_working_stores_is_ready() -> None:
    assert missing(READY) == []
    assert missing(PlatformReadiness(app_id=True, secret=True, token_obtained=True,
                                     gateway_wanted=True,
                                     gateway=GatewayReadiness(connected=True))) == []


def test_no_secret_is_named_and_nothing_else_about_the_platform_is_asked() -> None:
    reasons = missing(PlatformReadiness(app_id=True, secret=False, webhook=True))
    assert len(reasons) == 1 and "bot.secret not set" in reasons[0]
    assert "bot.app_id" not in reasons[0]
    both = missing(PlatformReadiness(app_id=False, secret=False, gateway_wanted=True))
    assert len(both) == 1 and "bot.app_id and bot.secret not set" in both[0]


def test_the_token_is_missing_until_obtained_and_a_failure_says_why() -> None:
    waiting = PlatformReadiness(app_id=True, secret=True, webhook=True)
    assert missing(waiting) == ["platform access token not obtained yet"]
    refused = PlatformReadiness(app_id=True, secret=True, webhook=True, token_obtained=True,
                                token_failure="access token refused: code 100016")
    assert missing(refused) == ["platform access token not obtained: access token refused: "
                                "code 100016"]


def test_the_gateway_is_needed_once_wanted_with_its_state_named() -> None:
    def gateway(state: GatewayReadiness | None) -> list[str]:
        return missing(PlatformReadiness(app_id=True, secret=True, token_obtained=True,
                                         gateway_wanted=True, gateway=state))

    assert gateway(None) == ["gateway not connected: its URL is not discovered yet"]
    assert gateway(GatewayReadiness(connected=False)) == [
        "gateway not connected: no session established"]
    assert gateway(GatewayReadiness(connected=True, paused=True)) == [
        "gateway paused: events cannot be processed now"]
    assert gateway(GatewayReadiness(connected=False, fatal="closed with code 4914")) == [
        "gateway stopped: closed with code 4914"]


def test_no_event_source_and_backend_problems_are_named() -> None:
    quiet = PlatformReadiness(app_id=True, secret=True, token_obtained=True)
    assert missing(quiet) == ["no event source: neither webhook.listen nor qq.gateway is on"]
    assert missing(READY, ["redis at 127.0.0.1:1: no answer within 1 s"]) == [
        "redis at 127.0.0.1:1: no answer within 1 s"]
    assert missing(None, ["disk full"]) == ["disk full"]  # platform side unknown: unsaid


@given(app_id=st.booleans(), secret=st.booleans(), obtained=st.booleans(),
       failure=st.none() | st.text(min_size=1, max_size=20), webhook=st.booleans(),
       wanted=st.booleans(),
       gateway=st.none() | st.builds(GatewayReadiness, st.booleans(), st.booleans(),
                                     st.none() | st.text(min_size=1, max_size=20)),
       backends=st.lists(st.text(min_size=1, max_size=20), max_size=3))
def test_ready_exactly_when_every_part_is(app_id: bool, secret: bool, obtained: bool,
                                          failure: str | None, webhook: bool, wanted: bool,
                                          gateway: GatewayReadiness | None,
                                          backends: list[str]) -> None:
    state = PlatformReadiness(app_id, secret, obtained, failure, webhook, wanted, gateway)
    gateway_ok = not wanted or (gateway is not None and gateway.connected
                                and not gateway.paused and gateway.fatal is None)
    ready = (app_id and secret and obtained and failure is None and gateway_ok
             and (webhook or wanted) and not backends)
    reasons = missing(state, backends)
    assert (reasons == []) == ready
    assert reasons[len(reasons) - len(backends):] == backends  # the backends' own words


def test_each_bot_of_several_is_named_with_its_own_keys() -> None:
    """Issue 34.5: a daemon of several bots is ready when every bot is; each reason names
    its bot, and the keys it names are the bot's own (``bots.1.secret``)."""
    first = PlatformReadiness(app_id=True, secret=True, token_obtained=True, webhook=True,
                              key="bots.0", name="bots.0 (AppID 102000001)")
    second = PlatformReadiness(app_id=True, secret=False, webhook=True, key="bots.1",
                               name="bots.1 (AppID 102000002)")
    waiting = PlatformReadiness(app_id=True, secret=True, gateway_wanted=True, key="bots.2",
                                name="bots.2 (AppID 102000003)", token_obtained=True)
    assert missing([first]) == []
    assert missing([first, second, waiting], ["disk full"]) == [
        "bots.1 (AppID 102000002): bots.1.secret not set: callbacks cannot be verified and "
        "the platform cannot be asked for an access token",
        "bots.2 (AppID 102000003): gateway not connected: its URL is not discovered yet",
        "disk full"]
    assert missing(PlatformReadiness(app_id=False, secret=True, key="bots.0")) == [
        "bots.0.app_id not set: callbacks cannot be verified and the platform cannot be "
        "asked for an access token"]  # one bot of bots: no name before its reasons


@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=4))
def test_several_bots_are_ready_exactly_when_each_is(bots: list[tuple[bool, bool]]) -> None:
    states = [PlatformReadiness(app_id=True, secret=True, token_obtained=obtained,
                                webhook=webhook, key=f"bots.{n}", name=f"bots.{n}")
              for n, (obtained, webhook) in enumerate(bots)]
    reasons = missing(states)
    assert (reasons == []) == all(missing(state) == [] for state in states)
    assert reasons == [reason for state in states for reason in missing(state)]
    assert all(reason.startswith("bots.") for reason in reasons)
