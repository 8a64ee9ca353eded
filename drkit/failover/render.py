"""Text forms of plans and runs for the terminal (JSON forms live on the value objects)."""

from __future__ import annotations

from collections.abc import Iterable

from drkit.failover.model import Direction, Plan, Severity, StepState
from drkit.failover.results import GroupsCommitted
from drkit.failover.runbook import Runbook
from drkit.failover.runs import RunRecord, StepRecord
from drkit.failover.standby_choice import StandbyChoice
from drkit.lag import PartitionRpo

_MAX_ROWS = 20


def plan_text(plan: Plan, choice: StandbyChoice | None = None) -> str:
    """``plan`` for the terminal; ``choice``: how its target was chosen among the source's
    standbys (``drkit failover --from X`` without ``--to``), shown under its first line."""
    lines = [
        f"{plan.procedure.value} {plan.source} -> {plan.target} (flow {plan.flow})",
        *([standby_text(choice)] if choice is not None else []),
        f"  source {'reachable' if plan.source_reachable else 'UNREACHABLE'}"
        f"{'' if plan.target_reachable else ', target UNREACHABLE'}; translation from "
        f"{plan.translation_mode}; pointer {plan.pointer_from or '(not set)'} -> {plan.pointer_to}",
        "",
        "steps:",
    ]
    for step in plan.steps:
        extra = f"  (rollback: {step.rollback.value})" if step.rollback else ""
        timeout = f", timeout {step.timeout_s:g}s" if step.timeout_s else ""
        lines.append(f"  {step.seq:>2}. {step.name.value}{timeout}{extra}")
    blocked = [g for g in plan.groups if g.blocked]
    lines += ["", f"groups: {len(plan.groups)} ({len(blocked)} active on the target, skipped)"]
    moves = [(g.group, p) for g in plan.groups for p in g.partitions]
    for group, move in moves[:_MAX_ROWS]:
        target = "-" if move.target_offset is None else str(move.target_offset)
        rereads = "" if not move.expected_rereads else f", re-reads {move.expected_rereads}"
        if move.expected_rereads is None and move.target_offset is not None:
            rereads = ", re-reads unknown (unverified syncs)"
        lost = "" if not move.unreplicated else f", unreplicated {move.unreplicated}"
        source = "?" if move.source_offset is None else str(move.source_offset)
        lines.append(
            f"  {group} {move.source_topic}[{move.source_partition}] S={source} -> "
            f"{move.target_topic}[{move.target_partition}] T={target} ({move.method}"
            f"{rereads}{lost}){' ' + move.reason if move.reason else ''}"
        )
    if len(moves) > _MAX_ROWS:
        lines.append(f"  ... {len(moves) - _MAX_ROWS} more (--output json shows all)")
    lagging = [p for p in plan.rpo if p.records]
    lines += ["", f"RPO: {rpo_figure(plan.rpo, plan.source, plan.target)}"]
    if any(not p.exact and p.records for p in plan.rpo):
        lines.append(
            "  (offsets: transaction markers and aborted records count too; the exact count "
            f"is taken once {plan.source} answers - its divergence)"
        )
    for part in lagging[:_MAX_ROWS]:
        seconds = f", up to {part.seconds:.1f}s" if part.seconds is not None else ""
        upto = "" if part.exact else "at most "
        lines.append(f"  {part.topic}[{part.partition}]: {upto}{part.records} records{seconds}")
    lines += _findings(plan)
    lines += [f"note: {note}" for note in plan.notes]
    return "\n".join(lines)


def standby_text(choice: StandbyChoice) -> str:
    """The standby choice: the chosen one (or why none) and every candidate with its figures,
    its health and why it won, lost or was left out."""
    chosen = choice.chosen
    head = (
        f"  standby {chosen.target} chosen among {len(choice.verdicts)} standby(s) of "
        f"{choice.source}:"
        if chosen is not None
        else f"  {choice.why_none()}"
    )
    return "\n".join([head, *(f"    {line}" for line in choice.lines())])


