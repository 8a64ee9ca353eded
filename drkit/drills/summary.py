"""The one sentence on top of a drill report, for managers and auditors (pure).

"dc1 lost at 16:16:36 UTC; applications resumed on dc2 10.5 s later; nothing lost; 0 records
read twice; policy met."  Wall-clock times come from the drill's start and its timeline (the
moment the fault actually landed, not the scenario's planned offset).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from drkit.drills.report import DrillReport, Verdict
from drkit.drills.timeline import FAULT, POINTER_MOVED

_WORDS = {
    Verdict.POLICY_MET: "policy met",
    Verdict.POLICY_BREACHED: "policy breached",
    Verdict.READY: "ready to move",
    Verdict.NOT_READY: "not ready to move",
}


def report_document(report: DrillReport) -> dict[str, Any]:
    """The ``drkit.drill/v1`` document: the report's fields and, under ``summary``, its one
    sentence - what ``drill run|show -o json`` print, the store keeps and ``report.json``
    holds (:meth:`DrillReport.from_json` reads it back, the sentence aside)."""
    return {**report.to_json(), "summary": summary(report)}


def wall_clock(report: DrillReport, at_s: float) -> str:
    """``at_s`` seconds into the drill as ``HH:MM:SS UTC``."""
    started = datetime.fromisoformat(report.started_at)
    return (started + timedelta(seconds=at_s)).strftime("%H:%M:%S UTC")


def summary(report: DrillReport) -> str:
    """One sentence: what happened when, how long the applications waited, what was lost and
    read twice, and the verdict.  Unknown figures say so."""
    verdict = _WORDS[report.verdict]
    if report.mode == "readiness":
        failed = [c.name for c in report.checks if not c.passed]
        total = len(report.checks)
        checks = (
            f"all {total} checks passed"
            if not failed
            else f"{len(failed)} of {total} checks failed ({', '.join(failed)})"
        )
        return f"{report.source} -> {report.target}: {verdict}; {checks}."
    events = {e.kind: e.at_s for e in report.timeline}
    if report.procedure in ("switchover", "cutover", "failback") or FAULT not in events:
        start = events.get(POINTER_MOVED)
        what = f"{report.procedure} {report.source} -> {report.target}"
        what += f" at {wall_clock(report, start)}" if start is not None else ""
    else:
        what = f"{report.source} lost at {wall_clock(report, events[FAULT])}"
    resumed = (
        f"applications resumed on {report.target} {report.rto.total_s:.1f} s later"
        if report.rto is not None
        else f"resumption on {report.target} not measured"
    )
    if not report.rpo_measured:
        lost = "loss not measured"
    else:
        lost = "nothing lost" if report.rpo_records == 0 else f"{report.rpo_records} records lost"
    reread = sum(g.reread for g in report.groups)
    twice = f"{reread} record{'s' if reread != 1 else ''} read twice"
    skipped = sum(g.skipped for g in report.groups)
    skip = f"; {skipped} skipped" if skipped else ""
    return f"{what}; {resumed}; {lost}; {twice}{skip}{_repointed(report)}; {verdict}."


def _repointed(report: DrillReport) -> str:
    """``; dc3 re-pointed onto dc2 (1,581 records copied in 1.4 s)`` - each other standby;
    "" for a two-cluster drill."""
    if report.standbys is None:
        return ""
    promoted = report.standbys.choice.promoted
    parts = [
        f"{o.cluster} not re-pointed"
        if o.repoint_s is None
        else f"{o.cluster} re-pointed onto {promoted} ({o.total('copied'):,} records copied in "
        f"{o.repoint_s:.1f} s)"
        for o in report.standbys.others
    ]
    return "".join(f"; {part}" for part in parts)


def standby_lines(report: DrillReport) -> list[str]:
    """The other standbys of a three-cluster drill, for the text report: the choice with every
    candidate's figures, then per standby its re-point (duration apart from the RTO) and per
    partition what it planned, copied and holds.  None for a two-cluster drill."""
    found = report.standbys
    if found is None:
        return []
    choice = found.choice
    lines = [
        f"standby choice ({choice.decision}): {choice.chosen or 'none'}, promoted "
        f"{choice.promoted} - {choice.summary}"
    ]
    for c in choice.candidates:
        figures = (
            f"RPO {c['rpo_records']} records, evidence age {c['rpo_s']:.1f}s; "
            if "rpo_records" in c and c.get("rpo_s") is not None
            else ""
        )
        lines.append(f"  {c.get('cluster')}: {c.get('outcome')} - {figures}{c.get('why', '')}")
    for o in found.others:
        took = "not run" if o.repoint_s is None else f"{o.repoint_s:.1f}s (not part of the RTO)"
        lines.append(
            f"re-point {o.cluster} onto {choice.promoted}: {took}; copied {o.total('copied')}, "
            f"holes {o.total('holes')}, unreachable {o.total('unreachable')}, standby ahead "
            f"{o.total('ahead')}; its replication stopped {o.stopped_before_fault_s:g}s before "
            "the fault" + (f"; error: {o.error}" if o.error else "")
        )
        lines += [
            f"  {p.topic}[{p.partition}]: {p.outcome} {p.detail}; to copy {p.to_copy}, copied "
            f"{p.copied}; holds {p.standby_holds} of the promoted's {p.promoted_holds}, missing "
            f"{p.missing}, duplicated {p.duplicated}, only on the standby {p.only_on_standby}"
            for p in o.partitions
        ]
    return lines


def fault_facts(report: DrillReport) -> list[tuple[str, str]]:
    """The fault as asked and as it landed, for the report's header and ``drill show``: the
    scenario's ``at_s`` counts from the end of the warm-up, the timeline from the drill's
    start - both are shown, named, so the two numbers never look like a contradiction."""
    fault = report.fault or {}
    out: list[tuple[str, str]] = []
    if fault.get("kind"):
        out.append(("kind", str(fault["kind"])))
    asked = fault.get("at_s")
    if isinstance(asked, int | float):
        out.append(("asked", f"{asked:g} s after the warm-up"))
    landed = next((e.at_s for e in report.timeline if e.kind == FAULT), None)
    if landed is not None:
        out.append(("injected", f"{wall_clock(report, landed)} ({landed:.1f} s into the drill)"))
    out += [(k, str(v)) for k, v in fault.items() if k not in ("kind", "at_s") and v]
    return out


# Below this share of the asked write rate a drill tested a lighter load than planned: said.
LIGHT_LOAD = 0.8


def condition_lines(report: DrillReport) -> list[str]:
    """One line per workload topic: the write rate asked and reached (flagged below
    :data:`LIGHT_LOAD` of it), records written, and refused writes explained."""
    out = []
    for c in report.conditions:
        reached = "not measured" if c.reached_per_s is None else f"{c.reached_per_s:g}/s"
        light = ""
        if c.reached_per_s is not None and c.asked_per_s > 0:
            share = c.reached_per_s / c.asked_per_s
            if share < LIGHT_LOAD:
                light = f" - only {share:.0%} of the rate asked: a lighter load than planned"
        refused = (
            f", {c.refused} refused (never acknowledged - the fence or the fault turned them "
            "down - so they are no loss)"
            if c.refused
            else ""
        )
        out.append(
            f"{c.topic} ({c.partitions} partitions): asked {c.asked_per_s:g}/s, reached "
            f"{reached}{light}; {c.written} records written{refused}"
        )
    return out
