"""RTO and verdict from a drill's events, checks and recounted RPO (pure functions)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from drkit.drills.report import (
    DrillCheck,
    Event,
    RtoBreakdown,
    Targets,
    UnreplicatedPartition,
    Verdict,
)
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


@dataclass(frozen=True)
class Objective:
    """One line of the policy: what was asked, what was measured (None: nothing to measure -
    the move never completed), met or not, and the reason when not."""

    name: str
    unit: str  # "s" or "records"
    target: float
    measured: float | None
    met: bool
    breach: str = ""


def objectives(
    targets: Targets,
    rto: RtoBreakdown | None,
    rpo: Sequence[UnreplicatedPartition],
    reread: int = 0,
) -> tuple[Objective, ...]:
    """The drill's objectives - RTO, RPO in records (and seconds when asked), records read
    twice - each judged against its target.  No RTO (the move never completed) is a breach."""
    lost = sum(p.records for p in rpo)
    worst = max((p.seconds for p in rpo), default=0.0)
    out = [
        Objective("RTO", "s", targets.rto_s, None, False, "no RTO: the move did not complete")
        if rto is None
        else Objective(
            "RTO", "s", targets.rto_s, rto.total_s, rto.total_s <= targets.rto_s,
            f"RTO {rto.total_s:.1f}s exceeds the target {targets.rto_s:.0f}s",
        ),
        Objective(
            "RPO", "records", targets.rpo_records, lost, lost <= targets.rpo_records,
            f"RPO {lost} records exceeds the target {targets.rpo_records}",
        ),
    ]  # fmt: skip
    if targets.rpo_s is not None:
        out.append(
            Objective(
                "RPO", "s", targets.rpo_s, worst, worst <= targets.rpo_s,
                f"RPO {worst:.1f}s exceeds the target {targets.rpo_s:.0f}s",
            )
        )  # fmt: skip
    out.append(
        Objective(
            "read twice", "records", targets.reread_records, reread,
            reread <= targets.reread_records,
            f"{reread} records re-read exceeds the target {targets.reread_records}",
        )
    )  # fmt: skip
    return tuple(o if not o.met else replace(o, breach="") for o in out)


def judge(
    targets: Targets,
    rto: RtoBreakdown | None,
    rpo: Sequence[UnreplicatedPartition],
    checks: Sequence[DrillCheck],
    reread: int = 0,
) -> tuple[Verdict, tuple[str, ...]]:
    """PolicyMet when every objective is met and every check passed; otherwise PolicyBreached
    with one reason per breach."""
    reasons = [o.breach for o in objectives(targets, rto, rpo, reread) if not o.met]
    reasons += [f"check {c.name} failed: {c.detail}" for c in checks if not c.passed]
    verdict = Verdict.POLICY_BREACHED if reasons else Verdict.POLICY_MET
    return verdict, tuple(reasons)


def readiness_verdict(checks: Sequence[DrillCheck]) -> tuple[Verdict, tuple[str, ...]]:
    failed = tuple(f"check {c.name} failed: {c.detail}" for c in checks if not c.passed)
    return (Verdict.NOT_READY if failed else Verdict.READY), failed


def per_second(t: Sequence[float], values: Sequence[int | None]) -> tuple[float | None, ...]:
    """The rate between consecutive samples (the first is 0); None beside an unmeasured one."""
    out: list[float | None] = [0.0] if values else []
    for i in range(1, len(values)):
        now, before, dt = values[i], values[i - 1], t[i] - t[i - 1]
        if now is None or before is None:
            out.append(None)
        else:
            out.append(round((now - before) / dt, 1) if dt > 0 else 0.0)
    return tuple(out)


def reached_rate(acked_at: Sequence[float]) -> float | None:
    """Records per second between the first and the last acknowledgement (wall times, in
    order); None when fewer than two records were acknowledged or all at one moment."""
    if len(acked_at) < 2 or acked_at[-1] <= acked_at[0]:
        return None
    return round((len(acked_at) - 1) / (acked_at[-1] - acked_at[0]), 1)