def rpo_figure(rows: Iterable[PartitionRpo], source: str, target: str) -> str:
    """The RPO in words, never more exact than measured: "unknown" when a partition is not
    known; "at most" when counted in offsets; with the source gone, the count covers what the
    source last showed and says so - its writes after that sighting are not counted, only
    bounded in seconds (the age of the evidence)."""
    rows = list(rows)
    if not rows or any(r.records is None for r in rows):
        return f"unknown records not on {target}"
    total = sum(r.records or 0 for r in rows)
    offsets = any(not r.exact and not (r.records == 0 and not r.source_end_live) for r in rows)
    figure = f"{'at most ' if offsets else ''}{total} records not on {target}"
    if all(r.source_end_live for r in rows):
        return figure
    ages = [r.seconds for r in rows if not r.source_end_live]
    bound = (
        "up to an unknown time" if any(a is None for a in ages)
        else f"up to {max(a or 0.0 for a in ages):.0f}s"
    )  # fmt: skip
    return f"{figure} of what {source} last showed; its writes after that are not counted ({bound})"


def _findings(plan: Plan) -> list[str]:
    out: list[str] = []
    for finding in plan.findings:
        label = "BLOCKER" if finding.severity is Severity.BLOCKER else "warning"
        out.append(f"{label}: {finding.message}")
    return ["", *out] if out else []


def run_text(run: RunRecord) -> str:
    lines = [
        f"run {run.id}: {run.procedure.value} {run.source} -> {run.target}: {run.state.value}",
        f"  started {run.started_at:%Y-%m-%d %H:%M:%S} UTC by {run.requested_by}"
        + (f", finished {run.finished_at:%H:%M:%S}" if run.finished_at else ""),
    ]
    for step in run.steps:
        took = ""
        if step.started_at and step.finished_at:
            took = f" {(step.finished_at - step.started_at).total_seconds():.1f}s"
        problem = step.error or step.skipped_because or _left_alone(step)
        lines.append(
            f"  {step.seq:>2}. {step.name.value:<24} {step.state.value}{took}"
            + (f"  {problem}" if problem else "")
        )
    if run.write_pause_s is not None:
        lines.append(
            f"  applications' write pause: {run.write_pause_s:.1f}s "
            "(source fenced -> pointer moved)"
        )
    result = run.result
    lines += [f"  WARNING {warning}" for warning in result.warnings]
    if result.error:
        lines.append(f"  error: {result.error}")
    if result.rollback_error:
        lines.append(f"  rollback stopped at: {result.rollback_error}")
    if result.abandoned is not None:
        lines.append(f"  abandoned by {result.abandoned.by}: {result.abandoned.reason}")
    rpo = list(result.rpo or ())
    lost = [r for r in rpo if r.records]
    if rpo:
        unknown = [r for r in rpo if r.records is None]
        lines.append(f"  RPO: {rpo_figure(rpo, run.source, run.target)}; {len(lost)} of "
                     f"{len(rpo)} partitions behind" + (f" ({len(unknown)} unknown)" if unknown
                                                         else ""))  # fmt: skip
        for row in lost[:_MAX_ROWS]:
            lines.append(f"    {row.topic}[{row.partition}]: {row.records}")
    return "\n".join(lines)


def remaining_text(run: RunRecord, runbook: Runbook) -> str:
    """What resuming ``run`` would do: the steps left, or the steps left to undo."""
    if run.direction is Direction.ROLLBACK:
        undo = [
            step.rollback.value
            for step in reversed(runbook.steps)
            if step.rollback is not None
            and run.started(step.name)
            and (found := run.step(step.name)) is not None
            and found.state is not StepState.ROLLED_BACK
        ]
        return "resuming continues the rollback: " + (", ".join(undo) or "nothing left to undo")
    done = (StepState.DONE, StepState.SKIPPED)
    left = [
        step.name.value
        for step in runbook.steps
        if (found := run.step(step.name)) is None or found.state not in done
    ]
    return "resuming runs: " + (", ".join(left) or "nothing (it only records its end)")


def runs_table(runs: Iterable[RunRecord]) -> str:
    rows = [
        f"{run.id:>5}  {run.started_at:%Y-%m-%d %H:%M:%S}  {run.procedure.value:<10} "
        f"{run.source} -> {run.target}  {run.state.value}"
        for run in runs
    ]
    return "\n".join(rows) if rows else "no failover runs recorded"


def _left_alone(step: StepRecord) -> str:
    """The groups a commit step left alone, and why ("" for any other step)."""
    if step.name is not GroupsCommitted.STEP:
        return ""
    outcome = GroupsCommitted.from_detail(step.detail)
    if outcome is None or not outcome.skipped:
        return ""
    return "left alone: " + "; ".join(f"{g} ({why})" for g, why in sorted(outcome.skipped.items()))
