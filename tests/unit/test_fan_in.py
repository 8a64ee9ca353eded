"""Fan-in: sources whose flows meet on one target, and a move that would leave one behind
(drkit.topology.fan_in; issue 48, item 2).  tests/integration/test_fan_in.py runs it on real
brokers."""

from __future__ import annotations

from dataclasses import replace

from drkit.config.model import FlowConfig
from drkit.failover.model import Procedure, Severity, StepName
from drkit.failover.plan import make_plan
from drkit.failover.render import plan_text
from drkit.failover.runbook import load_runbook
from drkit.topology.fan_in import other_standbys, sources_left_behind
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


def test_a_source_s_other_standbys_are_those_it_feeds_beside_the_target() -> None:
    flows = _flows("dc1->dc2", "dc1->dc3", "dc2->dc1", "dc2->dc3", "dc1->dc4")
    assert other_standbys(flows, "dc1", "dc2") == ("dc3", "dc4")
    assert other_standbys(flows, "dc2", "dc1") == ("dc3",)
    assert other_standbys(_flows("dc1->dc2", "dc2->dc1"), "dc1", "dc2") == ()


def test_after_a_failover_the_plan_says_how_each_other_standby_follows_the_new_primary() -> None:
    """Three data centres: dc1 lost, dc2 promoted - dc3 still waits for dc1.  The plan names the
    command that re-points it (docs/three-dc.md), and whether a flow carries dc2's own writes."""
    snapshot = replace(_snapshot(), other_standbys=("dc3", "dc4"), onward_flows=("dc2->dc3",))
    notes = make_plan(snapshot, load_runbook(Procedure.FAILOVER)).notes
    [dc3] = [n for n in notes if n.startswith("dc3")]
    assert "drkit flows repoint --from dc1 --to dc2 --standby dc3" in dc3
    assert "flow dc2->dc3 carries" in dc3
    # The shipped runbook re-points in the run: the note says what its steps will do.
    assert "follows dc2 in this run" in dc3 and "hold_standby_flows stops dc1->dc3" in dc3
    assert "follow_standbys copies" in dc3 and "the onward map" in dc3
    [dc4] = [n for n in notes if n.startswith("dc4")]
    assert "no flow dc2->dc4 is configured" in dc4 and "the onward map" not in dc4
    text = plan_text(make_plan(snapshot, load_runbook(Procedure.FAILOVER)))
    assert "hold_standby_flows" in text and "follow_standbys" in text
    # A runbook without the steps (an operator's own): the note names the command instead.
    own = load_runbook(Procedure.FAILOVER)
    cut = own.model_copy(
        update={"steps": tuple(s for s in own.steps if s.name is not StepName.FOLLOW_STANDBYS)}
    )
    [dc3] = [n for n in make_plan(snapshot, cut).notes if n.startswith("dc3")]
    assert "still follows dc1" in dc3 and "re-point it with `drkit flows repoint" in dc3
    planned = make_plan(
        replace(snapshot, procedure=Procedure.SWITCHOVER, source_reachable=True),
        load_runbook(Procedure.SWITCHOVER),
    ).notes
    [dc3] = [n for n in planned if n.startswith("dc3")]
    assert "repoint" not in dc3 and "keeps copying dc1" in dc3
    alone = make_plan(_snapshot(), load_runbook(Procedure.FAILOVER)).notes
    assert not [n for n in alone if "standby" in n]
