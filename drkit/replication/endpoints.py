"""The HTTP endpoints of ``drkit replicate --metrics-port``: ``/metrics`` and ``/healthz``.

``/healthz`` is what a liveness probe (Kubernetes, a load balancer) asks: 200 ``ok`` while no
flow of this process has ended for good, else 503 with one line per ended flow naming it and
why. A process whose flows all ended exits (code 10 or 1); one that keeps others running
stays up, and the probe is how an orchestrator sees, and restarts, the flow it lost.
Anything but GET or HEAD is refused (405): nothing here changes state.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import make_wsgi_app

from drkit.logs import printable


class EndedFlows:
    """The flows of this process that ended for good, with the line that says why."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ended: dict[str, str] = {}

    def ended(self, flow: str, why: str) -> None:
        """``why``: the line the flow ended on (its own "flow NAME: " prefix is not repeated)."""
        with self._lock:
            self._ended[flow] = why.removeprefix(f"flow {flow}: ")

    def problems(self) -> list[str]:
        with self._lock:
            return [f"flow {flow} ended: {why}" for flow, why in sorted(self._ended.items())]


class WorkerEndpoints:
    """WSGI application serving the process's metrics and its health."""

    def __init__(self, ended: EndedFlows) -> None:
        self.ended = ended
        self.metrics = make_wsgi_app()

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            return _send(start_response, "405 Method Not Allowed", b"GET or HEAD\n")
        path = environ.get("PATH_INFO", "/")
        if path == "/metrics":
            return self.metrics(environ, start_response)  # type: ignore[no-any-return]
        if path == "/healthz":
            problems = self.ended.problems()
            if not problems:
                return _send(start_response, "200 OK", b"ok\n")
            body = "".join(printable(line) + "\n" for line in problems).encode()
            return _send(start_response, "503 Service Unavailable", body)
        return _send(start_response, "404 Not Found", b"not found: /metrics or /healthz\n")


def _send(start_response: Callable[..., Any], status: str, body: bytes) -> list[bytes]:
    headers = [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))]
    if status.startswith("405"):
        headers.append(("Allow", "GET, HEAD"))
    start_response(status, headers)
    return [body]
