"""The automatic failover job acts through the engine whenever its decision acts - also when
no RPO estimate was needed (``accept_any_rpo``).  (A drill found it deciding "ACTS" every
second and never starting a run.)"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from prometheus_client import CollectorRegistry

from drkit.automation.decision import AutomationSnapshot
from drkit.automation.runner import AutomaticFailover
from drkit.config.loader import load_config_text
from drkit.failover.model import Procedure, RunState
from drkit.health.metrics import MonitorMetrics
from drkit.store import StateStore
from tests.unit.test_automation_decision import _good

CONFIG = """
clusters:
  dc1: {bootstrap_servers: "127.0.0.1:1"}
  dc2: {bootstrap_servers: "127.0.0.1:2"}
flows: [{source: dc1, target: dc2}]
failover: {automatic: true, accept_any_rpo: true, allow_single_observer: true}
"""


class RecordingEngine:
    def __init__(self) -> None:
        self.planned: list[tuple[Procedure, str, str]] = []
        self.started: list[Any] = []

    def plan(self, procedure: Procedure, source: str, target: str, _options: Any) -> Any:
        self.planned.append((procedure, source, target))
        return SimpleNamespace(rpo=(), rpo_records=0, blockers=[])

    def start(self, plan: Any, _options: Any, **_kw: Any) -> Any:
        self.started.append(plan)
        return SimpleNamespace(id=1, state=RunState.SUCCEEDED, result={})


class Fixed(AutomaticFailover):
    def __init__(self, snapshot: AutomationSnapshot, **kw: Any) -> None:
        super().__init__(**kw)
        self.fixed = snapshot

    def snapshot(self, source: str, target: str) -> AutomationSnapshot:
        return self.fixed


def test_accepting_any_rpo_still_starts_the_failover(tmp_path: Path) -> None:
    config = load_config_text(CONFIG, env={})
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.ensure_current()
    engine = RecordingEngine()
    good = _good()
    snapshot = replace(good, rpo=None, failover=config.failover)
    registry = CollectorRegistry()
    job = Fixed(
        snapshot, config=config, store=store, state_dir=tmp_path, observer="o1",
        engine=lambda: engine, metrics=MonitorMetrics.create(registry),
    )  # fmt: skip
    [decision] = job.tick()
    assert decision.act, decision.summary()
    assert engine.planned == [(Procedure.FAILOVER, "dc1", "dc2")]
    assert len(engine.started) == 1
    acted = registry.get_sample_value("drkit_automation_decisions_total", {"outcome": "acted"})
    assert acted == 1
