"""Security review 6, L9: the status page answered a store failure other than a lost
connection with SQLAlchemy's own text - the SQL statement and its parameters (a flow's
signing key among them) - to anyone who could reach it, and /healthz repeated it."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import IntegrityError

from drkit.status.current import status_source
from drkit.status.web import StatusApp

KEY = "k3y-5ecret-0a1b"


def _error() -> IntegrityError:
    return IntegrityError(
        "INSERT INTO flow_keys (flow, key) VALUES (?, ?)",
        ("dc1->dc2", KEY),
        Exception("UNIQUE constraint failed: flow_keys.flow"),
    )


def _get(app: StatusApp, path: str) -> tuple[str, bytes]:
    answer: list[str] = []
    body = b"".join(
        app({"PATH_INFO": path, "REQUEST_METHOD": "GET"}, lambda s, h: answer.append(s))
    )
    return answer[0], body


def test_a_store_error_is_served_without_its_statement_or_parameters() -> None:
    def status() -> object:
        raise _error()

    app = StatusApp(status, lambda: None)  # type: ignore[arg-type,return-value]
    for path in ("/api/status", "/"):
        code, body = _get(app, path)
        assert code.startswith("503"), code
        assert KEY.encode() not in body and b"INSERT" not in body, body
        assert b"UNIQUE constraint failed" in body


def test_the_monitor_hears_of_it_without_its_statement_either(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import drkit.status.current as current

    def failing(*_args: object) -> object:
        raise _error()

    monkeypatch.setattr(current, "current_status", failing)
    heard: list[str] = []
    read = status_source(None, None, heard.append)  # type: ignore[arg-type]
    with pytest.raises(IntegrityError):
        read()
    assert heard and KEY not in heard[0] and "INSERT" not in heard[0], heard
