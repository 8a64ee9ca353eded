"""``drkit drill list | show | trend`` over a store with two finished drills and a failed one."""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from drkit.cli import cli
from drkit.drills.repo import DrillRepository
from drkit.drills.report import DrillReport, RtoBreakdown, Verdict
from drkit.store.db import StateStore
from tests.drill_samples import small_report


def _report(scenario: str, verdict: Verdict, lost: int, execution_s: float) -> DrillReport:
    breached = verdict is Verdict.POLICY_BREACHED
    return replace(
        small_report(scenario, verdict, lost, execution_s),
        started_at=f"2024-05-0{1 + breached}T10:00:00+00:00",
        finished_at=f"2024-05-0{1 + breached}T10:02:00+00:00",
        rto=RtoBreakdown(2.0, 1.0, execution_s, 3.0),
        reasons=(f"RPO {lost} records over the target 10",) if breached else (),
    )


@dataclass
class Setup:
    base: list[str]
    config: Path
    ids: tuple[int, int, int]  # finished (met), finished (breached), failed
    report_dirs: tuple[Path, Path]
    reports: tuple[DrillReport, DrillReport]


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Setup:
    monkeypatch.delenv("DRKIT_DB_URL", raising=False)
    monkeypatch.delenv("DRKIT_CONFIG", raising=False)
    db = tmp_path / "drills.db"
    config = tmp_path / "c.yaml"
    config.write_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\n"
        "flows: [{source: dc1, target: dc2}]\n"
        f"state_store: {{url: 'sqlite:///{db}'}}\n"
    )
    store = StateStore(f"sqlite:///{db}")
    store.upgrade()
    drills = DrillRepository(store)
    met = _report("broker-loss", Verdict.POLICY_MET, lost=0, execution_s=5.0)
    breached = _report("region-loss", Verdict.POLICY_BREACHED, lost=25, execution_s=20.0)
    dirs = (tmp_path / "drill-1", tmp_path / "drill-2")
    first = drills.start("broker-loss", "dc1->dc2")
    drills.finish(first, met, str(dirs[0]))
    second = drills.start("region-loss", "dc1->dc2")
    drills.finish(second, breached, str(dirs[1]))
    failed = drills.start("zk-loss", "dc1->dc2")
    drills.fail(failed, "cluster dc2 is unreachable")
    store.engine.dispose()
    for directory in dirs:
        directory.mkdir()
        (directory / "report.html").write_text("<html></html>")
    return Setup(
        ["--state-dir", str(tmp_path / "state")], config, (first, second, failed), dirs,
        (met, breached),
    )  # fmt: skip


def _invoke(setup: Setup, *args: str) -> Result:
    return CliRunner().invoke(cli, [*setup.base, "drill", *args, "--config", str(setup.config)])


def test_list_shows_every_drill_newest_first(setup: Setup) -> None:
    result = _invoke(setup, "list")
    assert result.exit_code == 0, result.output
    header, *rows = result.output.strip().splitlines()
    assert header.split()[:4] == ["ID", "SCENARIO", "STATE", "VERDICT"]
    first, second, failed = setup.ids
    assert [row.split()[:4] for row in rows] == [
        [str(failed), "zk-loss", "failed", "-"],
        [str(second), "region-loss", "finished", "PolicyBreached"],
        [str(first), "broker-loss", "finished", "PolicyMet"],
    ]
    assert rows[1].split()[4:6] == ["26.0", "25"]  # RTO 2+1+20+3 s, RPO records


