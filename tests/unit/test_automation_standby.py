"""Automation chooses the standby as ``drkit failover --from`` does (issue 48 item 1): when a
source's several standbys would all act, the tick acts on the smallest RPO - not on the first
pair in alphabetical order, as it did - and records why, in every acting pair's decision."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from prometheus_client import CollectorRegistry

from drkit.automation.decision import AutomationSnapshot, CheckName, Decision
from drkit.automation.journal import AutomationJournal
from drkit.automation.runner import AutomaticFailover
from drkit.config.loader import load_config_text
from drkit.failover.model import Finding, Procedure, RunState, Severity
from drkit.failover.run_result import RunResult
from drkit.health.evaluation import ClusterState
from drkit.health.metrics import MonitorMetrics
from drkit.kafka.admin import KafkaAdmin
from drkit.lag import PartitionRpo
from drkit.store import StateStore
from tests.unit.test_automation_decision import _good

CONFIG = """
clusters:
  dc1: {bootstrap_servers: "127.0.0.1:1"}
  dc2: {bootstrap_servers: "127.0.0.1:2"}
  dc3: {bootstrap_servers: "127.0.0.1:3"}
flows: [{source: dc1, target: dc2}, {source: dc1, target: dc3}]
failover: {automatic: true, accept_any_rpo: true, allow_single_observer: true}
"""


class FiguresEngine:
    """Plans with given RPO figures per target; records what it was asked to start."""

    def __init__(self, figures: dict[str, tuple[int | None, float]], blocked: str = "") -> None:
        self.figures = figures
        self.blocked = blocked
        self.started: list[str] = []

    def plan(self, procedure: Procedure, source: str, target: str, _options: Any) -> Any:
        records, seconds = self.figures[target]
        row = PartitionRpo("orders", 0, None, None, records, None, seconds)
        blockers = (
            [Finding(Severity.BLOCKER, "x", f"{target} is blocked")]
            if target == self.blocked
            else []
        )
        return SimpleNamespace(
            procedure=procedure, source=source, target=target, rpo=(row,), rpo_records=records,
            blockers=blockers, source_reachable=False, target_reachable=True,
        )  # fmt: skip

    def start(self, plan: Any, options: Any, **kw: Any) -> Any:
        self.started.append(plan.target)
        return SimpleNamespace(id=7, state=RunState.SUCCEEDED, result=RunResult())


class PerPair(AutomaticFailover):
    """Every pair sees the same healthy world, except the targets named down."""

    def __init__(self, snapshot: AutomationSnapshot, down: tuple[str, ...] = (), **kw: Any):
        super().__init__(**kw)
        self.fixed = snapshot
        self.down = down

    def snapshot(self, source: str, target: str) -> AutomationSnapshot:
        views = self.fixed.target_views
        if target in self.down:
            views = tuple(replace(v, state=ClusterState.UNAVAILABLE) for v in views)
        return replace(self.fixed, source=source, target=target, target_views=views)

    def source_answers(self, source: str) -> bool:
        return False


def _job(tmp_path: Path, engine: FiguresEngine, down: tuple[str, ...] = ()) -> PerPair:
    config = load_config_text(CONFIG, env={})
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.ensure_current()
    snapshot = replace(_good(), rpo=None, failover=config.failover)
    return PerPair(
        snapshot, down, config=config, store=store, state_dir=tmp_path, observer="o1",
        engine=lambda: engine, metrics=MonitorMetrics.create(CollectorRegistry()),
        connect=KafkaAdmin, clock=lambda: 10_000.0,
    )  # fmt: skip


def _standby(decision: Decision) -> str:
    [check] = [c for c in decision.checks if c.name is CheckName.STANDBY]
    return check.detail


def test_the_standby_with_the_smaller_rpo_is_failed_over_to_not_the_first_by_name(
    tmp_path: Path,
) -> None:
    engine = FiguresEngine({"dc2": (400, 30.0), "dc3": (0, 1.0)})
    job = _job(tmp_path, engine)
    decisions = {d.target: d for d in job.tick()}
    assert engine.started == ["dc3"]  # main started dc2: first in alphabetical order
    assert decisions["dc3"].act and not decisions["dc2"].act
    assert "400" in _standby(decisions["dc2"]) and "dc3" in _standby(decisions["dc2"])
    assert "dc2" in _standby(decisions["dc3"])  # the winner names the loser and its figures
    stored = {d.target: d for d in AutomationJournal(job.store).decisions(10)}
    assert stored["dc3"].act and stored["dc3"].run_id == 7
    assert not stored["dc2"].act and "standby" in stored["dc2"].summary


def test_equal_figures_go_to_the_first_name_whatever_the_order() -> None:
    """The tie rule is choose's (drkit.failover.standby_choice): the name decides."""
    from drkit.automation.decision import RpoEstimate, decide
    from drkit.automation.runner import choose_among

    good = _good()
    plans = {t: FiguresEngine({t: (3, 2.0)}).plan(Procedure.FAILOVER, "dc1", t, None) for t in
             ("dc2", "dc3")}  # fmt: skip
    evaluated = [
        (decide(replace(good, target=t)), plans[t], RpoEstimate(3, 2.0, 10_000.0))
        for t in ("dc3", "dc2")
    ]
    acting = [d.target for d, _p, _e in choose_among(evaluated, 10_001.0) if d.act]
    assert acting == ["dc2"]


def test_a_standby_the_quorum_sees_down_is_left_out_and_named(tmp_path: Path) -> None:
    engine = FiguresEngine({"dc2": (0, 0.5), "dc3": (50, 9.0)})
    job = _job(tmp_path, engine, down=("dc2",))
    decisions = {d.target: d for d in job.tick()}
    assert engine.started == ["dc3"]
    # One acting pair: no choice to make, its decision as before; dc2's holds on its health.
    assert not decisions["dc2"].act
    assert any(c.name is CheckName.TARGET_HEALTHY for c in decisions["dc2"].failed)


def test_a_blocked_plan_loses_to_the_next_standby(tmp_path: Path) -> None:
    engine = FiguresEngine({"dc2": (0, 0.5), "dc3": (50, 9.0)}, blocked="dc2")
    job = _job(tmp_path, engine)
    decisions = {d.target: d for d in job.tick()}
    assert engine.started == ["dc3"]
    assert "dc2 is blocked" in _standby(decisions["dc2"])


def test_one_standby_decides_as_before(tmp_path: Path) -> None:
    """A single pair gets no standby check: nothing to choose between."""
    engine = FiguresEngine({"dc2": (400, 30.0), "dc3": (0, 1.0)})
    job = _job(tmp_path, engine, down=("dc3",))
    decisions = {d.target: d for d in job.tick()}
    assert engine.started == ["dc2"]
    assert all(c.name is not CheckName.STANDBY for c in decisions["dc2"].checks)
