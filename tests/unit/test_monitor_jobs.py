"""Scheduler jobs are budgeted and isolated: a hanging probe is cut off and counted as a failed
probe, and the other jobs keep running (real APScheduler, SQLite state store)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from apscheduler.schedulers.background import BackgroundScheduler
from prometheus_client import CollectorRegistry

from drkit.config import load_config_text
from drkit.health.evaluation import ClusterState, ProbeOutcome, ProbeResult
from drkit.health.jobs import BudgetedRunner, BudgetExceeded, JobAbandoned
from drkit.health.metrics import MonitorMetrics
from drkit.health.monitor import Monitor
from drkit.health.probes import ClusterProbe
from drkit.kafka.admin import KafkaAdmin
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
    # This process's CPU waits are not read: a loaded test machine must not make the hung
    # probe's overruns look like starvation.
    runner = BudgetedRunner(cpu_waits=lambda: None)
    monitor = Monitor(
        config, "o1", store, MonitorMetrics.create(registry), probers, runner, connect=KafkaAdmin
    )
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
    monitor = Monitor(
        config, "o1", store, MonitorMetrics.create(registry), probers, connect=KafkaAdmin
    )
    monitor.run_job("probe:fine")  # must not raise
    assert (
        registry.get_sample_value(
            "drkit_monitor_task_failures_total", {"task": "probe:fine", "kind": "error"}
        )
        == 1.0
    )


class AnswersThenHangs(HangingProber):
    """Answers its first probe, then hangs like a monitor that gets no CPU."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def probe(self) -> ProbeResult:
        self.calls += 1
        if self.calls == 1:
            return ProbeResult("stuck", time.time(), reachable=True, brokers=1, canary_ok=True)
        return super().probe()


class StarvingClock:
    """Run-queue waits of a process that waits for a CPU all the time (1 s per read)."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> dict[int, int]:
        self.reads += 1
        return {1: self.reads * 1_000_000_000}


def test_overruns_while_the_monitor_is_starved_are_inconclusive_not_failures(
    tmp_path: Path,
) -> None:
    config = load_config_text(CONFIG, env={})
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.upgrade()
    registry = CollectorRegistry()
    prober = AnswersThenHangs()
    monitor = Monitor(
        config,
        "o1",
        store,
        MonitorMetrics.create(registry),
        {"stuck": prober, "fine": CountingProber()},
        BudgetedRunner(cpu_waits=StarvingClock()),
        connect=KafkaAdmin,
    )
    try:
        for _ in range(5):  # failure_threshold is 2: five failures would be UNAVAILABLE
            monitor.run_job("probe:stuck")
    finally:
        prober.release.set()
    health = monitor.health["stuck"]
    assert health.state is ClusterState.HEALTHY
    assert health.consecutive_failed == 0 and health.consecutive_inconclusive == 4
    assert health.last is not None and health.last.outcome is ProbeOutcome.INCONCLUSIVE
    assert "for a CPU" in (health.last.error or "")
    starved = registry.get_sample_value(
        "drkit_monitor_task_failures_total", {"task": "probe:stuck", "kind": "starved"}
    )
    assert starved == 4.0
    # The gauges keep what the last conclusive probe measured.
    assert registry.get_sample_value("drkit_cluster_brokers", {"cluster": "stuck"}) == 1.0
    liveness = monitor.liveness()
    assert not liveness.ok
    assert any("probes of stuck in a row inconclusive" in p for p in liveness.problems)


def test_an_overrun_is_the_monitors_own_only_when_it_waited_for_a_cpu() -> None:
    def exceeded(waited_s: float | None) -> BudgetExceeded:
        return BudgetExceeded("job probe:dc1 exceeded its 2.0s budget", 2.0, waited_s)

    assert exceeded(1.5).starved
    assert exceeded(0.5).starved  # a quarter of the time
    assert not exceeded(0.4).starved  # a loaded host, but the cluster was slow
    assert not exceeded(None).starved  # the kernel does not say: the cluster's
    assert str(exceeded(1.5)).endswith("(this process waited 1.5s of 2.0s for a CPU)")
    assert str(exceeded(None)) == "job probe:dc1 exceeded its 2.0s budget"


def test_a_stopping_monitor_stops_waiting_for_its_jobs_at_once() -> None:
    """Issue 45: a Ctrl-C of ``drkit monitor`` waited for every job under way to use up its
    budget (the scheduler's pool threads are joined at exit) - 6-7 s against a hung broker by
    default, a minute with a long probe timeout.  Once the runner is abandoned, a waiting run
    raises JobAbandoned at once and a new one starts no work."""
    runner = BudgetedRunner(cpu_waits=lambda: None)
    hung, entered = threading.Event(), threading.Event()
    raised: list[BaseException] = []

    def job() -> None:
        entered.set()
        hung.wait()

    def waiting() -> None:
        try:
            runner.run(job, 60.0, "probe:stuck")
        except BaseException as err:
            raised.append(err)

    thread = threading.Thread(target=waiting)
    thread.start()
    # The run is waiting on its job: the job has started (a condition, not a fixed sleep).
    assert entered.wait(30), "the job never started"
    runner.abandon()
    thread.join(10.0)  # a fraction of the budget: only a wait that ignores abandon() fails it
    assert not thread.is_alive(), "still waiting for its job after abandon()"
    assert len(raised) == 1 and isinstance(raised[0], JobAbandoned), raised
    started: list[str] = []
    with pytest.raises(JobAbandoned):
        runner.run(lambda: started.append("work"), 60.0, "probe:other")
    assert started == []
    hung.set()
