"""api/forwarded.py (pure): addresses as proxies write them, X-Forwarded-For walked from the
right past trusted hops only, CIDR matching, X-Forwarded-Proto from a trusted peer only."""

from __future__ import annotations

import ipaddress

from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap.api.forwarded import (
    TrustedProxies,
    in_networks,
    parse_address,
    parse_forwarded_for,
    parse_networks,
)

ipv4 = st.ip_addresses(v=4)
ipv6 = st.ip_addresses(v=6).filter(lambda a: a.ipv4_mapped is None)
addresses = st.one_of(ipv4, ipv6)
ports = st.integers(0, 65535)


def spelled(address: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int | None,
            brackets: bool) -> str:
    if address.version == 4:
        return f"{address}:{port}" if port is not None else str(address)
    if port is not None:
        return f"[{address}]:{port}"
    return f"[{address}]" if brackets else str(address)


@given(addresses, st.none() | ports, st.booleans())
def test_an_address_reads_back_in_every_spelling(address: ipaddress.IPv4Address,
                                                 port: int | None, brackets: bool) -> None:
    assert parse_address(spelled(address, port, brackets)) == address
    assert parse_address(f"  {spelled(address, port, brackets)} ") == address


@given(ipv4)
def test_an_ipv4_mapped_address_is_its_ipv4_address(address: ipaddress.IPv4Address) -> None:
    assert parse_address(f"::ffff:{address}") == address


@given(st.text(max_size=40))
def test_any_text_is_an_address_or_none_never_an_error(text: str) -> None:
    parsed = parse_address(text)
    assert parsed is None or isinstance(parsed, ipaddress.IPv4Address | ipaddress.IPv6Address)


def test_what_is_not_an_address() -> None:
    for text in (None, "", "host.example", "1.2.3.4:", "1.2.3.4:http", "1.2.3.4:123456",
                 "[::1", "[::1]x", "[::1]:", "1.2.3.4:٣", "::1:80:x", "1.2.3"):
        assert parse_address(text) is None, text
    assert parse_address("fe80::1%eth0") == ipaddress.ip_address("fe80::1")


@given(st.lists(st.tuples(addresses, st.none() | ports), max_size=8), st.data())
def test_forwarded_for_reads_every_hop_across_headers(
        hops: list[tuple[ipaddress.IPv4Address, int | None]], data: st.DataObject) -> None:
    items = [spelled(address, port, False) for address, port in hops]
    cuts = sorted(data.draw(st.lists(st.integers(0, len(items)), max_size=3)))
    headers = [", ".join(items[a:b]) for a, b in zip([0, *cuts], [*cuts, len(items)],
                                                      strict=True)]
    assert parse_forwarded_for(headers) == tuple(address for address, _ in hops)


def test_forwarded_for_skips_empty_elements_and_marks_garbage() -> None:
    assert parse_forwarded_for(["1.2.3.4,, ,5.6.7.8", ""]) == (
        ipaddress.ip_address("1.2.3.4"), ipaddress.ip_address("5.6.7.8"))
    assert parse_forwarded_for(["unknown, 1.2.3.4"]) == (None, ipaddress.ip_address("1.2.3.4"))


@given(st.data())
def test_cidr_matching_is_the_prefix_of_the_address_bits(data: st.DataObject) -> None:
    version = data.draw(st.sampled_from([4, 6]))
    bits = 32 if version == 4 else 128
    prefix = data.draw(st.integers(0, bits))
    base = data.draw(st.ip_addresses(v=version))
    address = data.draw(st.ip_addresses(v=version) | st.just(base))
    networks = parse_networks([f"{base}/{prefix}"])
    expected = int(address) >> (bits - prefix) == int(base) >> (bits - prefix)
    assert in_networks(address, networks) is expected
    other = data.draw(st.ip_addresses(v=10 - version))  # the other IP version: never inside
    assert not in_networks(other, networks)


def reference_client(peer: str, hops: list[str], trusted: set[str]) -> str:
    """The definition, written plainly: right to left, past trusted addresses only."""
    if peer not in trusted:
        return peer
    client = peer
    for hop in reversed(hops):
        client = hop
        if hop not in trusted:
            break
    return client


POOL = [f"10.0.0.{n}" for n in range(1, 7)]


@given(st.sampled_from(POOL), st.lists(st.sampled_from(POOL), max_size=6),
       st.sets(st.sampled_from(POOL)))
def test_the_client_is_the_nearest_untrusted_hop(peer: str, hops: list[str],
                                                 trusted: set[str]) -> None:
    proxies = TrustedProxies([f"{address}/32" for address in sorted(trusted)])
    assert proxies.client(peer, [", ".join(hops)]) == reference_client(peer, hops, trusted)


@given(st.lists(st.text(max_size=30), max_size=4), st.lists(st.text(max_size=10), max_size=3))
def test_an_untrusted_peer_chooses_neither_its_address_nor_the_scheme(
        forwarded_for: list[str], forwarded_proto: list[str]) -> None:
    proxies = TrustedProxies(["10.9.0.0/16"])
    assert proxies.client("192.0.2.7", forwarded_for) == "192.0.2.7"
    assert not proxies.is_https("192.0.2.7", "http", [*forwarded_proto, "https"])
    assert TrustedProxies().client("10.9.0.1", forwarded_for) == "10.9.0.1"


def test_a_hop_that_is_not_an_address_stops_the_walk_at_the_last_trusted_one() -> None:
    proxies = TrustedProxies(["10.0.0.0/24"])
    assert proxies.client("10.0.0.1", ["198.51.100.9, garbage, 10.0.0.2"]) == "10.0.0.2"
    assert proxies.client("10.0.0.1", ["198.51.100.9, 10.0.0.2"]) == "198.51.100.9"
    assert proxies.client("10.0.0.1", ["10.0.0.3, 10.0.0.2"]) == "10.0.0.3"  # all trusted
    assert proxies.client("10.0.0.1", []) == "10.0.0.1"
    assert proxies.client("::ffff:10.0.0.1", ["[2001:db8::5]:4711"]) == "2001:db8::5"
    assert proxies.client(None, ["198.51.100.9"]) is None


def test_https_from_the_listener_itself_or_the_nearest_trusted_proxy() -> None:
    proxies = TrustedProxies(["10.0.0.0/24"])
    assert proxies.is_https("192.0.2.7", "https")  # the listener's own TLS
    assert proxies.is_https("10.0.0.1", "http", ["https"])
    assert proxies.is_https("10.0.0.1", "http", ["HTTPS "])
    assert proxies.is_https("10.0.0.1", "http", ["http, https"])
    assert not proxies.is_https("10.0.0.1", "http", ["https, http"])
    assert not proxies.is_https("10.0.0.1", "http", [])
    assert not proxies.is_https("10.0.0.1", "http", ["wss"])
