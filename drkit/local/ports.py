"""A free TCP port on loopback, for the local daemons drkit starts (brokers, Spark, metrics).

The port is drawn from below the kernel's ephemeral range (``ip_local_port_range``), never
from it: a local broker keeps its ports for good and is stopped and started again on them (a
drill's kill and restore), and a port from that range - where ``bind(0)`` and every outgoing
connection's source port come from - can be taken meanwhile by any client connection on the
machine; its restart then fails with "Address already in use".
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
# Below the ephemeral range but above the well-known and common service ports.
LOWEST = 20000
ATTEMPTS = 200


def kernel_ephemeral_range(path: Path = RANGE_FILE) -> tuple[int, int] | None:
    """(low, high) of the ports the kernel assigns on its own; None where it cannot be read."""
    try:
        low, high = (int(v) for v in path.read_text().split())
    except (OSError, ValueError):
        return None
    return low, high


def free_port() -> int:
    """A port nothing is bound to right now, outside the kernel's ephemeral range where the
    machine has one below it to spare (else any free port); the caller binds it soon - a race
    with another process choosing the same port is possible, as with any probe."""
    ephemeral = kernel_ephemeral_range()
    if ephemeral is not None and ephemeral[0] - LOWEST >= 1000:
        for _ in range(ATTEMPTS):
            port = random.randrange(LOWEST, ephemeral[0])
            if _bindable(port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _bindable(port: int) -> bool:
    """Whether nothing - a listener or a connection's source port - holds ``port`` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
