"""Every metric drkit exports, with its label names - read from the code's own metric sets, so
the alert rules, the dashboard and the docs are checked against what a scrape would show."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

import drkit.notifications
from drkit.health.metrics import MonitorMetrics
from drkit.offsets.metrics import CheckpointMetrics
from drkit.replication.metrics import ReplicationMetrics


def exported_metrics() -> dict[str, frozenset[str]]:
    """Series name -> its label names; a counter also as ``*_total``, a histogram also as
    ``*_bucket``/``*_sum``/``*_count`` (``le`` added to its buckets' labels)."""
    registry = CollectorRegistry()
    MonitorMetrics.create(registry)
    ReplicationMetrics.create(registry)
    CheckpointMetrics.create(registry)
    registry.register(drkit.notifications._FAILED)
    out: dict[str, frozenset[str]] = {}
    for collector in list(registry._collector_to_names):
        labels = frozenset(getattr(collector, "_labelnames", ()))
        for family in collector.describe():  # type: ignore[attr-defined]
            out[family.name] = labels
            if family.type == "counter":
                out[family.name + "_total"] = labels
            if family.type == "histogram":
                out[family.name + "_bucket"] = labels | {"le"}
                out[family.name + "_sum"] = labels
                out[family.name + "_count"] = labels
    return out
