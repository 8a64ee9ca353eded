"""Prometheus metrics of the monitor (labels: cluster, flow, task, status, operation - all
bounded by the config or by an enum).  No label is called ``job``: Prometheus puts its own
``job`` label (the scrape job) on every series, and ours would be renamed ``exported_job``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from drkit.health.evaluation import ClusterState
from drkit.health.observations import FlowObservation, measures
from drkit.process_wide import ProcessWide

# The gauge encoding of a state (documented in the gauges' help).
STATE_VALUE = {
    ClusterState.UNKNOWN: -1,
    ClusterState.HEALTHY: 0,
    ClusterState.DEGRADED: 1,
    ClusterState.UNAVAILABLE: 2,
}


@dataclass(frozen=True)
class MonitorMetrics:
    task_duration: Histogram
    task_failures: Counter
    cluster_state: Gauge
    quorum_state: Gauge
    down_votes: Gauge
    probe_latency: Gauge
    canary: Gauge
    brokers: Gauge
    offline: Gauge
    under_min_isr: Gauge
    # A flow observation's gauges by field name, as its fields declare them
    # (drkit.health.observations: a measure with a ``gauge``).
    flows: Mapping[str, Gauge]
    groups: Gauge
    store_up: Gauge
    store_errors: Counter
    failover_runs: Gauge
    failover_last_duration: Gauge
    failover_last_rpo: Gauge
    automation_paused: Gauge
    automation_decisions: Counter
    drill_passed: Gauge
    drill_finished: Gauge

    @classmethod
    def create(
        cls,
        registry: CollectorRegistry | None = None,
        observed: type[FlowObservation] | None = None,
    ) -> MonitorMetrics:
        """The monitor's metrics in ``registry``; the flow gauges of ``observed``'s fields
        (FlowObservation's by default)."""
        reg = registry if registry is not None else REGISTRY
        c, f = ("cluster",), ("flow",)
        return cls(
            task_duration=Histogram(
                "drkit_monitor_task_duration_seconds",
                "Monitor task durations (task: probe:<cluster>, flow:<flow>, ...)",
                ("task",),
                registry=reg,
            ),
            task_failures=Counter(
                "drkit_monitor_task_failures",
                "Monitor tasks that failed or overran",
                ("task", "kind"),
                registry=reg,
            ),
            cluster_state=Gauge(
                "drkit_cluster_state",
                "This observer's state (-1 unknown, 0 healthy, 1 degraded, 2 unavailable)",
                c,
                registry=reg,
            ),
            quorum_state=Gauge(
                "drkit_cluster_quorum_state", "State agreed by the observers", c, registry=reg
            ),
            down_votes=Gauge(
                "drkit_cluster_down_votes", "Observers reporting it unavailable", c, registry=reg
            ),
            probe_latency=Gauge(
                "drkit_cluster_probe_latency_seconds", "Metadata round trip", c, registry=reg
            ),
            canary=Gauge(
                "drkit_cluster_canary_round_trip_seconds",
                "acks=all produce + consume",
                c,
                registry=reg,
            ),
            brokers=Gauge("drkit_cluster_brokers", "Brokers answering", c, registry=reg),
            offline=Gauge(
                "drkit_cluster_offline_partitions", "Partitions without leader", c, registry=reg
            ),
            under_min_isr=Gauge(
                "drkit_cluster_under_min_isr_partitions",
                "Partitions below min.insync.replicas",
                c,
                registry=reg,
            ),
            flows={
                name: Gauge(known.gauge.name, known.gauge.help, f, registry=reg)
                for name, known in measures(observed)
                if known.gauge is not None
            },
            groups=Gauge(
                "drkit_flow_groups_by_lag_status",
                "Consumer groups per lag status",
                ("flow", "status"),
                registry=reg,
            ),
            store_up=Gauge(
                "drkit_state_store_up",
                "1 while the state store takes the monitor's reads and writes, else 0",
                registry=reg,
            ),
            store_errors=Counter(
                "drkit_state_store_errors",
                "State-store operations that failed or overran their budget",
                ("operation",),
                registry=reg,
            ),
            failover_runs=Gauge(
                "drkit_failover_runs",
                "Failover runs in the state store, by procedure and state",
                ("procedure", "state"),
                registry=reg,
            ),
            failover_last_duration=Gauge(
                "drkit_failover_last_run_duration_seconds",
                "Start to end of the latest finished run of each procedure",
                ("procedure",),
                registry=reg,
            ),
            failover_last_rpo=Gauge(
                "drkit_failover_last_run_rpo_records",
                "Records the target never got in the latest run of each procedure (absent: "
                "unknown)",
                ("procedure",),
                registry=reg,
            ),
            drill_passed=Gauge(
                "drkit_drill_last_passed",
                "1 when the latest drill of each kind (drill, readiness) met its policy or was "
                "ready, 0 when not or when it failed to run (absent: none yet)",
                ("kind",),
                registry=reg,
            ),
            drill_finished=Gauge(
                "drkit_drill_last_finished_timestamp_seconds",
                "When the latest drill of each kind ended (absent: none yet)",
                ("kind",),
                registry=reg,
            ),
            automation_paused=Gauge(
                "drkit_automation_paused",
                "1 while automatic failover is paused ('drkit automation pause'), else 0",
                registry=reg,
            ),
            automation_decisions=Counter(
                "drkit_automation_decisions",
                "Automatic-failover decisions of this monitor (outcome: acted, held, refused)",
                ("outcome",),
                registry=reg,
            ),
        )


# Looked up when first made (not bound at import), so a test can stand in for ``create``.
_DEFAULT: ProcessWide[MonitorMetrics] = ProcessWide(lambda: MonitorMetrics.create())


def default_metrics() -> MonitorMetrics:
    """The process-wide metrics in the default registry (created once)."""
    return _DEFAULT.get()
