"""Scheduler jobs are budgeted and isolated: a hanging probe is cut off and counted as a failed
probe, and the other jobs keep running (real APScheduler, SQLite state store)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from apscheduler.schedulers.background import BackgroundScheduler
from prometheus_client import CollectorRegistry

from drkit.config import load_config_text
from drkit.health.evaluation import ClusterState, ProbeResult
from drkit.health.metrics import MonitorMetrics
from drkit.health.monitor import Monitor
from drkit.health.probes import ClusterProbe
from drkit.store import StateStore

CONFIG = """
clusters:
  stuck: {bootstrap_servers: "127.0.0.1:9"}
  fine: {bootstrap_servers: "127.0.0.1:10"}
health: {probe_interval_s: 0.5, probe_timeout_s: 0.2, failure_threshold: 2}
"""


class HangingProber:
    def __init__(self) -> None:
        self.release = threading.Event()

    def probe(self) -> ProbeResult:
        self.release.wait(30)  # hangs far beyond the budget
        return ProbeResult("stuck", time.time(), reachable=True, brokers=1, canary_ok=True)


class CountingProber:
    def __init__(self) -> None:
        self.calls = 0

    def probe(self) -> ProbeResult:
        self.calls += 1
        return ProbeResult("fine", time.time(), reachable=True, brokers=1, canary_ok=True)


def test_hanging_probe_is_cut_off_and_the_scheduler_keeps_going(tmp_path: Path) -> None:
    config = load_config_text(CONFIG, env={})
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.upgrade()
    registry = CollectorRegistry()
    hanging, counting = HangingProber(), CountingProber()
    probers: dict[str, ClusterProbe] = {"stuck": hanging, "fine": counting}
    monitor = Monitor(config, "o1", store, MonitorMetrics.create(registry), probers)
    scheduler = BackgroundScheduler(job_defaults={"coalesce": True, "max_instances": 1})
    for name in ("probe:stuck", "probe:fine"):
        scheduler.add_job(monitor.run_job, "interval", seconds=0.5, args=[name], id=name)
    scheduler.start()

    def timeouts() -> float:
        value = registry.get_sample_value(
            "drkit_monitor_task_failures_total", {"task": "probe:stuck", "kind": "timeout"}
        )
        return value or 0.0

    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and (timeouts() < 3 or counting.calls < 5):
            time.sleep(0.1)
    finally:
        # Wait for the jobs under way (each returns within its budget), so that the counts
        # below are final; the hung probe's own thread is abandoned, not waited for.
        scheduler.shutdown(wait=True)
        hanging.release.set()
    # Overrunning probes were recorded as failed probes: two in a row make it UNAVAILABLE.
    assert monitor.health["stuck"].state is ClusterState.UNAVAILABLE
    # The first run overran its budget; later ones refused to start beside the hung one.
    assert "still going" in (monitor.health["stuck"].last.error or "")  # type: ignore[union-attr]
    assert timeouts() >= 3
    # The failure counter counts each failed probe once: as many as the evaluation saw.
    assert timeouts() == monitor.health["stuck"].consecutive_failed
    assert registry.get_sample_value(
        "drkit_monitor_task_duration_seconds_count", {"task": "probe:stuck"}
    ) == (timeouts())
    # ... while the healthy cluster kept being probed on schedule, each run timed, none failed.
    assert counting.calls >= 5
    assert monitor.health["fine"].state is ClusterState.HEALTHY
    assert (
        registry.get_sample_value(
            "drkit_monitor_task_duration_seconds_count", {"task": "probe:fine"}
        )
        == counting.calls
    )
    for kind in ("timeout", "error"):
        assert (
            registry.get_sample_value(
                "drkit_monitor_task_failures_total", {"task": "probe:fine", "kind": kind}
            )
            is None
        )
    # The state gauges say what the evaluation says (2 unavailable, 0 healthy).
    assert registry.get_sample_value("drkit_cluster_state", {"cluster": "stuck"}) == 2.0
    assert registry.get_sample_value("drkit_cluster_state", {"cluster": "fine"}) == 0.0


def test_a_job_that_raises_is_contained(tmp_path: Path) -> None:
    config = load_config_text(CONFIG, env={})
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.upgrade()
    registry = CollectorRegistry()

    class Exploding:
        def probe(self) -> ProbeResult:
            raise RuntimeError("bug in a probe")

    probers = {"fine": Exploding()}
    monitor = Monitor(config, "o1", store, MonitorMetrics.create(registry), probers)
    monitor.run_job("probe:fine")  # must not raise
    assert (
        registry.get_sample_value(
            "drkit_monitor_task_failures_total", {"task": "probe:fine", "kind": "error"}
        )
        == 1.0
    )
