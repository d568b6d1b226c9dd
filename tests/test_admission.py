"""The admission rules (admission.py, pure): Host forms, Origin and Sec-Fetch-Site, content
types, and the ``api.allowed_hosts`` entries, over generated header text."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.provisional import domains
from multidict import CIMultiDict

from gensokyo_idmap.admission import Admission, allowed_host_name, parse_authority

LISTED = "idmap.example.org"
PUNY = "xn--bcher-kva.example"  # bücher.example
POLICY = Admission([LISTED, PUNY.upper() + "."])

ports = st.none() | st.integers(0, 65535)
ipv4 = st.ip_addresses(v=4).map(str)
ipv6 = st.ip_addresses(v=6)


def with_port(host: str, port: int | None) -> str:
    return host if port is None else f"{host}:{port}"


def cased(draw: st.DrawFn, name: str) -> str:
    """``name`` with each letter's case drawn, and maybe one trailing dot."""
    flips = draw(st.lists(st.booleans(), min_size=len(name), max_size=len(name)))
    text = "".join(c.upper() if up else c for c, up in zip(name, flips, strict=True))
    return text + "." if draw(st.booleans()) else text


@st.composite
def listed_hosts(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(["localhost", LISTED, PUNY]))
    return with_port(cased(draw, name), draw(ports))


@st.composite
def other_names(draw: st.DrawFn) -> str:
    """A DNS name that is not localhost nor listed (any case, dot, port)."""
    name = draw(domains().filter(lambda d: d.lower().rstrip(".") not in
                                 {"localhost", LISTED, PUNY}))
    return with_port(cased(draw, name.lower()), draw(ports))


@given(ipv4, ports)
def test_an_ipv4_host_is_taken_with_or_without_a_port(address: str, port: int | None) -> None:
    assert POLICY.host_refusal(with_port(address, port)) is None


@given(ipv6, ports, st.booleans())
def test_an_ipv6_host_in_brackets_is_taken(address: ipaddress.IPv6Address, port: int | None,
                                           exploded: bool) -> None:
    text = address.exploded if exploded else address.compressed
    assert POLICY.host_refusal(with_port(f"[{text.upper()}]", port)) is None


@given(listed_hosts())
def test_localhost_and_listed_names_are_taken_in_any_case(host: str) -> None:
    assert POLICY.host_refusal(host) is None


@given(other_names())
def test_any_other_name_is_refused_421_naming_the_key(host: str) -> None:
    refused = POLICY.host_refusal(host)
    assert refused is not None and refused.status == 421
    assert "api.allowed_hosts" in refused.message


@pytest.mark.parametrize("host", [
    "localhost.localdomain", "localhost..", "evil.localhost", "127.0.0.1.nip.io",
    "idmap.example.org.evil.example", "xn--bcher-kva.example.evil", "bücher.example",
    "::1", "[::1", "[::1]x", "[127.0.0.1]", "[fe80::1%25eth0]", "localhost:99999",
    "localhost:port", "local host", "user@localhost", "localhost/x", "127.1", "0x7f.0.0.1",
    "2130706433", "127.000.000.001", "*", ".", ":80"])
def test_unusual_forms_are_refused(host: str) -> None:
    refused = POLICY.host_refusal(host)
    assert refused is not None and refused.status == 421, host


@pytest.mark.parametrize("host", [None, ""])
def test_no_host_or_an_empty_one_is_taken(host: str | None) -> None:
    assert POLICY.host_refusal(host) is None
    assert POLICY.refusal(CIMultiDict({"Host": host} if host is not None else {}),
                          guarded=True) is None


@given(st.text())
def test_any_host_text_is_taken_or_refused_421_never_an_exception(host: str) -> None:
    refused = POLICY.host_refusal(host)
    assert refused is None or refused.status == 421
    parsed = parse_authority(host)
    if refused is None and host:
        assert parsed is not None


@given(ipv4 | ipv6.map(lambda a: f"[{a}]") | st.just("localhost"), ports,
       st.sampled_from(["http", "https", "HTTP"]))
def test_an_origin_that_is_the_host_itself_is_taken(host: str, port: int | None,
                                                    scheme: str) -> None:
    authority = with_port(host, port)
    assert POLICY.site_refusal(authority, f"{scheme}://{authority}", "same-origin") is None
    headers = CIMultiDict({"Host": authority, "Origin": f"{scheme}://{authority}",
                           "Content-Type": "application/json; charset=utf-8"})
    assert POLICY.refusal(headers, guarded=True, json_body=True) is None


@given(listed_hosts(), ports, st.sampled_from(["http", "https"]))
def test_an_origin_of_a_listed_name_is_taken_whatever_the_host(host: str, port: int | None,
                                                              scheme: str) -> None:
    """Behind a TLS proxy the browser's Origin is the public name, Host the listener's."""
    if host.lower().rstrip(".").partition(":")[0].rstrip(".") == "localhost":
        return  # localhost is no one's site: only the same origin counts
    origin = f"{scheme}://{host.partition(':')[0]}" + ("" if port is None else f":{port}")
    assert POLICY.site_refusal("127.0.0.1:15631", origin, None) is None


