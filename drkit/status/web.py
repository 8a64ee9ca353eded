"""HTTP endpoints of the monitor: ``/metrics``, ``/healthz``, ``/api/status``,
``/api/translate`` and ``/``.

A small WSGI app on the standard library's threaded server: server-rendered HTML (Jinja2),
no JavaScript build step.  The page and ``/api/status`` render the same ``drkit.status/v2``
document.

``/healthz`` is 200 ``ok`` while the monitor works, else 503 with one line per problem (the
state store not taking writes - named by its URL, password masked -, jobs no longer
finishing).  ``/api/status`` and the page answer 503 naming the problem when the state store
cannot be read.

``/api/translate?flow=dc1->dc2&offset=orders:0:1200[&offset=...]`` answers what ``drkit offsets
translate --offset`` prints (``drkit.offsets.translate/v1``) for applications that keep their
offsets outside Kafka: 400 naming a bad argument, 503 naming a cluster that does not answer.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from html import escape
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIServer

from jinja2 import Environment, PackageLoader, select_autoescape
from prometheus_client import make_wsgi_app
from sqlalchemy.exc import SQLAlchemyError

from drkit.errors import ConfigError, DrkitError
from drkit.health.group_lag import group_listing
from drkit.health.monitor import Liveness
from drkit.listening import serve_wsgi
from drkit.status.document import SCHEMA, StatusSnapshot

StatusSource = Callable[[], StatusSnapshot]
# (flow name, query values of ``offset``) -> the translation document; ConfigError: bad input.
TranslateSource = Callable[[str, list[str]], dict[str, Any]]
LivenessSource = Callable[[], Liveness]
StartResponse = Callable[..., Any]


def _when(moment: str | None) -> str:
    """A document's ISO-8601 moment as the page shows it, to the second."""
    if moment is None:
        return "-"
    return datetime.fromisoformat(moment).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


_templates = Environment(
    loader=PackageLoader("drkit", "templates"), autoescape=select_autoescape(["html", "j2"])
)
# A group's Burrow lag status, drawn in the cluster states' colours.
_LAG_COLOURS = {"OK": "HEALTHY", "WARN": "DEGRADED", "STALL": "UNAVAILABLE", "STOP": "UNAVAILABLE",
                "REWIND": "UNAVAILABLE"}  # fmt: skip


def _lag_colour(status: str | None) -> str:
    return _LAG_COLOURS.get(status or "", "UNKNOWN")


_templates.filters["when"] = _when
_templates.filters["lag_colour"] = _lag_colour
_templates.filters["group_listing"] = group_listing


def render_page(status: dict[str, Any]) -> str:
    return _templates.get_template("status.html.j2").render(
        status=status, generated=_when(status.get("generated_at"))
    )


class StatusApp:
    """WSGI application; ``status`` is called per request (it reads the state store)."""

    def __init__(
        self,
        status: StatusSource,
        liveness: LivenessSource,
        translate: TranslateSource | None = None,
    ) -> None:
        self.status = status
        self.liveness = liveness
        self.translate = translate
        self.metrics = make_wsgi_app()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if environ.get("REQUEST_METHOD", "GET") not in READ_METHODS:
            # Nothing here changes state: a POST, PUT or DELETE is a mistake or a probe.
            allow = (("Allow", ", ".join(READ_METHODS)),)
            return self._send(
                start_response, "405 Method Not Allowed", "text/plain", b"GET or HEAD\n", allow
            )
        if path == "/metrics":
            return self.metrics(environ, start_response)  # type: ignore[no-any-return]
        if path == "/healthz":
            alive = self.liveness()
            if alive.ok:
                return self._send(start_response, "200 OK", "text/plain", b"ok\n")
            body = "".join(f"{problem}\n" for problem in alive.problems).encode()
            return self._send(start_response, "503 Service Unavailable", "text/plain", body)
        if path == "/api/translate" and self.translate is not None:
            return self._translated(environ, start_response)
        if path in ("/api/status", "/", "/index.html"):
            try:
                document = self.status().to_json()
            except (DrkitError, SQLAlchemyError) as err:
                return self._unavailable(start_response, path, str(err))
            if path == "/api/status":
                body = json.dumps(document, default=str, indent=2).encode()
                return self._send(start_response, "200 OK", "application/json", body)
            body = render_page(document).encode()
            return self._send(start_response, "200 OK", "text/html; charset=utf-8", body)
        return self._send(start_response, "404 Not Found", "text/plain", b"not found\n")

    def _translated(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        assert self.translate is not None
        query = parse_qs(environ.get("QUERY_STRING", ""))
        flows, offsets = query.get("flow", []), query.get("offset", [])
        status, document = "200 OK", None
        if len(flows) != 1 or not offsets:
            status = "400 Bad Request"
            document = {"error": "give one flow and at least one offset=TOPIC:PARTITION:OFFSET"}
        else:
            try:
                document = self.translate(flows[0], offsets)
            except ConfigError as err:
                status, document = "400 Bad Request", {"error": "; ".join(err.lines())}
            except DrkitError as err:
                status, document = "503 Service Unavailable", {"error": str(err)}
        body = json.dumps(document, default=str, indent=2).encode()
        return self._send(start_response, status, "application/json", body)

    def _unavailable(self, start_response: StartResponse, path: str, error: str) -> list[bytes]:
        if path == "/api/status":
            body = json.dumps({"schema": SCHEMA, "error": error}).encode()
            kind = "application/json"
        else:
            body = f"<!doctype html><title>drkit status</title><p>{escape(error)}</p>".encode()
            kind = "text/html; charset=utf-8"
        return self._send(start_response, "503 Service Unavailable", kind, body)

    @staticmethod
    def _send(
        start_response: StartResponse,
        status: str,
        kind: str,
        body: bytes,
        extra: tuple[tuple[str, str], ...] = (),
    ) -> list[bytes]:
        headers = [("Content-Type", kind), ("Content-Length", str(len(body))), *SECURITY_HEADERS]
        start_response(status, [*headers, *extra])
        return [body]


READ_METHODS = ("GET", "HEAD")
# No sniffing a JSON answer into a page, no framing the status page into another site's.
SECURITY_HEADERS = (
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
)


def serve(app: StatusApp, host: str, port: int) -> tuple[WSGIServer, threading.Thread]:
    """Start serving in a daemon thread (``drkit.listening.serve_wsgi``, option ``--listen``)."""
    return serve_wsgi(app, host, port, "--listen")
