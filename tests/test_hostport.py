"""hostport.parse_host_port: the one parser of listen addresses (IPv6 in brackets).

Property tests: every IPv4 or IPv6 address with every port parses back to itself; any text
either parses (and its ``text`` parses to the same) or is refused with BadInputError naming
the field, never another exception; an IPv6 address without brackets is refused.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gensokyo_idmap.errors import BadInputError
from gensokyo_idmap.hostport import HostPort, parse_host_port

ports = st.integers(min_value=1, max_value=65535)


@given(st.ip_addresses(v=4), ports)
def test_ipv4_round_trips(address: ipaddress.IPv4Address, port: int) -> None:
    parsed = parse_host_port(f"{address}:{port}", "f")
    assert parsed == HostPort(str(address), port)
    assert parsed.text == f"{address}:{port}"


@given(st.ip_addresses(v=6), ports)
def test_ipv6_in_brackets_round_trips(address: ipaddress.IPv6Address, port: int) -> None:
    parsed = parse_host_port(f"[{address}]:{port}", "f")
    assert parsed == HostPort(str(address), port)
    assert parsed.text == f"[{address}]:{port}"
    assert parse_host_port(parsed.text, "f") == parsed


@given(st.ip_addresses(v=6), ports)
def test_ipv6_without_brackets_is_refused(address: ipaddress.IPv6Address, port: int) -> None:
    with pytest.raises(BadInputError, match="in brackets") as err:
        parse_host_port(f"{address}:{port}", "api.listen")
    assert err.value.field == "api.listen"


@given(st.text(max_size=40))
def test_any_text_parses_or_is_bad_input(text: str) -> None:
    try:
        parsed = parse_host_port(text, "webhook.listen")
    except BadInputError as err:
        assert err.field == "webhook.listen"
        return
    assert 0 < parsed.port < 65536 and parsed.host
    assert parse_host_port(parsed.text, "webhook.listen") == parsed


@pytest.mark.parametrize(("text", "expected"), [
    ("127.0.0.1:8443", ("127.0.0.1", 8443)),
    ("localhost:1", ("localhost", 1)),
    ("0.0.0.0:65535", ("0.0.0.0", 65535)),
    ("[::]:15631", ("::", 15631)),
    ("[::1]:8443", ("::1", 8443)),
    ("[fe80::1%eth0]:80", ("fe80::1%eth0", 80)),
])
def test_documented_forms(text: str, expected: tuple[str, int]) -> None:
    assert parse_host_port(text, "f") == expected


@pytest.mark.parametrize("text", [
    "", "8443", ":8443", "127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536",
    "127.0.0.1:８４４３", "127.0.0.1:+80", "::1:8443", "::", "[::1]", "[::1]8443",
    "[127.0.0.1]:80", "[nonsense]:80", "[::1:80", "a b:80", "user@host:80", "host/x:80",
])
def test_refused(text: str) -> None:
    with pytest.raises(BadInputError):
        parse_host_port(text, "f")


def _free_ipv6_port() -> int:
    import socket

    with socket.socket(socket.AF_INET6) as sock:
        sock.bind(("::1", 0))
        return int(sock.getsockname()[1])


def test_the_daemon_listens_on_an_ipv6_address(tmp_path: Path) -> None:
    """api.listen and webhook.listen as "[::1]:port": the daemon serves there (the host was
    handed to the socket with its brackets, and the start failed)."""
    import asyncio

    import aiohttp

    from gensokyo_idmap.app import run_daemon
    from gensokyo_idmap.config import load_config

    api, webhook = _free_ipv6_port(), _free_ipv6_port()
    config_file = tmp_path / "config.yml"
    config_file.write_text(f'bot: {{app_id: "102000001"}}\n'
                           f"idmap: {{data_dir: {tmp_path / 'data'}}}\n"
                           f'api: {{listen: "[::1]:{api}"}}\n'
                           f'webhook: {{listen: "[::1]:{webhook}"}}\n', encoding="utf-8")
    config = load_config(config_file, {})

    async def scenario() -> tuple[int, int]:
        stop = asyncio.Event()
        task = asyncio.create_task(run_daemon(config, stop))
        try:
            async with aiohttp.ClientSession() as http:
                for _ in range(1000):  # bounded: 10 s
                    assert not task.done(), task.result()
                    try:
                        async with http.get(f"http://[::1]:{api}/openapi.json") as answer:
                            api_status = answer.status
                        async with http.post(f"http://[::1]:{webhook}/qqbot",
                                             data=b"{}") as answer:
                            return api_status, answer.status
                    except aiohttp.ClientConnectionError:
                        await asyncio.sleep(0.01)
                raise AssertionError("the daemon never answered on [::1]")
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)

    api_status, webhook_status = asyncio.run(scenario())
    assert api_status == 200
    assert 400 <= webhook_status < 500  # no bot.secret: callbacks are refused, but it is there
