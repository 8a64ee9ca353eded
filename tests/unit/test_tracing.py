"""A failover run as an OpenTelemetry trace: a run span, one child per step, read back from
the JSON-lines file and from an OTLP/HTTP collector stand-in, for a run that succeeds and for
one that rolls back.  The engine, runbook and store are real; the clusters are in memory."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from drkit.config.model import TracingConfig
from drkit.failover.context import StepContext, StepFailed, StepOutcome
from drkit.failover.engine import RolledBack
from drkit.failover.run_result import RunOptions
from drkit.store import StateStore
from tests.unit.test_failover_safety import World

STEPS = ["fence_source", "stop_replication", "drain", "move_pointer"]


def _traced(tmp_path: Path, store: StateStore, **tracing: Any) -> World:
    world = World(tmp_path, store)
    world.config = world.config.model_copy(update={"tracing": TracingConfig(**tracing)})
    return world


def _spans(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _run_and_steps(spans: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    [run] = [s for s in spans if s["name"] == "failover run"]
    steps = [s for s in spans if s is not run]
    for step in steps:  # every step is a child of the run, in its trace
        assert step["parent_id"] == run["context"]["span_id"], step
        assert step["context"]["trace_id"] == run["context"]["trace_id"], step
    return run, sorted(steps, key=lambda s: s["start_time"])


def test_a_switchover_is_one_trace_with_a_span_per_step(
    tmp_path: Path, migrated_store: StateStore
) -> None:
    world = _traced(tmp_path, migrated_store, file=tmp_path / "spans.jsonl")
    world.engine().start(world.plan(), RunOptions())
    run_id = world.only_run().id
    # Spans name clusters, steps and errors: the file is its owner's only, like drkit's other
    # files (security review 8, L6).
    assert (tmp_path / "spans.jsonl").stat().st_mode & 0o777 == 0o600
    run, steps = _run_and_steps(_spans(tmp_path / "spans.jsonl"))
    assert run["attributes"] == {
        "drkit.run.id": run_id,
        "drkit.procedure": "switchover",
        "drkit.source": "dc1",
        "drkit.target": "dc2",
        "drkit.direction": "forward",
        "drkit.outcome": "succeeded",
    }
    assert run["resource"]["attributes"]["service.name"] == "drkit"
    assert [s["name"] for s in steps] == [f"step {name}" for name in STEPS]
    for span in steps:
        attributes = span["attributes"]
        assert attributes["drkit.run.id"] == run_id
        assert attributes["drkit.outcome"] == "done"
        assert attributes["drkit.duration_s"] >= 0
        assert span["status"]["status_code"] == "UNSET"


def _failing_drain(_ctx: StepContext, _timeout: float | None) -> StepOutcome:
    raise StepFailed("dc1->dc2 did not reach the goal within 5s")


def test_a_rolled_back_run_marks_the_failed_step_and_traces_the_undo_steps(
    tmp_path: Path, migrated_store: StateStore
) -> None:
    world = _traced(tmp_path, migrated_store, file=tmp_path / "spans.jsonl")
    with pytest.raises(RolledBack):
        world.engine(drain=_failing_drain).start(world.plan(), RunOptions())
    run, steps = _run_and_steps(_spans(tmp_path / "spans.jsonl"))
    assert run["attributes"]["drkit.outcome"] == "rolled_back"
    outcomes = [(s["name"], s["attributes"]["drkit.outcome"]) for s in steps]
    assert outcomes == [
        ("step fence_source", "done"),
        ("step stop_replication", "done"),
        ("step drain", "failed"),
        ("step restart_replication", "done"),
        ("step unfence_source", "done"),
    ]
    drain = steps[2]
    assert drain["status"]["status_code"] == "ERROR"
    assert "did not reach the goal" in drain["status"]["description"]


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver: keeps every decoded export request."""

    received: ClassVar[list[ExportTraceServiceRequest]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.received.append(request)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *_args: Any) -> None:
        return None


@pytest.fixture
def collector() -> Iterator[tuple[str, list[ExportTraceServiceRequest]]]:
    _Collector.received = []
    server = HTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1/traces", _Collector.received
    finally:
        server.shutdown()


def test_spans_reach_an_otlp_collector_when_the_run_ends(
    tmp_path: Path,
    migrated_store: StateStore,
    collector: tuple[str, list[ExportTraceServiceRequest]],
) -> None:
    endpoint, received = collector
    world = _traced(tmp_path, migrated_store, otlp_endpoint=endpoint, service_name="drkit-dc")
    world.engine().start(world.plan(), RunOptions())
    # Flushed before start() returned: the provider is shut down with the run's span.
    spans = [
        (resource.resource, span)
        for request in received
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    names = sorted(span.name for _resource, span in spans)
    assert names == sorted(["failover run", *(f"step {name}" for name in STEPS)])
    services = {
        a.value.string_value for r, _s in spans for a in r.attributes if a.key == "service.name"
    }
    assert services == {"drkit-dc"}


def test_tracing_is_off_by_default_and_writes_nothing(
    tmp_path: Path, migrated_store: StateStore
) -> None:
    world = World(tmp_path, migrated_store)
    assert world.config.tracing == TracingConfig()
    world.engine().start(world.plan(), RunOptions())
    assert not list(tmp_path.glob("*.jsonl"))
