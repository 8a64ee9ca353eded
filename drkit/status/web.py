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
Each call reads the flow's mapping from the clusters, so it is bounded: at most
``MAX_TRANSLATE_OFFSETS`` offsets per call, ``MAX_TRANSLATIONS`` calls at once (503 and
``Retry-After`` beyond), an answer within ``TRANSLATE_DEADLINE_S`` (504 past it, the slot
held until the translation ends); with an API token, only callers that send it
(``Authorization: Bearer``, 401 otherwise); and a monitor listening beyond loopback without a
token does not serve it (403).
"""

from __future__ import annotations

import hmac
import json
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from html import escape
from typing import Any
from urllib.parse import parse_qs

from jinja2 import Environment, PackageLoader, select_autoescape
from prometheus_client import make_wsgi_app
from sqlalchemy.exc import SQLAlchemyError

from drkit.errors import ConfigError, DrkitError
from drkit.health.group_lag import group_listing
from drkit.health.monitor import Liveness
from drkit.health.observations import FlowObservation, measures
from drkit.listening import Listener, TlsFiles, serve_wsgi
from drkit.status.document import SCHEMA, StatusSnapshot
from drkit.store.db import shown_error

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


def render_page(status: dict[str, Any], observed: type[FlowObservation] | None = None) -> str:
    """The status page of the document ``status``; its flows table has a column for each
    field of ``observed`` (FlowObservation by default) that says how status shows it."""
    columns = [(name, known.shown) for name, known in measures(observed) if known.shown]
    return _templates.get_template("status.html.j2").render(
        status=status, generated=_when(status.get("generated_at")), columns=columns
    )


class StatusApp:
    """WSGI application; ``status`` is called per request (it reads the state store)."""

    def __init__(
        self,
        status: StatusSource,
        liveness: LivenessSource,
        translate: TranslateSource | None = None,
        api_token: str | None = None,
        beyond_loopback: bool = False,
        metrics_only: bool = False,
        translate_deadline_s: float | None = None,
    ) -> None:
        self.metrics_only = metrics_only  # --metrics-listen: /metrics and /healthz, nothing else
        self.status = status
        self.liveness = liveness
        self.translate = translate
        self.api_token = api_token
        self.beyond_loopback = beyond_loopback
        self.metrics = make_wsgi_app()
        self._translations = threading.BoundedSemaphore(MAX_TRANSLATIONS)
        self.translate_deadline_s = (
            TRANSLATE_DEADLINE_S if translate_deadline_s is None else translate_deadline_s
        )

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
        if self.metrics_only:
            body = b"this port serves /metrics and /healthz only\n"
            return self._send(start_response, "404 Not Found", "text/plain", body)
        if path == "/api/translate" and self.translate is not None:
            return self._translated(environ, start_response)
        if path in ("/api/status", "/", "/index.html"):
            try:
                document = self.status().to_json()
            except (DrkitError, SQLAlchemyError) as err:
                # Never SQLAlchemy's text: it carries the statement and its parameters.
                return self._unavailable(start_response, path, shown_error(err))
            if path == "/api/status":
                body = json.dumps(document, default=str, indent=2).encode()
                return self._send(start_response, "200 OK", "application/json", body)
            body = render_page(document).encode()
            return self._send(start_response, "200 OK", "text/html; charset=utf-8", body)
        return self._send(start_response, "404 Not Found", "text/plain", b"not found\n")

    def _translated(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        refused = self._refusal(environ)
        if refused is not None:
            status, document, extra = refused
            body = json.dumps(document).encode()
            return self._send(start_response, status, "application/json", body, extra)
        if not self._translations.acquire(blocking=False):
            document = {"error": f"busy: {MAX_TRANSLATIONS} translations under way; retry"}
            return self._send(
                start_response, "503 Service Unavailable", "application/json",
                json.dumps(document).encode(), (("Retry-After", "1"),),
            )  # fmt: skip
        answer: list[tuple[str, dict[str, Any]]] = []
        failure: list[BaseException] = []
        done = threading.Event()

        def work() -> None:
            try:
                answer.append(self._translation(environ))
            except BaseException as err:  # raised again in the request's thread
                failure.append(err)
            finally:
                self._translations.release()  # when it really ends, not at the deadline
                done.set()

        threading.Thread(target=work, name="translate", daemon=True).start()
        if not done.wait(self.translate_deadline_s):
            why = (f"no translation within {self.translate_deadline_s:g}s (the clusters answer "
                   "slowly or not at all); retry later")  # fmt: skip
            body = json.dumps({"error": why}).encode()
            return self._send(start_response, "504 Gateway Timeout", "application/json", body)
        if failure:
            raise failure[0]
        status, document = answer[0]
        body = json.dumps(document, default=str, indent=2).encode()
        return self._send(start_response, status, "application/json", body)

    def _refusal(
        self, environ: dict[str, Any]
    ) -> tuple[str, dict[str, Any], tuple[tuple[str, str], ...]] | None:
        """Why this caller gets no translation (status, document, headers), or None."""
        if self.api_token is None:
            if self.beyond_loopback:
                why = ("/api/translate is served beyond loopback only with a token: start the "
                       "monitor with --api-token-file")  # fmt: skip
                return "403 Forbidden", {"error": why}, ()
            return None
        scheme, _, given = environ.get("HTTP_AUTHORIZATION", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), self.api_token.encode()
        ):
            return None
        challenge = (("WWW-Authenticate", 'Bearer realm="drkit"'),)
        return "401 Unauthorized", {"error": "a valid bearer token is required"}, challenge

    def _translation(self, environ: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        assert self.translate is not None
        query = parse_qs(environ.get("QUERY_STRING", ""))
        flows, offsets = query.get("flow", []), query.get("offset", [])
        if len(flows) != 1 or not offsets:
            why = "give one flow and at least one offset=TOPIC:PARTITION:OFFSET"
            return "400 Bad Request", {"error": why}
        if len(offsets) > MAX_TRANSLATE_OFFSETS:
            why = f"{len(offsets)} offsets: at most {MAX_TRANSLATE_OFFSETS} per call"
            return "400 Bad Request", {"error": why}
        try:
            return "200 OK", self.translate(flows[0], offsets)
        except ConfigError as err:
            return "400 Bad Request", {"error": "; ".join(err.lines())}
        except DrkitError as err:
            return "503 Service Unavailable", {"error": str(err)}

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
MAX_TRANSLATE_OFFSETS = 1_000
MAX_TRANSLATIONS = 2  # at once: each reads the flow's offset syncs and progress
# A call not answered by then gets 504; its translation keeps its slot until it ends.
TRANSLATE_DEADLINE_S = 60.0
# No sniffing a JSON answer into a page, no framing the status page into another site's.
SECURITY_HEADERS = (
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
)


def serve(
    app: StatusApp,
    host: str,
    port: int,
    option: str = "--listen",
    tls: TlsFiles | None = None,
    host_names: tuple[str, ...] = (),
) -> Listener:
    """Start serving in a daemon thread (``drkit.listening.serve_wsgi``; a refused bind names
    ``option``; ``tls``: HTTPS only).  The Host of each request is checked, beyond loopback
    too: this host's names, IP addresses and ``host_names`` (``drkit.listening.HostCheck``)."""
    return serve_wsgi(app, host, port, option, tls, host_names=host_names)
