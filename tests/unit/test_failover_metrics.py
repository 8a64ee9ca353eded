"""Failover runs and automation as metrics: counted by procedure and state, the latest run's
duration and RPO - left out, never 0, while unknown - and whether automation is paused."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from drkit.automation.journal import AutomationJournal
from drkit.automation.metrics import publish_failover_figures
from drkit.failover.model import RunState
from drkit.failover.run_result import RunResult
from drkit.health.metrics import MonitorMetrics
from drkit.lag import PartitionRpo
from drkit.store import StateStore
from tests.unit.test_failover_safety import World


def _rpo(*records: int | None) -> RunResult:
    return RunResult(rpo=tuple(PartitionRpo("orders", p, None, None, r, None, None)
                               for p, r in enumerate(records)))  # fmt: skip


def test_runs_and_automation_are_exported_and_an_unknown_rpo_is_left_out(tmp_path: Path) -> None:
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.ensure_current()
    world = World(tmp_path, store)
    registry = CollectorRegistry()
    metrics = MonitorMetrics.create(registry)

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    publish_failover_figures(store, metrics)
    assert value("drkit_automation_paused") == 0
    assert value("drkit_failover_last_run_duration_seconds", procedure="switchover") is None

    first = world.runs.create(world.plan(), "test", "")
    world.runs.finish(first.id, RunState.SUCCEEDED, _rpo(3, 4))
    second = world.runs.create(world.plan(), "test", "")
    AutomationJournal(store).pause("cli:ops", "maintenance")
    publish_failover_figures(store, metrics)
    runs = {"procedure": "switchover"}
    assert value("drkit_failover_runs", **runs, state="succeeded") == 1
    assert value("drkit_failover_runs", **runs, state=second.state.value) == 1
    # The latest switchover has not ended: no duration, no RPO yet (not 0).
    assert value("drkit_failover_last_run_duration_seconds", **runs) is None
    assert value("drkit_failover_last_run_rpo_records", **runs) is None
    assert value("drkit_automation_paused") == 1

    world.runs.finish(second.id, RunState.SUCCEEDED, _rpo(2, None))
    publish_failover_figures(store, metrics)
    duration = value("drkit_failover_last_run_duration_seconds", **runs)
    assert duration is not None and duration >= 0
    assert value("drkit_failover_last_run_rpo_records", **runs) is None  # one count unknown
    third = world.runs.create(world.plan(), "test", "")
    world.runs.finish(third.id, RunState.SUCCEEDED, _rpo(2, 5))
    publish_failover_figures(store, metrics)
    assert value("drkit_failover_last_run_rpo_records", **runs) == 7
    assert value("drkit_failover_runs", **runs, state="succeeded") == 3
    assert value("drkit_failover_runs", **runs, state=second.state.value) == 0  # moved on
