"""testing.loopback.free_port: a port no ``bind(0)`` can take before the daemon does."""

from __future__ import annotations

import socket
from pathlib import Path

from gensokyo_idmap.testing import free_port


def test_free_ports_lie_below_the_ephemeral_range_are_bindable_and_never_repeat() -> None:
    range_file = Path("/proc/sys/net/ipv4/ip_local_port_range")
    low = int(range_file.read_text().split()[0]) if range_file.exists() else 32768
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)
    assert all(1024 <= port < low for port in ports)
    with socket.socket() as sock:  # free: the daemon can take it
        sock.bind(("127.0.0.1", ports[-1]))
