"""The latest drills in status and metrics (issue 48, item 6): whoever ran them - a monitor's
schedule or an operator - the monitor's gauges and ``drkit status`` say whether the latest of
each kind passed and when it ended; a kind never run has no series and no line."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from drkit.cli import cli
from drkit.config import load_config_text
from drkit.drills.figures import publish_drill_figures
from drkit.drills.repo import DrillRepository
from drkit.drills.report import Verdict
from drkit.health.metrics import MonitorMetrics
from drkit.status import current_status
from drkit.store.db import StateStore
from tests.drill_samples import small_report as report


def _gauges(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    return {
        (sample.name, sample.labels["kind"]): sample.value
        for family in registry.collect()
        for sample in family.samples
        if sample.name.startswith("drkit_drill_")
    }


def test_the_latest_drill_of_each_kind_in_metrics_and_status(
    migrated_store: StateStore, tmp_path: Path
) -> None:
    registry = CollectorRegistry()
    metrics = MonitorMetrics.create(registry)
    publish_drill_figures(migrated_store, metrics)
    assert _gauges(registry) == {}  # no drill yet: no series, never a 0 read as a failure
    drills = DrillRepository(migrated_store)
    full = drills.start("broker-loss", "dc1->dc2")
    drills.finish(full, report("a", Verdict.POLICY_BREACHED, lost=3), "/r/a")
    ready = drills.start("readiness", "dc1->dc2")
    drills.finish(ready, replace(report(), mode="readiness", rto=None, rpo=(),
                                 verdict=Verdict.READY), "/r/b")  # fmt: skip
    crashed = drills.start("readiness", "dc1->dc2")  # the newest readiness did not finish
    drills.fail(crashed, "interrupted")
    drills.start("broker-loss", "dc1->dc2")  # running: not counted yet
    publish_drill_figures(migrated_store, metrics)
    gauges = _gauges(registry)
    assert gauges[("drkit_drill_last_passed", "drill")] == 0.0  # PolicyBreached
    assert gauges[("drkit_drill_last_passed", "readiness")] == 0.0  # failed to run
    assert gauges[("drkit_drill_last_finished_timestamp_seconds", "drill")] > 1.7e9

    config = load_config_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\nflows: [{source: dc1, target: dc2}]\n",
        env={},
    )
    document = current_status(config, migrated_store).to_json()
    assert document["drills"]["drill"]["id"] == full
    assert document["drills"]["drill"]["verdict"] == "PolicyBreached"
    assert document["drills"]["drill"]["passed"] is False
    assert document["drills"]["readiness"]["id"] == crashed
    assert document["drills"]["readiness"]["state"] == "failed"


def test_drkit_status_prints_the_latest_drills(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'drkit.db'}"
    store = StateStore(url)
    store.upgrade()
    drills = DrillRepository(store)
    ready = drills.start("readiness", "dc1->dc2")
    drills.finish(ready, replace(report(), mode="readiness", rto=None, rpo=(),
                                 verdict=Verdict.READY), "/r/b")  # fmt: skip
    path = tmp_path / "c.yaml"
    path.write_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        f"  dc2: {{bootstrap_servers: '127.0.0.1:2'}}\nstate_store: {{url: '{url}'}}\n"
    )
    done = CliRunner().invoke(cli, ["status", "--no-probe", "--config", str(path)])
    assert done.exit_code == 0, done.output
    assert f"last readiness: #{ready} dc1->dc2 Ready at " in done.output
    assert "last drill:" not in done.output
