"""Listening on an operator-given address: a refusal named, not a traceback.

The metrics endpoint of ``drkit replicate`` and the status page of ``drkit monitor`` bind a
socket the operator chose; a port in use, out of range or a host that does not resolve is bad
input - one line naming the option and the address, exit 2, before any work starts.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

from drkit.errors import ConfigError, Problem


@contextmanager
def binding(option: str, host: str, port: int) -> Iterator[None]:
    """Run the bind inside; its refusal becomes ConfigError naming ``option`` and why."""
    where = f"cannot listen on {host}:{port}"
    try:
        yield
    except socket.gaierror as err:
        reason = f"{where}: host {host!r} does not resolve ({err.strerror})"
        raise ConfigError([Problem(option, reason)]) from None
    except OverflowError:
        raise ConfigError([Problem(option, f"{where}: ports are 0-65535")]) from None
    except OSError as err:
        raise ConfigError([Problem(option, f"{where}: {err.strerror or err}")]) from None
