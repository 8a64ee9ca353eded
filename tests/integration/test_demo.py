"""``make demo`` runs ``drkit demo``: drkit's main job - a full local drill - must work end to
end: dc1 lost, failover, groups resumed exactly where they were, the Spark proof, a report."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark


def test_demo_runs_a_full_drill_and_leaves_a_stored_report(tmp_path: Path) -> None:
    # Its own dc1/dc2 (the drill kills dc1), removed afterwards.
    command = [sys.executable, "-m", "drkit", "--state-dir", str(tmp_path / "state")]
    try:
        result = subprocess.run(
            [*command, "demo"], capture_output=True, text=True, timeout=600, check=False
        )
        shown = subprocess.run(
            [*command, "drill", "show", "-o", "json"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    finally:
        subprocess.run([*command, "local", "down", "--purge"], check=False, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    out = result.stdout
    assert "verdict: PolicyMet" in out
    moves = re.findall(r"^\s+(drill\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+)$", out, re.MULTILINE)
    assert len(moves) == 6, out  # 2 groups x 3 partitions
    # Transactions (commit markers, aborted batches) make dc1's offsets differ from dc2's.
    assert any(int(s) != int(t) for _, _, s, t, _ in moves), moves
    assert len(re.findall(r": 0 skipped, \d+ re-read$", out, re.MULTILINE)) == 2, out
    assert "the same as the recount" in out
    report = Path(re.search(r"^report: (\S+)$", out, re.MULTILINE).group(1))  # type: ignore[union-attr]
    assert report.exists() and report.read_text().lower().startswith("<!doctype html>")
    document = json.loads(shown.stdout)
    assert document["schema"] == "drkit.drill/v1" and document["verdict"] == "PolicyMet"
    totals = document["accounting"]["totals"]
    lost = totals["missing"] + totals["unreplicated_tail"]
    assert lost == sum(p["records"] for p in document["rpo"])
