"""The monitor with its state store refusing writes: /healthz fails naming the store, metrics
show it, probing goes on, and what was missed is written once the store is back.

A real SQLite store whose connections are switched to ``PRAGMA query_only`` - SQLite then
answers every write with "attempt to write a readonly database", as it does for a file the
process may not write - and the monitor's real scheduler (:func:`make_scheduler`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import event, select

from drkit.config import load_config_text
from drkit.health.evaluation import ClusterState, ProbeResult
from drkit.health.jobs import JobKind, make_scheduler
from drkit.health.metrics import MonitorMetrics
from drkit.health.monitor import Monitor
from drkit.kafka.admin import KafkaAdmin
from drkit.status import status_source
from drkit.status.web import StatusApp
from drkit.store import StateStore
from drkit.store.models import HealthTransition, ObserverState

T = TypeVar("T")

CONFIG = """
clusters:
  flaky: {bootstrap_servers: "127.0.0.1:9"}
  steady: {bootstrap_servers: "127.0.0.1:10"}
health: {probe_interval_s: 0.3, probe_timeout_s: 0.2, failure_threshold: 2,
         recovery_threshold: 2, observation_window_s: 5}
"""


class ReadOnlySwitch:
    """Makes every (new) connection of ``store`` read-only while on."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.on = False
        event.listen(store.engine, "connect", self._connect)

    def _connect(self, connection: Any, _record: object) -> None:
        if self.on:
            cursor = connection.cursor()
            cursor.execute("PRAGMA query_only=ON")
            cursor.close()

    def set(self, on: bool) -> None:
        self.on = on
        self.store.engine.dispose()  # pooled connections are replaced by switched ones


class Prober:
    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.up = True
        self.calls = 0

    def probe(self) -> ProbeResult:
        self.calls += 1
        return ProbeResult(
            self.alias, time.time(), reachable=self.up, brokers=1 if self.up else 0,
            canary_ok=True if self.up else None, error=None if self.up else "refused",
        )  # fmt: skip


def eventually(check: Callable[[], T | None], timeout: float = 15, what: str = "") -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout}s: {what}")


def get(app: StatusApp, path: str) -> tuple[str, bytes]:
    answer: list[str] = []
    body = b"".join(
        app({"PATH_INFO": path, "REQUEST_METHOD": "GET"}, lambda s, h: answer.append(s))
    )
    return answer[0], body


@pytest.fixture
def monitored(
    tmp_path: Path,
) -> Iterator[tuple[Monitor, ReadOnlySwitch, CollectorRegistry, dict[str, Prober]]]:
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.upgrade()
    registry = CollectorRegistry()
    probers = {"flaky": Prober("flaky"), "steady": Prober("steady")}
    config = load_config_text(CONFIG, env={})
    monitor = Monitor(
        config, "o1", store, MonitorMetrics.create(registry), probers, connect=KafkaAdmin
    )
    scheduler = make_scheduler(monitor)
    scheduler.start()
    try:
        yield monitor, ReadOnlySwitch(store), registry, probers
    finally:
        scheduler.shutdown(wait=False)


def stored_state(monitor: Monitor, alias: str) -> str | None:
    with monitor.store.session() as session:
        row = session.scalars(
            select(ObserverState).where(ObserverState.cluster == alias)
        ).one_or_none()
        return None if row is None else row.state


