"""Listening on an operator-given address: a refusal named, not a traceback; served by waitress,
or by cheroot when it serves TLS.

The metrics endpoint of ``drkit replicate`` and the status page of ``drkit monitor`` bind a
socket the operator chose; a port in use, out of range or a host that does not resolve is bad
input - one line naming the option and the address, exit 2, before any work starts.  With a
certificate and key (:class:`TlsFiles`) the listener speaks HTTPS only (waitress has no TLS;
cheroot, CherryPy's production server, has: TLS 1.2 and up, Python's default server context);
an unreadable certificate or key, or a key that is not the certificate's, is bad input too.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import ssl
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

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


# A request may not hold a connection, a worker thread or memory for long: waitress closes a
# connection idle for CHANNEL_TIMEOUT_S, serves at most THREADS requests at once (the rest
# wait in its queue) and refuses bodies and headers beyond its limits.
THREADS = 4
CHANNEL_TIMEOUT_S = 30
CONNECTION_LIMIT = 100
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def is_loopback(host: str) -> bool:
    """Whether ``host`` (bare, as given to --listen) only accepts connections from this host."""
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _request_host(header: str) -> str:
    """The name in a Host header, without its port (``[::1]:9464`` -> ``::1``)."""
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


# Beyond loopback, these paths answer any Host: scrapers and probes reach them by whatever name.
_ANY_HOST_PATHS = frozenset({"/metrics", "/healthz"})


class HostCheck:
    """Refuses (421) a request whose Host names a host this listener is not (DNS rebinding).

    A browser can be made to send requests to this server from any web page under a name an
    attacker controls, resolved to this server's address; the Host header still carries that
    name.  On loopback only loopback names are answered.  Beyond loopback, a Host that is an IP
    address (no name to rebind), a loopback name, the listen address, this machine's name or
    one of ``names`` (``drkit monitor --allow-host``) - and any Host on ``/metrics`` and
    ``/healthz``, which scrapers and probes reach by whatever name they were given.
    """

    def __init__(self, app: WsgiApp, listen_host: str, names: Iterable[str] = ()) -> None:
        self.app = app
        self.loopback = is_loopback(listen_host)
        known = {listen_host, *names}
        if not self.loopback:
            with contextlib.suppress(OSError):
                known |= {socket.gethostname(), socket.getfqdn()}
        self.names = frozenset(name.lower().rstrip(".") for name in known if name)

    def allows(self, name: str, path: str) -> bool:
        if is_loopback(name):
            return True
        if self.loopback:
            return False
        return path in _ANY_HOST_PATHS or _is_address(name) or name in self.names

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        name = _request_host(environ.get("HTTP_HOST", "")).lower().rstrip(".")
        if self.allows(name, environ.get("PATH_INFO", "/")):
            return self.app(environ, start_response)
        which = "a loopback name" if self.loopback else "a name of this host (--allow-host)"
        body = f"this server answers only requests for {which}\n".encode()
        start_response(
            "421 Misdirected Request",
            [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))],
        )
        return [body]


@dataclass(frozen=True)
class TlsFiles:
    """The PEM certificate (chain) and private key an HTTPS listener presents."""

    certificate: str
    key: str

    def check(self) -> None:
        """Raise ConfigError (exit 2) unless these files make a TLS server: both readable PEM,
        the key the certificate's - before anything listens or starts."""
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                self.certificate, self.key
            )
        except (OSError, ssl.SSLError) as err:
            raise ConfigError([Problem("--tls-cert/--tls-key", self._refusal(err))]) from None

    def _refusal(self, err: OSError | ssl.SSLError) -> str:
        return f"cannot serve TLS with {self.certificate} and {self.key}: {_tls_reason(err)}"


class Listener:
    """A WSGI application served in a daemon thread (waitress; cheroot for TLS); ``server``:
    the server object itself."""

    def __init__(self, port: int, server: Any, run: Callable[[], Any], stop: Callable[[], None]):
        self.server_port, self.server = port, server
        self._stop = stop
        self.thread = threading.Thread(target=run, name="http", daemon=True)
        self.thread.start()

    def shutdown(self) -> None:
        """Stop the request threads, then stop accepting and close every connection."""
        self._stop()
        self.thread.join(5)


def serve_wsgi(
    app: WsgiApp,
    host: str,
    port: int,
    option: str,
    tls: TlsFiles | None = None,
    host_names: Iterable[str] | None = None,
) -> Listener:
    """Serve ``app`` on ``host``:``port``; a refused bind is ConfigError naming ``option``.
    ``host`` is bare (``::1``, not ``[::1]``). On a loopback address, only requests for a
    loopback name are answered; beyond loopback too, when ``host_names`` is given (the names
    besides this host's own - :class:`HostCheck`).  ``tls``: HTTPS only."""
    checked = is_loopback(host) or host_names is not None
    served: WsgiApp = HostCheck(app, host, host_names or ()) if checked else app
    if tls is not None:
        return _serve_tls(served, host, port, option, tls)
    from waitress.server import create_server

    with binding(option, host, port):
        socket.getaddrinfo(host, port)  # the resolver's own reason, not waitress's "invalid"
        server = create_server(
            served, host=host, port=port, threads=THREADS, channel_timeout=CHANNEL_TIMEOUT_S,
            connection_limit=CONNECTION_LIMIT, ident="drkit", clear_untrusted_proxy_headers=True,
        )  # fmt: skip

    def stop() -> None:
        # The request threads first: each wakes the loop through the trigger as it ends a
        # request, and the trigger is about to be closed.
        server.task_dispatcher.shutdown(timeout=5)

        # inside the server's own loop, so its select never sees a closed socket
        def close_all() -> None:
            for channel in list(server._map.values()):
                channel.close()

        try:
            server.trigger.pull_trigger(close_all)
        except OSError:
            # pull_trigger queues close_all, then writes to the trigger: a wake-up still unread
            # (a request thread's) can make the loop run close_all in between - the trigger is
            # closed with the rest, and what was asked is done.
            if not server.trigger._closed:
                raise

    return Listener(int(server.effective_port), server, server.run, stop)


def _serve_tls(app: WsgiApp, host: str, port: int, option: str, tls: TlsFiles) -> Listener:
    from cheroot import wsgi
    from cheroot.ssl.builtin import BuiltinSSLAdapter

    try:
        adapter = BuiltinSSLAdapter(tls.certificate, tls.key)
    except (OSError, ssl.SSLError) as err:
        raise ConfigError([Problem("--tls-cert/--tls-key", tls._refusal(err))]) from None
    with binding(option, host, port):
        socket.getaddrinfo(host, port)
        server = wsgi.Server(
            (host, port), app, numthreads=THREADS, timeout=CHANNEL_TIMEOUT_S,
            accepted_queue_size=CONNECTION_LIMIT, server_name="drkit",
        )  # fmt: skip
        server.ssl_adapter = adapter
        server.prepare()
    bound = server.bind_addr
    return Listener(int(bound[1]), server, server.serve, server.stop)


def _tls_reason(err: OSError | ssl.SSLError) -> str:
    if isinstance(err, ssl.SSLError):
        return f"{err.reason or err} (is the key the certificate's, both PEM?)"
    return err.strerror or str(err)
