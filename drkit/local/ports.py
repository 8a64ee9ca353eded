"""A free TCP port on loopback, for the local daemons drkit starts (brokers, Spark, metrics)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on right now (the caller binds it soon; a race is possible)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
