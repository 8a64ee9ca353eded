"""Listening on an operator-given address: a refusal named, not a traceback.

The metrics endpoint of ``drkit replicate`` and the status page of ``drkit monitor`` bind a
socket the operator chose; a port in use, out of range or a host that does not resolve is bad
input - one line naming the option and the address, exit 2, before any work starts.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from drkit.errors import ConfigError, Problem

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


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


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _ThreadingServer6(_ThreadingServer):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve_wsgi(
    app: WsgiApp, host: str, port: int, option: str
) -> tuple[WSGIServer, threading.Thread]:
    """Serve ``app`` on the standard library's threaded server in a daemon thread; returns the
    server (``.server_port``) and the thread.  ``host`` is bare (``::1``, not ``[::1]``): an
    IPv6 address gets an IPv6 socket.  A refused bind is ConfigError naming ``option``."""
    server_class = _ThreadingServer6 if ":" in host else _ThreadingServer
    with binding(option, host, port):
        server = make_server(host, port, app, server_class=server_class,
                             handler_class=_QuietHandler)  # fmt: skip
    thread = threading.Thread(target=server.serve_forever, name="http", daemon=True)
    thread.start()
    return server, thread
