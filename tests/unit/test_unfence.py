"""When a fence may be lifted by hand (drkit fences lift): the pure judgement."""

from __future__ import annotations

import pytest

from drkit.errors import UnreachableClusterError
from drkit.failover.fences import FenceRepository, FenceState
from drkit.failover.unfence import LiftFacts, lift, lift_blockers, not_fenced
from drkit.store import StateStore
from tests.fake_kafka import FakeCluster


def _facts(**changes: object) -> LiftFacts:
    base: dict[str, object] = {
        "cluster": "dc1",
        "active": "dc1",
        "fenced": frozenset({"orders", "payments"}),
        "requested": frozenset(),
        "unfinished_runs": (),
    }
    return LiftFacts(**{**base, **changes})  # type: ignore[arg-type]


def test_the_active_clusters_fence_may_be_lifted_and_lifts_every_fenced_topic() -> None:
    facts = _facts()
    assert lift_blockers(facts) == []
    assert facts.topics == {"orders", "payments"}


def test_a_standbys_fence_is_lifted_only_when_the_operator_says_so() -> None:
    standby = _facts(active="dc2")
    (blocker,) = lift_blockers(standby)
    assert "dc1 is not the active cluster (dc2 is)" in blocker and "split brain" in blocker
    assert "--even-if-standby" in blocker
    assert lift_blockers(_facts(active="dc2", even_if_standby=True)) == []
    (no_pointer,) = lift_blockers(_facts(active=None))
    assert "none set" in no_pointer


def test_an_unfinished_run_blocks_the_lift_whatever_the_flags() -> None:
    (blocker,) = lift_blockers(_facts(unfinished_runs=(7, 9), even_if_standby=True))
    assert "run #7, #9 has not ended" in blocker


def test_only_fenced_topics_can_be_named() -> None:
    facts = _facts(requested=frozenset({"orders", "ghost"}))
    assert not_fenced(facts) == "not fenced on dc1: ghost (fenced there: orders, payments)"
    assert lift_blockers(facts) == []  # bad input, judged first - not a blocker
    assert not_fenced(_facts(requested=frozenset({"orders"}))) is None
    assert "(already lifted; " in str(not_fenced(facts, lifted={"ghost"}))
    assert _facts(requested=frozenset({"orders"})).topics == {"orders"}


def test_a_lift_cut_short_after_its_acls_went_leaves_no_row_saying_applied(
    migrated_store: StateStore,
) -> None:
    """Found by the simulation campaign (seeds 121767, 204346): a fence lifted, then the
    cluster gone before the rows were written - the store said APPLIED over topics that took
    writes (a failback's guard reads those rows).  A lift says LIFTING before its first ACL
    goes; only the read-back makes it LIFTED."""
    fences = FenceRepository(migrated_store)
    cluster = FakeCluster("dc1")
    cluster.add_topic("orders", 1)
    cluster.add_topic("payments", 1)
    cluster.deny_writes({"orders", "payments"}, "User:*")
    fences.record("dc1", {"orders", "payments"}, FenceState.APPLIED, 7)
    cluster.fail_after_next("allow_writes", UnreachableClusterError("dc1", "k1:9092"))
    with pytest.raises(UnreachableClusterError):
        lift(cluster, fences, "dc1", {"orders", "payments"}, "User:*")
    assert not cluster.write_denied("User:*")  # the ACLs went ...
    assert fences.topics("dc1", FenceState.APPLIED) == set()  # ... and no row says otherwise
    assert fences.topics("dc1", FenceState.LIFTING) == {"orders", "payments"}
    assert fences.fenced("dc1") == {"orders", "payments"}  # the next lift or pass ends it
    assert lift(cluster, fences, "dc1", {"orders", "payments"}, "User:*") == ["orders", "payments"]
    assert fences.topics("dc1", FenceState.LIFTED) == {"orders", "payments"}
