"""Prometheus metrics of the replication data plane.

Labels are bounded: ``flow`` (configured flows), ``topic`` (replicated topics), ``kind`` and
``state`` (enums) - never a partition, offset, group or worker id.  Names are module constants
so tests and dashboards share them.  Metrics live in an injected registry (the process default
unless given).
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from drkit.process_wide import ProcessWide

RECORDS = "drkit_replication_records"
BYTES = "drkit_replication_bytes"
FILTERED = "drkit_replication_filtered_records"
LOOP_SKIPPED = "drkit_replication_loop_skipped_records"
LATENCY = "drkit_replication_latency_seconds"
RECORD_AGE = "drkit_replication_record_age_seconds"
LAG = "drkit_replication_lag_records"
ERRORS = "drkit_replication_errors"
ASSIGNED = "drkit_replication_assigned_partitions"
DRIFT = "drkit_replication_topic_config_drift"
COMMITS = "drkit_replication_progress_commits"
LOST = "drkit_replication_lost_records"
FLOW_STATE = "drkit_replication_flow_state"
SIDE_SYNC_SUCCESS = "drkit_replication_side_sync_last_success_timestamp_seconds"

# The flow state gauge's values: the directive's states, and ``failed`` - the worker ended on an
# error it cannot ride out (named in the log, `drkit flows list` and `drkit status`).
FLOW_FAILED = "failed"
FLOW_STATES = ("running", "paused", "stopped", FLOW_FAILED)

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


@dataclass(frozen=True)
class ReplicationMetrics:
    records: Counter
    bytes: Counter
    filtered: Counter
    loop_skipped: Counter
    latency: Histogram
    record_age: Histogram
    lag: Gauge
    errors: Counter
    assigned: Gauge
    drift: Gauge
    commits: Counter
    lost: Counter
    flow_state: Gauge
    side_sync_success: Gauge

    @classmethod
    def create(cls, registry: CollectorRegistry | None = None) -> ReplicationMetrics:
        reg = registry if registry is not None else REGISTRY
        ft = ("flow", "topic")
        return cls(
            records=Counter(RECORDS, "Records written to the target", ft, registry=reg),
            bytes=Counter(BYTES, "Key+value+header bytes written to the target", ft, registry=reg),
            filtered=Counter(FILTERED, "Records dropped by transforms", ft, registry=reg),
            loop_skipped=Counter(
                LOOP_SKIPPED,
                "Records not sent back to the cluster they came from",
                ft,
                registry=reg,
            ),
            latency=Histogram(
                LATENCY,
                "Source timestamp to target acknowledgement (sampled)",
                ("flow",),
                buckets=_LATENCY_BUCKETS,
                registry=reg,
            ),
            record_age=Histogram(
                RECORD_AGE,
                "Source timestamp to consumption by the worker (sampled)",
                ("flow",),
                buckets=_LATENCY_BUCKETS,
                registry=reg,
            ),
            lag=Gauge(
                LAG, "Source records not yet replicated (assigned partitions)", ft, registry=reg
            ),
            errors=Counter(ERRORS, "Replication errors by kind", ("flow", "kind"), registry=reg),
            assigned=Gauge(
                ASSIGNED, "Source partitions assigned to this process", ("flow",), registry=reg
            ),
            drift=Gauge(
                DRIFT, "Target topic configs differing from the source", ("flow",), registry=reg
            ),
            commits=Counter(COMMITS, "Progress commits to the target", ("flow",), registry=reg),
            lost=Counter(
                LOST,
                "Source records deleted before they were replicated (loss events)",
                ft,
                registry=reg,
            ),
            flow_state=Gauge(
                FLOW_STATE,
                "1 for the state this process's worker of the flow is in (running, paused, "
                "stopped; see drkit.control; failed: it ended on an error for good), 0 for the "
                "others",
                ("flow", "state"),
                registry=reg,
            ),
            side_sync_success=Gauge(
                SIDE_SYNC_SUCCESS,
                "When a side sync (kind: acl_sync, schema_sync) last succeeded, Unix seconds",
                ("flow", "kind"),
                registry=reg,
            ),
        )


# Looked up when first made (not bound at import), so a test can stand in for ``create``.
_DEFAULT: ProcessWide[ReplicationMetrics] = ProcessWide(lambda: ReplicationMetrics.create())


def default_metrics() -> ReplicationMetrics:
    """The process-wide metrics in the default registry (created once)."""
    return _DEFAULT.get()


def show_flow_state(metrics: ReplicationMetrics, flow: str, state: str) -> None:
    """Set ``drkit_replication_flow_state``: 1 for ``state`` (one of FLOW_STATES), 0 for the
    others."""
    for each in FLOW_STATES:
        metrics.flow_state.labels(flow, each).set(1 if each == state else 0)
