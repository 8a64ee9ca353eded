"""A TCP forwarder tests can cut and heal: the network between drkit and a server goes away.

``cut()`` closes the listening socket and every forwarded connection (new connections are
refused, open ones break, as when a server's host dies); ``heal()`` listens again on the same
port.  Listens on 127.0.0.1 or, with ``family=AF_INET6``, on ``::1``.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from collections.abc import Iterator
from types import TracebackType


class TcpProxy:
    def __init__(self, target: tuple[str, int], family: socket.AddressFamily = socket.AF_INET):
        self.target = target
        self.family = family
        self.host = "::1" if family == socket.AF_INET6 else "127.0.0.1"
        self.port = 0
        self._listener: socket.socket | None = None
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def address(self) -> str:
        """``host:port`` as a client config names it (IPv6 in brackets)."""
        host = f"[{self.host}]" if self.family == socket.AF_INET6 else self.host
        return f"{host}:{self.port}"

    def start(self) -> TcpProxy:
        listener = socket.socket(self.family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._connections += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        if self._listener is not None:
            # shutdown() wakes the thread blocked in accept(); close() alone would not (Linux),
            # and that accept() would keep taking connections.
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()

    def heal(self) -> None:
        self.start()

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.cut()


@contextlib.contextmanager
def database_behind_proxy(url: str) -> Iterator[tuple[TcpProxy, str]]:
    """A proxy in front of the database server of ``url`` (``...@host:port/db``), and the URL
    that goes through it: cut the link to take the database away from a process."""
    found = re.search(r"@([^/]+)/", url)
    assert found is not None, "a URL with @host:port/"
    host, port = found.group(1).rsplit(":", 1)
    with TcpProxy((host, int(port))) as link:
        yield link, url.replace(found.group(1), link.address)
