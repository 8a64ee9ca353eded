"""The drill report as a browser shows it: headless Chromium opens the written report.html."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from drkit.drills.html import write_report
from drkit.drills.report import DrillCheck, Verdict
from tests.browser import open_page
from tests.drill_samples import sample_report

pytestmark = pytest.mark.browser

PLOTS = ("plot-rto", "plot-rpo", "plot-series", "plot-timeline")
GREEN = "rgb(211, 245, 220)"
RED = "rgb(255, 214, 214)"


def test_drill_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    report = sample_report()
    html_path, _json_path = write_report(report, tmp_path / report.id)
    shot = tmp_path / "drill-report.png"
    with open_page(html_path.as_uri(), shot) as page:
        assert page.title() == f"{report.title} - drill {report.id}"
        sentence = page.locator("#summary")
        assert sentence.is_visible() and sentence.inner_text().startswith("dc1 lost at 09:01:00")
        verdict = page.locator("#verdict")
        assert verdict.is_visible()
        assert verdict.inner_text().strip() == "PolicyMet"
        banner = page.locator("#verdict-banner")
        assert banner.evaluate("e => getComputedStyle(e).backgroundColor") == GREEN
        for selector, text in (("#rto-total", "46.5 s"), ("#rpo-records", "73 records")):
            figure = page.locator(selector)
            assert figure.is_visible(), selector
            assert figure.inner_text().strip() == text
        for plot_id in PLOTS:
            svg = page.locator(f"#{plot_id} > svg")
            assert svg.count() == 1, plot_id
            assert svg.is_visible(), plot_id
            box = svg.bounding_box()
            assert box is not None, plot_id
            assert box["width"] > 300 and box["height"] > 60, (plot_id, box)
            assert box["x"] >= 0 and box["x"] + box["width"] <= 1280, (plot_id, box)
        for table in ("#rto-parts", "#targets", "#groups-table", "#checks-table", "#events"):
            assert page.locator(table).is_visible(), table
    assert shot.stat().st_size > 50_000
    shutil.copy(shot, tmp_path.parent / "drill-report.png")


def test_breached_report_is_red_in_headless_chromium(tmp_path: Path) -> None:
    report = sample_report(
        verdict=Verdict.POLICY_BREACHED,
        reasons=("check 'no record skipped' failed",),
        checks=(DrillCheck("no record skipped", False, "billing skipped 12 records"),),
    )
    html_path, _json_path = write_report(report, tmp_path)
    with open_page(html_path.as_uri(), tmp_path / "breached.png") as page:
        assert page.locator("#verdict").inner_text().strip() == "PolicyBreached"
        banner = page.locator("#verdict-banner")
        assert banner.evaluate("e => getComputedStyle(e).backgroundColor") == RED
        reason = page.locator("#reasons li")
        assert reason.count() == 1
        assert reason.is_visible()
        assert reason.inner_text() == "check 'no record skipped' failed"
