"""RTO split and verdicts (pure)."""

from __future__ import annotations

import pytest

from drkit.drills.measure import Unmeasured, judge, readiness_verdict, rto_of
from drkit.drills.report import (
    DrillCheck,
    Event,
    RtoBreakdown,
    Targets,
    UnreplicatedPartition,
    Verdict,
)


def _events(**at: float) -> list[Event]:
    return [Event(t, kind) for kind, t in at.items()]


def test_unplanned_rto_splits_at_each_moment() -> None:
    events = _events(fault_injected=10.0, source_unavailable=13.5, failover_started=15.0,
                     pointer_moved=19.0, clients_resumed=19.75)  # fmt: skip
    rto = rto_of(events, planned=False)
    assert rto == RtoBreakdown(3.5, 1.5, 4.0, 0.75)
    assert rto.total_s == pytest.approx(9.75)


def test_a_planned_move_starts_counting_when_the_run_starts() -> None:
    events = _events(failover_started=5.0, pointer_moved=8.0, clients_resumed=8.5)
    assert rto_of(events, planned=True) == RtoBreakdown(0.0, 0.0, 3.0, 0.5)


def test_a_missing_moment_is_never_guessed() -> None:
    with pytest.raises(Unmeasured, match="clients_resumed"):
        rto_of(_events(failover_started=1.0, pointer_moved=2.0), planned=True)


TARGETS = Targets(rto_s=30, rpo_records=10, rpo_s=5, reread_records=100)
OK = DrillCheck("c", True, "fine")


def test_within_every_target_the_policy_is_met() -> None:
    rpo = [UnreplicatedPartition("t", 0, 10, 100, 5.0)]
    assert judge(TARGETS, RtoBreakdown(1, 1, 1, 1), rpo, [OK], reread=100) == (
        Verdict.POLICY_MET,
        (),
    )


def test_each_breach_is_one_reason() -> None:
    rpo = [UnreplicatedPartition("t", 0, 8, 100, 6.0), UnreplicatedPartition("t", 1, 3, 30, 1.0)]
    verdict, reasons = judge(
        TARGETS, RtoBreakdown(10, 10, 10, 1), rpo, [OK, DrillCheck("fence", False, "open")], 101
    )
    assert verdict is Verdict.POLICY_BREACHED
    assert reasons == (
        "RTO 31.0s exceeds the target 30s",
        "RPO 11 records exceeds the target 10",
        "RPO 6.0s exceeds the target 5s",
        "101 records re-read exceeds the target 100",
        "check fence failed: open",
    )


def test_no_rto_is_a_breach() -> None:
    assert judge(TARGETS, None, [], [])[1] == ("no RTO: the move did not complete",)


def test_readiness_is_ready_only_when_every_check_passed() -> None:
    assert readiness_verdict([OK]) == (Verdict.READY, ())
    assert readiness_verdict([OK, DrillCheck("lag", False, "far")])[0] is Verdict.NOT_READY
