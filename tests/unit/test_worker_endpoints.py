"""``drkit replicate --metrics-port``'s endpoints, called as WSGI: /healthz says which flows of
the process ended for good, /metrics stays Prometheus's, nothing else answers."""

from __future__ import annotations

from typing import Any

from drkit.replication.endpoints import EndedFlows, WorkerEndpoints


def _get(app: WorkerEndpoints, path: str, method: str = "GET") -> tuple[str, dict[str, str], str]:
    answer: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        answer["status"], answer["headers"] = status, dict(headers)

    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": "",
               "SERVER_NAME": "x", "SERVER_PORT": "1", "wsgi.url_scheme": "http"}  # fmt: skip
    body = b"".join(app(environ, start_response)).decode()
    return answer["status"], answer["headers"], body


def test_healthz_is_ok_until_a_flow_ends_then_names_each_ended_flow() -> None:
    ended = EndedFlows()
    app = WorkerEndpoints(ended)
    assert _get(app, "/healthz")[::2] == ("200 OK", "ok\n")
    ended.ended("dc1->dc2", "cannot replicate orders partition 0 offset 7: MSG_SIZE_TOO_LARGE")
    ended.ended("dc3->dc2", "evil\nflow ended: forged")  # an error's text is anyone's
    status, _headers, body = _get(app, "/healthz")
    assert status == "503 Service Unavailable"
    assert body.splitlines() == [
        "flow dc1->dc2 ended: cannot replicate orders partition 0 offset 7: MSG_SIZE_TOO_LARGE",
        "flow dc3->dc2 ended: evil\\nflow ended: forged",
    ]


def test_metrics_stay_prometheus_and_nothing_else_answers() -> None:
    app = WorkerEndpoints(EndedFlows())
    status, headers, body = _get(app, "/metrics")
    assert status == "200 OK" and headers["Content-Type"].startswith("text/plain")
    assert "python_info" in body or "process_" in body or "# HELP" in body
    assert _get(app, "/")[0] == "404 Not Found"
    status, headers, _ = _get(app, "/healthz", method="POST")
    assert status == "405 Method Not Allowed" and headers["Allow"] == "GET, HEAD"
