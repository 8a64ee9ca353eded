"""RTO and verdict from a drill's events, checks and recounted RPO (pure functions)."""

from __future__ import annotations

from collections.abc import Sequence

from drkit.drills.report import DrillCheck, Event, PartitionLoss, RtoBreakdown, Targets, Verdict
from drkit.drills.timeline import CLIENTS_RESUMED, DETECTED, FAULT, POINTER_MOVED, RUN_STARTED


class Unmeasured(ValueError):
    """The events needed for an RTO figure are missing (the drill did not get that far)."""


def _at(events: Sequence[Event], kind: str) -> float:
    found = next((e.at_s for e in events if e.kind == kind), None)
    if found is None:
        raise Unmeasured(f"no {kind} event")
    return found


def rto_of(events: Sequence[Event], planned: bool) -> RtoBreakdown:
    """Split recovery time at the drill's moments.

    Unplanned: fault -> detected -> run started -> pointer moved -> clients resumed.
    Planned: the applications stop when the run starts, so detection and decision are 0.
    Steps after the pointer moved (a cutover's verification, the reverse flow) do not hold
    clients back and are not part of it.  A missing moment raises Unmeasured (an RTO is never
    guessed).
    """
    started = _at(events, RUN_STARTED)
    finished = _at(events, POINTER_MOVED)
    resumed = _at(events, CLIENTS_RESUMED)
    if planned:
        detection = decision = 0.0
    else:
        fault = _at(events, FAULT)
        detected = _at(events, DETECTED)
        detection, decision = detected - fault, started - detected
    return RtoBreakdown(
        detection_s=round(max(0.0, detection), 3),
        decision_s=round(max(0.0, decision), 3),
        execution_s=round(finished - started, 3),
        client_resume_s=round(max(0.0, resumed - finished), 3),
    )


def judge(
    targets: Targets,
    rto: RtoBreakdown | None,
    rpo: Sequence[PartitionLoss],
    checks: Sequence[DrillCheck],
    reread: int = 0,
) -> tuple[Verdict, tuple[str, ...]]:
    """PolicyMet when RTO, RPO and re-reads are within the targets and every check passed;
    otherwise PolicyBreached with one reason per breach.  No RTO (the move never completed)
    breaches."""
    reasons: list[str] = []
    if rto is None:
        reasons.append("no RTO: the move did not complete")
    elif rto.total_s > targets.rto_s:
        reasons.append(f"RTO {rto.total_s:.1f}s exceeds the target {targets.rto_s:.0f}s")
    lost = sum(p.records for p in rpo)
    if lost > targets.rpo_records:
        reasons.append(f"RPO {lost} records exceeds the target {targets.rpo_records}")
    worst = max((p.seconds for p in rpo), default=0.0)
    if targets.rpo_s is not None and worst > targets.rpo_s:
        reasons.append(f"RPO {worst:.1f}s exceeds the target {targets.rpo_s:.0f}s")
    if reread > targets.reread_records:
        reasons.append(f"{reread} records re-read exceeds the target {targets.reread_records}")
    reasons += [f"check {c.name} failed: {c.detail}" for c in checks if not c.passed]
    verdict = Verdict.POLICY_BREACHED if reasons else Verdict.POLICY_MET
    return verdict, tuple(reasons)


def readiness_verdict(checks: Sequence[DrillCheck]) -> tuple[Verdict, tuple[str, ...]]:
    failed = tuple(f"check {c.name} failed: {c.detail}" for c in checks if not c.passed)
    return (Verdict.NOT_READY if failed else Verdict.READY), failed