def test_list_json_is_a_list_of_rows(setup: Setup) -> None:
    result = _invoke(setup, "list", "-o", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["schema"] == "drkit.drill.list/v1"
    rows = document["drills"]
    assert all(r["started_at"].endswith("Z") for r in rows)  # ISO-8601 UTC, never naive
    assert [r["state"] for r in rows] == ["failed", "finished", "finished"]
    assert rows[0]["error"] == "cluster dc2 is unreachable"
    assert rows[1] | {"started_at": None, "finished_at": None} == {
        "id": setup.ids[1], "name": "region-loss", "flow": "dc1->dc2", "state": "finished",
        "verdict": "PolicyBreached", "rto_s": 26.0, "rpo_records": 25,
        "started_at": None, "finished_at": None, "report_dir": str(setup.report_dirs[1]),
        "error": None,
    }  # fmt: skip


def test_show_defaults_to_the_latest_drill(setup: Setup) -> None:
    result = _invoke(setup, "show")
    assert result.exit_code == 0, result.output
    assert f"drill {setup.ids[2]}: zk-loss" in result.output
    assert "error: cluster dc2 is unreachable" in result.output


def test_show_text_summarises_the_report(setup: Setup) -> None:
    result = _invoke(setup, "show", str(setup.ids[1]))
    assert result.exit_code == 0, result.output
    text = result.output
    for expected in (
        "verdict: PolicyBreached",
        "RPO 25 records over the target 10",
        "RTO: 26.0s (target 60s)",
        "detection 2.0s, decision 1.0s, execution 20.0s, client resume 3.0s",
        "RPO: 25 records, 300 bytes",
        "on 1 of 2 partitions",
        "billing: skipped 0, re-read 7",
        "checks: 1 of 2 passed",
        "FAIL no-skips",
        f"report: {setup.report_dirs[1] / 'report.html'}",
    ):
        assert expected in text, f"{expected!r} not in:\n{text}"


def test_show_json_is_the_stored_drill_document(setup: Setup) -> None:
    result = _invoke(setup, "show", str(setup.ids[0]), "-o", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["schema"] == "drkit.drill/v1"
    assert document["report_dir"] == str(setup.report_dirs[0])
    assert DrillReport.from_json(document) == setup.reports[0]


def test_show_html_prints_the_report_page(setup: Setup) -> None:
    result = _invoke(setup, "show", str(setup.ids[1]), "-o", "html")
    assert result.exit_code == 0, result.output
    assert result.output.strip() == str(setup.report_dirs[1] / "report.html")

    failed = _invoke(setup, "show", str(setup.ids[2]), "-o", "html")
    assert failed.exit_code == 2
    assert "has no HTML report" in failed.output and "Traceback" not in failed.output


def test_show_of_an_unknown_drill_exits_2_naming_it(setup: Setup) -> None:
    result = _invoke(setup, "show", "7")
    assert result.exit_code == 2, result.output
    assert "no drill 7; `drkit drill list` shows them" in result.output
    assert "Traceback" not in result.output


def test_trend_lists_finished_drills_oldest_first(setup: Setup) -> None:
    result = _invoke(setup, "trend")
    assert result.exit_code == 0, result.output
    header, *rows = result.output.strip().splitlines()
    assert "RTO S" in header and "RPO RECORDS" in header and "VERDICT" in header
    assert [row.split()[2] for row in rows] == ["broker-loss", "region-loss"]
    assert rows[0].split()[-1] == "PolicyMet" and rows[1].split()[-1] == "PolicyBreached"
    assert "zk-loss" not in result.output


def test_trend_json(setup: Setup) -> None:
    result = _invoke(setup, "trend", "-o", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["schema"] == "drkit.drill.trend/v1"
    points = document["points"]
    assert [(p["scenario"], p["rto_s"], p["rpo_records"], p["verdict"]) for p in points] == [
        ("broker-loss", 11.0, 0, "PolicyMet"),
        ("region-loss", 26.0, 25, "PolicyBreached"),
    ]


def test_trend_html_writes_the_page_render_trend_makes(
    setup: Setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[str]] = []

    def render_trend(reports: Sequence[DrillReport]) -> str:
        seen.append([r.scenario for r in reports])
        return "<html>trend</html>"

    fake = types.ModuleType("drkit.drills.html")
    fake.render_trend = render_trend  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "drkit.drills.html", fake)
    page = tmp_path / "trend.html"
    result = _invoke(setup, "trend", "--html", str(page))
    assert result.exit_code == 0, result.output
    assert page.read_text() == "<html>trend</html>"
    assert seen == [["broker-loss", "region-loss"]]


def test_an_empty_store_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DRKIT_DB_URL", raising=False)
    config = tmp_path / "c.yaml"
    config.write_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        f"state_store: {{url: 'sqlite:///{tmp_path / 'empty.db'}'}}\n"
    )
    runner = CliRunner()
    base = ["--state-dir", str(tmp_path), "drill"]
    listed = runner.invoke(cli, [*base, "list", "--config", str(config)])
    assert (listed.exit_code, listed.output.strip()) == (0, "no drills yet")
    trend = runner.invoke(cli, [*base, "trend", "--config", str(config), "-o", "json"])
    assert (trend.exit_code, json.loads(trend.output)["points"]) == (0, [])
    shown = runner.invoke(cli, [*base, "show", "--config", str(config)])
    assert shown.exit_code == 2 and "no drills yet" in shown.output


def test_show_text_names_the_fault_times_and_the_write_conditions() -> None:
    from drkit.cli.drill_cmd import _report_text
    from tests.drill_samples import sample_report

    text = "\n".join(_report_text(sample_report()))
    assert (
        "fault: kind broker_stop; asked 60 s after the warm-up; "
        "injected 09:01:00 UTC (60.0 s into the drill); how docker stop on dc1's 3 brokers"
    ) in text
    assert "orders (6 partitions): asked 500/s, reached 487.5/s; 124313 records written" in text
