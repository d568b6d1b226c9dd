"""Who may call what (api/access.py, pure) and when the daemon refuses to listen."""

from __future__ import annotations

import pytest

from gensokyo_idmap.api.access import AccessPolicy
from gensokyo_idmap.hostport import is_loopback_host
from gensokyo_idmap.ops.config_check import check_listen
from gensokyo_idmap.errors import BadInputError


def test_loopback_hosts() -> None:
    assert all(map(is_loopback_host, ["127.0.0.1", "127.9.9.9", "::1", "[::1]", "localhost"]))
    assert not any(map(is_loopback_host, ["0.0.0.0", "::", "10.0.0.5", "example.org", ""]))


def test_peers_allowed_are_loopback_and_the_listed_networks() -> None:
    policy = AccessPolicy("", ["10.1.0.0/16", "fd00::/8"])
    assert policy.peer_allowed("127.0.0.1") and policy.peer_allowed("::1")
    assert policy.peer_allowed("10.1.2.3") and policy.peer_allowed("fd00::5")
    assert policy.peer_allowed("::ffff:10.1.0.9")  # v4-mapped
    assert not policy.peer_allowed("10.2.0.1") and not policy.peer_allowed("192.168.1.1")
    assert not policy.peer_allowed(None) and not policy.peer_allowed("not an address")
    assert not AccessPolicy("", []).peer_allowed("192.168.1.1")


def test_bearer_token_is_exact() -> None:
    policy = AccessPolicy("s3cret", [])
    assert policy.has_token and policy.token_ok("Bearer s3cret")
    assert policy.token_ok("bearer s3cret")
    for header in (None, "", "Bearer", "Bearer s3cre", "Bearer s3cret2", "Basic s3cret",
                   "s3cret", "Bearer \u00e9"):
        assert not policy.token_ok(header), header
    assert not AccessPolicy("", []).token_ok("Bearer ")


def test_only_a_bearer_header_with_a_token_presents_one() -> None:
    """What the failure limit counts as a guess: a token after ``Bearer`` (any case), never
    an absent header, another scheme or an empty token."""
    for header, presented in (("Bearer abc", "abc"), ("bearer  abc ", "abc"),
                              ("BEARER \udcff", "\udcff"), (None, None), ("", None),
                              ("Bearer", None), ("Bearer   ", None), ("Basic abc", None),
                              ("abc", None), ("Token abc", None)):
        assert AccessPolicy.bearer(header) == presented, header
    policy = AccessPolicy("s3cret", [])
    assert policy.token_is("s3cret") and not policy.token_is("s3cre")
    assert not AccessPolicy("", []).token_is("")


def test_non_loopback_listener_needs_a_token_or_networks() -> None:
    check_listen("127.0.0.1:15631", "", [])
    check_listen("0.0.0.0:15631", "tok", [])
    check_listen("0.0.0.0:15631", "", ["10.0.0.0/8"])
    check_listen("", "", [])
    with pytest.raises(BadInputError) as err:
        check_listen("0.0.0.0:15631", "", [])
    assert err.value.field == "api.listen"
    assert "api.token" in err.value.message and "api.getid_allow" in err.value.message
