"""The ports drkit's local daemons listen on are never ones the kernel hands out on its own.

A local broker keeps its ports for good: a drill stops it and starts it again on the same
port.  A port from the kernel's ephemeral range (``ip_local_port_range``, where ``bind(0)``
and every outgoing connection's source port come from) can be taken meanwhile by any client
connection on the machine - a secured drill's restart failed so with "Address already in
use" beside a busy test run (2026-12-06)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from drkit.local.ports import free_port, kernel_ephemeral_range

RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


@pytest.mark.skipif(not RANGE_FILE.exists(), reason="no ip_local_port_range (not Linux)")
def test_a_free_port_is_outside_the_kernels_ephemeral_range() -> None:
    low, high = (int(v) for v in RANGE_FILE.read_text().split())
    ports = {free_port() for _ in range(50)}
    assert not [p for p in ports if low <= p <= high], (low, high, sorted(ports))
    assert len(ports) > 40  # drawn at random, not one fixed port


def test_a_free_port_can_be_listened_on() -> None:
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()


def test_the_ephemeral_range_is_read_and_a_missing_file_is_none(tmp_path: Path) -> None:
    written = tmp_path / "range"
    written.write_text("40000\t60999\n")
    assert kernel_ephemeral_range(written) == (40000, 60999)
    assert kernel_ephemeral_range(tmp_path / "missing") is None
    (tmp_path / "bad").write_text("nonsense\n")
    assert kernel_ephemeral_range(tmp_path / "bad") is None
