"""Metrics as documented and bounded: every metric the docs name exists with the labels they
give it, and no metric carries a label whose values grow without bound (a group, a partition,
a run id, a member, a URL would each make a series per value, forever)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.metrics_catalog import exported_metrics

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
# name, then optionally {label, label="value", ...}
_MENTION = re.compile(r"\b(drkit_[a-z_]+)(?:\{([^}]*)\})?")

# Each label and why its values are bounded: by the config (clusters, flows, the topics a flow
# selects) or by a fixed set in the code (kinds, states, tasks, outcomes, procedures, events,
# operations, lag statuses, commit sources, histogram buckets).
BOUNDED_LABELS = {
    "cluster": "config: cluster aliases",
    "flow": "config: flows",
    "topic": "config: the topics a flow selects",
    "kind": "code: error and side-sync kinds",
    "state": "code: flow states, run states",
    "task": "code: monitor tasks",
    "outcome": "code: automation decision outcomes",
    "procedure": "code: failover procedures",
    "event": "code: notification events",
    "operation": "code: state-store operations",
    "status": "code: Burrow lag statuses",
    "source": "code: where commits are read from",
    "le": "code: histogram buckets",
}


def test_every_metric_the_docs_name_exists_with_the_labels_they_give() -> None:
    exported = exported_metrics()
    mentioned = 0
    for doc in DOCS:
        for name, labels in _MENTION.findall(doc.read_text()):
            if name.endswith("_"):  # a prefix in prose ("drkit_replication_*")
                continue
            mentioned += 1
            assert name in exported, f"{doc.name} names {name}: drkit exports no such metric"
            given = {part.split("=")[0].strip() for part in labels.split(",") if part.strip()}
            unknown = given - exported[name]
            assert not unknown, f"{doc.name}: {name} has no label {sorted(unknown)}"
    assert mentioned >= 10, mentioned


def test_every_label_is_from_a_bounded_set() -> None:
    for name, labels in exported_metrics().items():
        unbounded = labels - set(BOUNDED_LABELS)
        assert not unbounded, f"{name}: label {sorted(unbounded)} has no known bound"
