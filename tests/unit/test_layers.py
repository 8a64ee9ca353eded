"""The pure decision core loads no Kafka client: the translation, the failover planner, the
drill's recount and measures, health and automation decisions import value types
(drkit.records, drkit.failover.facts), never the adapter (drkit.kafka, the only importer of
confluent_kafka).  Checked in a fresh interpreter, where nothing else has loaded it yet."""

from __future__ import annotations

import subprocess
import sys

import pytest

PURE = [
    "drkit.translation",
    "drkit.failover.plan",
    "drkit.failover.facts",
    "drkit.drills.recount",
    "drkit.drills.measure",
    "drkit.drills.summary",
    "drkit.health.evaluation",
    "drkit.health.quorum",
    "drkit.automation.decision",
    "drkit.replication.offset_sync",
    "drkit.topology.policy",
    "drkit.status.document",
]


@pytest.mark.parametrize("module", PURE)
def test_a_pure_module_loads_no_kafka_client(module: str) -> None:
    probe = f"import sys, {module}; print(sorted(m for m in sys.modules if 'confluent' in m))"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "[]", f"{module} loads {loaded}"
