"""Fan-in: sources whose flows meet on one target, and a move that would leave one behind
(drkit.topology.fan_in; issue 48, item 2).  tests/integration/test_fan_in.py runs it on real
brokers."""

from __future__ import annotations

from dataclasses import replace

from drkit.config.model import FlowConfig
from drkit.failover.model import Procedure, Severity
from drkit.failover.plan import make_plan
from drkit.failover.runbook import load_runbook
from drkit.topology.fan_in import sources_left_behind
from tests.unit.test_failover_plan import _snapshot


def _flows(*pairs: str) -> list[FlowConfig]:
    return [FlowConfig(source=p.split("->")[0], target=p.split("->")[1]) for p in pairs]


def test_the_other_sources_of_a_fan_in_are_left_behind_by_a_move_into_the_aggregate() -> None:
    flows = _flows("a->agg", "b->agg", "c->agg")
    assert sources_left_behind(flows, "a", "agg") == ("b", "c")
    assert sources_left_behind(flows, "b", "agg") == ("a", "c")


def test_clusters_a_sources_data_reaches_are_its_standbys_not_left_behind() -> None:
    # Two data centres both ways, a third as another standby: one estate, nothing left behind.
    estate = _flows("dc1->dc2", "dc2->dc1", "dc1->dc3", "dc3->dc1")
    assert sources_left_behind(estate, "dc1", "dc2") == ()
    # A standby fed through another one (dc1 -> dc2 -> dc3) is reached too.
    chain = _flows("dc1->dc2", "dc2->dc3", "dc3->dc2")
    assert sources_left_behind(chain, "dc1", "dc2") == ()
    # After dc1 was lost, dc2 moves on to dc3: dc1 (fenced, its data on both) is no other
    # source's home.
    assert sources_left_behind(_flows("dc1->dc2", "dc1->dc3", "dc2->dc3"), "dc2", "dc3") == ()
    # What the aggregate copies on does not make its sources one estate.
    assert sources_left_behind(_flows("a->agg", "b->agg", "agg->a"), "a", "agg") == ("b",)
    # Only flows into the move's target count: a source feeding some other cluster is not moved.
    assert sources_left_behind(_flows("a->agg", "b->other"), "a", "agg") == ()


def test_a_move_that_would_fence_another_sources_applications_is_blocked() -> None:
    snapshot = replace(_snapshot(), source="a", target="agg", fan_in=("b",))
    plan = make_plan(snapshot, load_runbook(Procedure.FAILOVER))
    [blocker] = [f for f in plan.findings if f.code == "fan_in"]
    assert blocker.severity is Severity.BLOCKER and "b" in blocker.message
    alone = make_plan(replace(snapshot, fan_in=()), load_runbook(Procedure.FAILOVER))
    assert not [f for f in alone.findings if f.code == "fan_in"]