@given(other_names() | ipv4, st.sampled_from(["http", "https"]), st.integers(1, 65535))
def test_a_foreign_origin_is_refused_403(name: str, scheme: str, port: int) -> None:
    host = "127.0.0.1:15631"
    origin = f"{scheme}://{name.partition(':')[0]}:{port}"
    if origin.endswith("//127.0.0.1:15631"):
        return
    refused = POLICY.site_refusal(host, origin, None)
    assert refused is not None and refused.status == 403 and refused.code == "cross_site"


@pytest.mark.parametrize("origin", [
    "null", "http://localhost:3000", "http://127.0.0.1:15632", "http://[::1]:15631",
    "file://", "chrome-extension://abcdef", "ws://127.0.0.1:15631",
    "http://127.0.0.1:15631/path", "http://user@127.0.0.1:15631", "", "127.0.0.1:15631"])
def test_null_other_ports_and_other_schemes_are_foreign(origin: str) -> None:
    refused = POLICY.site_refusal("127.0.0.1:15631", origin, None)
    assert refused is not None and refused.status == 403, origin


def test_default_ports_of_an_origin_match_a_host_without_one() -> None:
    assert POLICY.site_refusal("localhost", "http://localhost:80", None) is None
    assert POLICY.site_refusal("localhost", "https://localhost:443", None) is None
    assert POLICY.site_refusal("localhost", "http://localhost:443", None) is not None


@given(st.sampled_from(["cross-site", "Cross-Site", " cross-site "]),
       st.none() | st.just("http://127.0.0.1:15631"))
def test_sec_fetch_site_cross_site_is_refused_even_with_a_matching_origin(
        site: str, origin: str | None) -> None:
    refused = POLICY.site_refusal("127.0.0.1:15631", origin, site)
    assert refused is not None and refused.status == 403


@pytest.mark.parametrize("site", [None, "same-origin", "same-site", "none"])
def test_no_origin_is_a_script_or_a_framework(site: str | None) -> None:
    assert POLICY.site_refusal("127.0.0.1:15631", None, site) is None


@given(st.text(), st.text(), st.text())
def test_any_origin_text_is_taken_or_refused_403(host: str, origin: str, site: str) -> None:
    refused = POLICY.site_refusal(host, origin, site)
    assert refused is None or refused.status == 403


@pytest.mark.parametrize("kind", ["application/json", "Application/JSON",
                                  "application/json; charset=utf-8", " application/json ;x=y"])
def test_json_content_types_are_taken(kind: str) -> None:
    assert Admission.content_refusal(kind) is None


@pytest.mark.parametrize("kind", [None, "", "text/plain", "application/x-www-form-urlencoded",
                                  "multipart/form-data; boundary=x", "application/jsonx",
                                  "application/vnd.api+json", "text/json"])
def test_other_content_types_are_refused_415(kind: str | None) -> None:
    refused = Admission.content_refusal(kind)
    assert refused is not None and refused.status == 415


def test_the_checks_run_in_order_and_only_where_asked() -> None:
    evil = CIMultiDict({"Host": "evil.example", "Origin": "http://evil.example",
                        "Content-Type": "text/plain"})
    assert POLICY.refusal(evil, guarded=False).status == 421  # type: ignore[union-attr]
    cross = CIMultiDict({"Host": "127.0.0.1:1", "Origin": "http://evil.example",
                         "Content-Type": "text/plain"})
    assert POLICY.refusal(cross, guarded=False) is None  # a read: same-origin policy's
    assert POLICY.refusal(cross, guarded=True).status == 403  # type: ignore[union-attr]
    plain = CIMultiDict({"Host": "127.0.0.1:1", "Content-Type": "text/plain"})
    assert POLICY.refusal(plain, guarded=True) is None
    assert POLICY.refusal(plain, guarded=True, json_body=True).status == 415  # type: ignore[union-attr]


def test_a_long_header_is_quoted_short() -> None:
    refused = POLICY.host_refusal("a" * 5000 + ".example")
    assert refused is not None and len(refused.message) < 300


@pytest.mark.parametrize(("entry", "name"), [
    ("Idmap.Example.org.", "idmap.example.org"), (" console.test ", "console.test"),
    ("localhost", "localhost"), ("xn--bcher-kva.example", "xn--bcher-kva.example"),
    ("gensokyo_idmap", "gensokyo_idmap")])
def test_allowed_host_entries_are_written_as_hosts_are_read(entry: str, name: str) -> None:
    assert allowed_host_name(entry) == name


@pytest.mark.parametrize(("entry", "words"), [
    ("bücher.example", "xn--bcher-kva.example"), ("*.example.org", "no wildcards"),
    ("idmap.example.org:443", "without a port"), ("10.0.0.5", "IP address"),
    ("[::1]", "IP address"), ("http://idmap.example.org", "not a host name"),
    ("", "not a host name"), ("a b", "not a host name")])
def test_bad_allowed_host_entries_say_what_to_write(entry: str, words: str) -> None:
    with pytest.raises(ValueError) as err:
        allowed_host_name(entry)
    assert words in str(err.value), str(err.value)
