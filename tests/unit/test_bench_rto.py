"""The RTO campaign's pure parts (issue 50, target 4): --faults parsing, the per-fault
summary (median, worst and its split, worst RPO, runs not PolicyMet), the worst <= 2x median
verdict, and the table rendered from run records."""

from __future__ import annotations

import json
import subprocess
from dataclasses import asdict

import pytest

from bench.rto import (
    FAULTS,
    RunRecord,
    leftover_rules,
    parse_faults,
    render,
    scenario_for,
    summarise,
)
from drkit.drills.scenario import DecisionMode


def run(
    fault: str, n: int, parts: tuple[float, float, float, float] | None,
    verdict: str = "PolicyMet", rpo: tuple[int, float] = (0, 0.0),
    failed: tuple[str, ...] = (),
) -> RunRecord:  # fmt: skip
    rto = None
    if parts is not None:
        names = ("detection_s", "decision_s", "execution_s", "client_resume_s")
        rto = {**dict(zip(names, parts, strict=True)), "total_s": round(sum(parts), 3)}
    return RunRecord(fault, n, verdict, rto, rpo[0], rpo[1], failed_checks=failed)


def test_faults_parse_in_order_once_and_an_unknown_one_names_the_valid() -> None:
    assert parse_faults("pause, kill,pause") == ["pause", "kill"]
    with pytest.raises(ValueError) as caught:
        parse_faults("kill,partial_cut")
    assert str(caught.value) == (
        "unknown fault partial_cut (valid: kill, pause, blackhole, partial-cut)"
    )
    with pytest.raises(ValueError, match="unknown fault none"):
        parse_faults(" , ")


def test_the_summary_takes_the_median_the_worst_run_and_its_split() -> None:
    records = [
        run("kill", 1, (1.0, 3.0, 2.0, 1.0), rpo=(40, 0.5)),  # 7
        run("kill", 2, (2.0, 3.0, 4.0, 1.0), rpo=(10, 1.5)),  # 10
        run("kill", 3, (1.0, 3.0, 3.0, 1.0)),  # 8
        run("pause", 1, (5.0, 3.0, 2.0, 1.0)),
    ]
    kill, pause = summarise(records)
    assert (kill.fault, kill.runs, kill.measured) == ("kill", 3, 3)
    assert kill.p50_s == 8.0 and kill.worst_s == 10.0
    assert kill.worst is records[1]
    assert kill.parts_p50 == {
        "detection_s": 1.0, "decision_s": 3.0, "execution_s": 3.0, "client_resume_s": 1.0
    }  # fmt: skip
    assert (kill.worst_rpo_records, kill.worst_rpo_s) == (40, 1.5)  # each its own worst
    assert kill.spread_met and kill.all_met
    assert pause.runs == 1 and pause.p50_s == pause.worst_s == 11.0


def test_an_even_count_has_the_interpolated_median() -> None:
    (summary,) = summarise([run("kill", 1, (1, 1, 1, 1)), run("kill", 2, (2, 2, 2, 2))])
    assert summary.p50_s == 6.0


def test_worst_over_twice_the_median_or_an_unmeasured_run_misses_the_spread_target() -> None:
    (at_two,) = summarise([run("k", i, (0, 0, 0, t)) for i, t in enumerate((4, 4, 8))])
    assert at_two.ratio == 2.0 and at_two.spread_met
    (over,) = summarise([run("k", i, (0, 0, 0, t)) for i, t in enumerate((4, 4, 8.1))])
    assert not over.spread_met
    failed = run("k", 3, None, verdict="failed")
    (unmeasured,) = summarise([run("k", 1, (0, 0, 0, 4)), run("k", 2, (0, 0, 0, 4)), failed])
    assert unmeasured.measured == 2 and unmeasured.ratio == 1.0
    assert not unmeasured.spread_met and not unmeasured.all_met
    assert unmeasured.not_met == (failed,)


def test_the_table_names_each_target_and_every_run_not_policy_met() -> None:
    records = [
        run("kill", 1, (1.0, 3.0, 2.0, 1.0)),
        run(
            "pause",
            1,
            (4.0, 3.5, 2.25, 1.0),
            verdict="PolicyBreached",
            rpo=(1234, 2.5),
            failed=("rto: 70.0 s > 60 s",),
        ),
        RunRecord("pause", 2, "failed", None, None, None, error="DrillFailed: no detection"),
    ]
    text = render(records, "### heading")
    lines = text.splitlines()
    assert lines[0] == "### heading"
    kill = next(line for line in lines if line.startswith("| kill "))
    assert kill == (
        "| kill | 1 | 7.0 s | 7.0 s | 1.00x | 1.0 / 3.0 / 2.0 / 1.0 | 1.0 / 3.0 / 2.0 / 1.0 "
        "| 0 | 0.0 s | met | met |"
    )
    pause = next(line for line in lines if line.startswith("| pause "))
    assert "| 2 (1 measured) |" in pause and "| 1,234 | 2.5 s |" in pause
    assert pause.endswith("| NOT met | NOT met (2) |")
    assert "- pause run 1 (PolicyBreached): rto: 70.0 s > 60 s" in lines
    assert "- pause run 2 (failed): DrillFailed: no detection" in lines
    assert "Every run PolicyMet." not in text
    assert render(records[:1]).endswith("Every run PolicyMet.")


def test_a_record_survives_its_json() -> None:
    record = run("blackhole", 2, (1, 2, 3, 4), failed=("x: y",))
    assert RunRecord.from_json(json.loads(json.dumps(asdict(record)))) == record


@pytest.mark.parametrize("fault", list(FAULTS))
def test_each_series_is_the_automatic_drill_with_its_fault_and_short_waits(fault: str) -> None:
    scenario = scenario_for(fault)
    assert scenario.fault.kind is FAULTS[fault]
    assert scenario.move.decision is DecisionMode.AUTOMATIC
    assert scenario.workload.warmup_s == 2.0 and scenario.fault.at_s == 2.0
    assert not scenario.verify


def test_leftover_rules_are_only_the_named_drills(monkeypatch: pytest.MonkeyPatch) -> None:
    listing = (
        "-P INPUT ACCEPT\n"
        "-A INPUT -p tcp -m tcp --dport 9092 -m comment --comment drkit-a-1 -j DROP\n"
        '-A OUTPUT -p tcp -m tcp --sport 9092 -m comment --comment "drkit-b-2" -j DROP\n'
        "-A OUTPUT -p tcp -m tcp --sport 9093 -m comment --comment drkit-a-10 -j DROP\n"
    )

    def iptables(argv: list[str], **_kwargs: object) -> subprocess.CompletedProcess[str]:
        assert argv == ["iptables", "-S"]
        return subprocess.CompletedProcess(argv, 0, listing, "")

    monkeypatch.setattr(subprocess, "run", iptables)
    assert leftover_rules(["a-1", "b-2"]) == listing.splitlines()[1:3]
    assert leftover_rules(["c-3"]) == []
