"""config/prometheus-alerts.yml only alerts on metrics drkit exports, with their labels."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from prometheus_client import CollectorRegistry

import drkit.notifications
from drkit.health.metrics import MonitorMetrics
from drkit.replication.metrics import ReplicationMetrics

RULES = Path(__file__).resolve().parents[2] / "config" / "prometheus-alerts.yml"
_METRIC = re.compile(r"\bdrkit_[a-z_]+")
_LABEL = re.compile(r"\$labels\.([a-z_]+)")


def _exported() -> dict[str, set[str]]:
    """Every series name drkit exports -> its label names (counters also as ``*_total``)."""
    registry = CollectorRegistry()
    MonitorMetrics.create(registry)
    ReplicationMetrics.create(registry)
    registry.register(drkit.notifications._FAILED)
    out: dict[str, set[str]] = {}
    for collector in list(registry._collector_to_names):
        labels = set(getattr(collector, "_labelnames", ()))
        for family in collector.describe():  # type: ignore[attr-defined]
            out[family.name] = labels
            if family.type == "counter":
                out[family.name + "_total"] = labels
    return out


def test_every_rule_uses_exported_metrics_and_their_labels() -> None:
    exported = _exported()
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    assert rules
    for rule in rules:
        used = set(_METRIC.findall(rule["expr"]))
        assert used, rule["alert"]
        unknown = used - set(exported)
        assert not unknown, f"{rule['alert']}: drkit exports no {sorted(unknown)}"
        labels = set().union(*(exported[m] for m in used))
        text = " ".join(str(v) for v in rule.get("annotations", {}).values())
        missing = set(_LABEL.findall(text)) - labels
        assert not missing, f"{rule['alert']}: no label {sorted(missing)} on {sorted(used)}"


def test_prometheus_loads_the_rules() -> None:
    config = yaml.safe_load((RULES.parent / "prometheus.yml").read_text())
    assert config["rule_files"] == ["/etc/prometheus/drkit-alerts.yml"]
