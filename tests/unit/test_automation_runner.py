"""The automatic failover job acts through the engine whenever its decision acts - also when
no RPO estimate was needed (``accept_any_rpo``).  (A drill found it deciding "ACTS" every
second and never starting a run.)"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from prometheus_client import CollectorRegistry

from drkit.automation.decision import AutomationSnapshot, Pause
from drkit.automation.runner import AutomaticFailover
from drkit.config.loader import load_config_text
from drkit.failover.engine import PlanBlocked
from drkit.failover.model import Procedure, RunState
from drkit.failover.run_result import RunResult
from drkit.health.metrics import MonitorMetrics
from drkit.kafka.admin import KafkaAdmin
from drkit.store import StateStore
from tests.unit.test_automation_decision import NOW, _good

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
        return SimpleNamespace(rpo=(), rpo_records=0, blockers=[], source_reachable=False)

    def start(self, plan: Any, options: Any, **kw: Any) -> Any:
        self.started.append(plan)
        return SimpleNamespace(id=1, state=RunState.SUCCEEDED, result=RunResult())


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
        engine=lambda: engine, metrics=MonitorMetrics.create(registry), connect=KafkaAdmin,
    )  # fmt: skip
    [decision] = job.tick()
    assert decision.act, decision.summary()
    assert engine.planned == [(Procedure.FAILOVER, "dc1", "dc2")]
    assert len(engine.started) == 1
    acted = registry.get_sample_value("drkit_automation_decisions_total", {"outcome": "acted"})
    assert acted == 1


class RecheckingEngine(RecordingEngine):
    """Runs the caller's re-check under its (pretend) lease, as Engine.start does."""

    def start(self, plan: Any, options: Any, **kw: Any) -> Any:
        recheck = kw.get("recheck")
        reason = recheck() if recheck is not None else None
        if reason is not None:
            raise PlanBlocked(f"decided again under the lease: {reason}")
        return super().start(plan, options, **kw)


class Changing(AutomaticFailover):
    """The world as the decision saw it, then as it is once the lease is held."""

    def __init__(self, first: AutomationSnapshot, then: AutomationSnapshot, **kw: Any) -> None:
        super().__init__(**kw)
        self.snapshots = [first, then]
        self.answers = False

    def snapshot(self, source: str, target: str) -> AutomationSnapshot:
        return self.snapshots.pop(0) if len(self.snapshots) > 1 else self.snapshots[0]

    def source_answers(self, source: str) -> bool:
        return self.answers


def _job(tmp_path: Path, first: AutomationSnapshot, then: AutomationSnapshot) -> Changing:
    config = load_config_text(CONFIG, env={})
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.ensure_current()
    return Changing(
        replace(first, failover=config.failover), replace(then, failover=config.failover),
        config=config, store=store, state_dir=tmp_path, observer="o1",
        engine=RecheckingEngine, metrics=MonitorMetrics.create(CollectorRegistry()),
        connect=KafkaAdmin,
    )  # fmt: skip


def test_automation_decides_again_under_the_lease_and_holds_when_the_world_moved(
    tmp_path: Path,
) -> None:
    """Issue 44, finding 4: a monitor stalled between its decision and the run's start (or an
    operator pausing automation meanwhile) - main started the failover on the stale decision."""
    good = replace(_good(), rpo=None)
    paused = replace(good, paused=Pause("ana", "the primary is back", NOW))
    job = _job(tmp_path, good, paused)
    [decision] = job.tick()
    assert not decision.act
    assert "decided again under the lease" in decision.summary()
    assert "paused" in decision.summary()


def test_a_source_that_answers_again_before_the_start_blocks_the_automatic_run(
    tmp_path: Path,
) -> None:
    good = replace(_good(), rpo=None)
    job = _job(tmp_path, good, good)
    job.answers = True
    [decision] = job.tick()
    assert not decision.act
    assert "dc1 answers again" in decision.summary()


TWO_WAY = CONFIG.replace(
    "flows: [{source: dc1, target: dc2}]",
    "flows: [{source: dc1, target: dc2}, {source: dc2, target: dc1, standby: true}]",
)


def test_the_protected_pair_follows_the_pointer_and_the_flows_that_run(tmp_path: Path) -> None:
    """After a switchover dc1 -> dc2 the reverse flow replicates dc2 into dc1: automation must
    now protect dc2 (failing over to dc1), not keep watching the old pair - it once protected
    only the config's original direction, so losing the new primary was never acted on."""
    from drkit.control.model import DesiredState
    from drkit.control.repo import ControlRepository
    from drkit.failover.pointer import PointerRepository

    config = load_config_text(TWO_WAY, env={})
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.ensure_current()
    job = AutomaticFailover(config=config, store=store, state_dir=tmp_path, observer="o1",
                            metrics=MonitorMetrics.create(CollectorRegistry()),
                            connect=KafkaAdmin)  # fmt: skip
    assert job.pairs() == [("dc1", "dc2")]  # never moved: the config's running flow
    control = ControlRepository(store)
    PointerRepository(store).move("dc2", None)
    control.set("dc1->dc2", DesiredState.STOPPED, "switchover")
    assert job.pairs() == []  # the new primary's flow does not run yet: nothing to fail over to
    control.set("dc2->dc1", DesiredState.RUNNING, "reverse flow")
    assert job.pairs() == [("dc2", "dc1")]
    PointerRepository(store).move("dc1", None)  # failed back; the forward flow runs again
    control.set("dc1->dc2", DesiredState.RUNNING, "failback")
    control.set("dc2->dc1", DesiredState.PAUSED, "failback")
    assert job.pairs() == [("dc1", "dc2")]