def test_store_refusing_writes_fails_healthz_shows_in_metrics_and_probing_goes_on(
    monitored: tuple[Monitor, ReadOnlySwitch, CollectorRegistry, dict[str, Prober]],
) -> None:
    monitor, switch, registry, probers = monitored
    app = StatusApp(
        status_source(monitor.config, monitor.store, monitor.status_failed), monitor.liveness
    )

    def metric(name: str, **labels: str) -> float:
        return registry.get_sample_value(name, labels) or 0.0

    eventually(lambda: stored_state(monitor, "flaky") == "HEALTHY", what="flaky HEALTHY stored")
    assert get(app, "/healthz") == ("200 OK", b"ok\n")
    assert metric("drkit_state_store_up") == 1.0

    switch.set(True)
    probers["flaky"].up = False

    def failing() -> bytes | None:
        status, body = get(app, "/healthz")
        return body if status.startswith("503") else None

    body = eventually(failing, what="/healthz failing")
    assert str(monitor.store.url).removeprefix("sqlite:///") in body.decode()  # names the store
    # Probing and evaluation go on without the store: the in-memory state and its gauge move.
    eventually(lambda: monitor.health["flaky"].state is ClusterState.UNAVAILABLE, what="flaky down")
    assert metric("drkit_cluster_state", cluster="flaky") == 2.0
    steady = probers["steady"]
    calls = steady.calls
    eventually(lambda: steady.calls >= calls + 5, what="steady probed on")
    assert metric("drkit_state_store_up") == 0.0
    assert metric("drkit_state_store_errors_total", operation="probe") >= 2
    assert stored_state(monitor, "flaky") == "HEALTHY"  # nothing could be written
    assert get(app, "/api/status")[0] == "200 OK"  # reads still work on a read-only store

    switch.set(False)
    eventually(lambda: get(app, "/healthz")[0] == "200 OK", what="/healthz ok again")
    assert metric("drkit_state_store_up") == 1.0
    # The newest state, and the transition missed while the store was down, are written.
    eventually(lambda: stored_state(monitor, "flaky") == "UNAVAILABLE", what="state written")
    with monitor.store.session() as session:
        changes = [
            (t.from_state, t.to_state)
            for t in session.scalars(
                select(HealthTransition)
                .where(
                    HealthTransition.subject == "flaky", HealthTransition.subject_kind == "cluster"
                )
                .order_by(HealthTransition.id)
            )
        ]
    assert changes == [("UNKNOWN", "HEALTHY"), ("HEALTHY", "UNAVAILABLE")]


def test_healthz_fails_when_jobs_stop_finishing(
    monitored: tuple[Monitor, ReadOnlySwitch, CollectorRegistry, dict[str, Prober]],
) -> None:
    monitor, _switch, _registry, _probers = monitored
    assert monitor.liveness().ok
    # 5 intervals (0.3 s) plus a job budget (0.4 s) without a finished job: stuck.
    later = monitor.liveness(now=time.monotonic() + 60)
    assert not later.ok and len(later.problems) == 1
    assert "60" in later.problems[0] or "59" in later.problems[0]


def test_status_is_served_on_an_ipv6_listen_address(
    monitored: tuple[Monitor, ReadOnlySwitch, CollectorRegistry, dict[str, Prober]],
) -> None:
    import urllib.request

    from drkit.status.web import serve

    monitor, _switch, _registry, _probers = monitored
    server = serve(
        StatusApp(
            status_source(monitor.config, monitor.store, monitor.status_failed), monitor.liveness
        ),
        "::1",
        0,
    )
    try:
        url = f"http://[::1]:{server.server_port}/api/status"
        with urllib.request.urlopen(url, timeout=5) as reply:
            assert reply.status == 200
            assert set(json.loads(reply.read())["clusters"]) == {"flaky", "steady"}
    finally:
        server.shutdown()


def test_a_read_the_read_only_store_answers_does_not_mark_it_up(
    monitored: tuple[Monitor, ReadOnlySwitch, CollectorRegistry, dict[str, Prober]],
) -> None:
    """The quorum job reads every observer's state: on a store that refuses writes the read
    succeeds, and used to set drkit_state_store_up back to 1 (and /healthz to 200) until the
    next write failed - the store flapped "up" several times a second."""
    monitor, switch, registry, _probers = monitored
    eventually(lambda: stored_state(monitor, "flaky") == "HEALTHY", what="flaky HEALTHY stored")
    eventually(lambda: set(monitor.evaluate_quorum().values()) == {ClusterState.HEALTHY},
               what="the quorum's states recorded")  # fmt: skip
    switch.set(True)
    monitor.run_job(f"{JobKind.PROBE}:flaky")  # writes an observation: refused
    assert not monitor.store_watch.health.available
    # Reads the observers' states (answered) and decides what it decided before: no write.
    assert set(monitor.evaluate_quorum().values()) == {ClusterState.HEALTHY}
    assert not monitor.store_watch.health.available
    assert registry.get_sample_value("drkit_state_store_up") == 0.0
