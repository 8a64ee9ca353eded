"""The drill report's one sentence for managers: wall-clock fault time from the timeline, the
applications' wait, what was lost, what was read twice, the verdict."""

from __future__ import annotations

from dataclasses import replace

from drkit.drills.html import render_report
from drkit.drills.report import DrillCheck, Verdict
from drkit.drills.summary import report_document, summary
from tests.drill_samples import sample_report


def test_an_unplanned_loss_reads_as_one_sentence_with_wall_clock_times() -> None:
    report = sample_report()  # started 09:00:00, fault at 60 s, RTO 46.5 s, 73 lost, 160 re-read
    assert summary(report) == (
        "dc1 lost at 09:01:00 UTC; applications resumed on dc2 46.5 s later; 73 records lost; "
        "160 records read twice; policy met."
    )
    assert f'<p id="summary" class="summary">{summary(report)}</p>' in render_report(report)
    assert report_document(report)["summary"] == summary(report)


def test_planned_moves_nothing_lost_skips_and_readiness() -> None:
    planned = sample_report(procedure="switchover", rpo=(), verdict=Verdict.POLICY_BREACHED)
    assert summary(planned) == (
        "switchover dc1 -> dc2 at 09:01:39 UTC; applications resumed on dc2 46.5 s later; "
        "nothing lost; 160 records read twice; policy breached."
    )
    groups = tuple(replace(g, skipped=3, reread=1) for g in planned.groups[:1])
    assert summary(replace(planned, groups=groups, rto=None)).endswith(
        "resumption on dc2 not measured; nothing lost; 1 record read twice; 3 skipped; "
        "policy breached."
    )
    ready = sample_report(mode="readiness", verdict=Verdict.NOT_READY, checks=(
        DrillCheck("plan_unblocked", True, ""), DrillCheck("link_health", False, "lag 9"),
    ))  # fmt: skip
    assert summary(ready) == ("dc1 -> dc2: not ready to move; 1 of 2 checks failed (link_health).")
