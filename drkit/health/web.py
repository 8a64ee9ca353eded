"""HTTP endpoints of the monitor: ``/metrics``, ``/healthz``, ``/api/status`` and ``/``.

A small WSGI app on the standard library's threaded server: server-rendered HTML (Jinja2),
no JavaScript build step.  The page and ``/api/status`` render the same ``drkit.status/v1``
document.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from jinja2 import Environment, PackageLoader, select_autoescape
from prometheus_client import make_wsgi_app

StatusSource = Callable[[], dict[str, Any]]
StartResponse = Callable[..., Any]


def _when(timestamp: float | None) -> str:
    if timestamp is None:
        return "-"
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


_templates = Environment(
    loader=PackageLoader("drkit", "templates"), autoescape=select_autoescape(["html", "j2"])
)
_templates.filters["when"] = _when


def render_page(status: dict[str, Any]) -> str:
    return _templates.get_template("status.html.j2").render(
        status=status, generated=_when(status.get("generated_at"))
    )


class StatusApp:
    """WSGI application; ``status`` is called per request (it reads the state store)."""

    def __init__(self, status: StatusSource) -> None:
        self.status = status
        self.metrics = make_wsgi_app()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/metrics":
            return self.metrics(environ, start_response)  # type: ignore[no-any-return]
        if path == "/healthz":
            return self._send(start_response, "200 OK", "text/plain", b"ok\n")
        if path == "/api/status":
            body = json.dumps(self.status(), default=str, indent=2).encode()
            return self._send(start_response, "200 OK", "application/json", body)
        if path in ("/", "/index.html"):
            body = render_page(self.status()).encode()
            return self._send(start_response, "200 OK", "text/html; charset=utf-8", body)
        return self._send(start_response, "404 Not Found", "text/plain", b"not found\n")

    @staticmethod
    def _send(start_response: StartResponse, status: str, kind: str, body: bytes) -> list[bytes]:
        start_response(status, [("Content-Type", kind), ("Content-Length", str(len(body)))])
        return [body]


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve(app: StatusApp, host: str, port: int) -> tuple[WSGIServer, threading.Thread]:
    """Start serving in a daemon thread; returns the server (``.server_port``) and thread."""
    server = make_server(
        host, port, app, server_class=_ThreadingServer, handler_class=_QuietHandler
    )
    thread = threading.Thread(target=server.serve_forever, name="http", daemon=True)
    thread.start()
    return server, thread
