"""Issue 48, item 6: a full drill in ``drills.schedule`` fires for real.

Two ``drkit monitor`` processes share one store, as an operator runs them: the store named by
``$DRKIT_DB_URL``, the state dir (``$DRKIT_STATE_DIR``) the one ``drkit local up`` started the
clusters in.  At the minute of its cron one of them runs the drill on the local clusters and
the other leaves the slot to it; the drill is stored with its verdict (``drkit drill list`` and
``show``), and both monitors show it in ``/api/status`` and in ``drkit_drill_last_*``.  (The
readiness kind fires in test_drill_readiness.)
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from drkit.drills.repo import DrillRepository
from drkit.store import StateStore
from tests.integration.test_monitor import MonitorProcess
from tests.kafka_backends import ClusterUnderTest, backend, state_dir_for_tests
from tests.replication_support import MetricsSnapshot, wait_until

# A planned switchover (no fault: the shared dc1 is only fenced for the drill's own topics),
# small, and without the Spark proof: the cheapest full drill.
SCENARIO = {
    "name": "scheduled-switchover",
    "title": "A scheduled planned switchover",
    "workload": {
        "topics": [{"name": "orders", "partitions": 2, "records_per_s": 50, "keys": 10}],
        "groups": [{"name": "billing", "topic": "orders", "records_per_s": 200}],
        "warmup_s": 2,
    },
    "fault": {"kind": "none", "at_s": 1},
    "move": {"procedure": "switchover"},
    "policy": {"rto_s": 120, "rpo_records": 0},
    "verify": False,
}
STARTUP_S = 25.0  # both monitors up before the drill's minute, under load


def _drkit(*args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "drkit", *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _shown(monitor: MonitorProcess) -> Any:
    """The latest full drill in the monitor's ``/api/status`` (None before it has one)."""
    return ((monitor.status() or {}).get("drills") or {}).get("drill")


def _passed(monitor: MonitorProcess) -> MetricsSnapshot | None:
    """The monitor's metrics once ``drkit_drill_last_passed{kind="drill"}`` is 1."""
    metrics = MetricsSnapshot.parse(monitor.get("/metrics").decode())
    return metrics if metrics.value("drkit_drill_last_passed", kind="drill") == 1.0 else None


def test_two_monitors_run_a_scheduled_drill_once_at_its_minute_and_show_it(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if backend() != "local":
        pytest.skip("a full drill runs on local clusters: DRKIT_TEST_KAFKA=local")
    url = f"sqlite:///{tmp_path / 'drkit.db'}"
    monkeypatch.setenv("DRKIT_DB_URL", url)
    monkeypatch.setenv("DRKIT_STATE_DIR", str(state_dir_for_tests()))
    scenario = tmp_path / "scheduled-switchover.yaml"
    scenario.write_text(yaml.safe_dump({**SCENARIO, "source": dc1.name, "target": dc2.name}))
    # The first whole minute at least STARTUP_S away: the drill runs once, at that minute.
    at = (datetime.now(UTC) + timedelta(seconds=STARTUP_S + 60)).replace(second=0, microsecond=0)
    config = tmp_path / "drkit.yaml"
    config.write_text(yaml.safe_dump({
        "clusters": {c.name: {"bootstrap_servers": c.bootstrap_servers} for c in (dc1, dc2)},
        "flows": [],
        "drills": {"schedule": [{"cron": f"{at.minute} {at.hour} * * *",
                                 "scenario": str(scenario)}]},
    }))  # fmt: skip
    store = StateStore(url)
    report_dirs: list[str] = []
    try:
        _two_monitors_run_it_once(config, at, store, report_dirs, tmp_path)
    finally:
        # Out of the shared state dir, into the test's own (its logs, when it failed).
        (tmp_path / "drills").mkdir()
        for directory in report_dirs:
            shutil.move(directory, tmp_path / "drills" / Path(directory).name)


def _two_monitors_run_it_once(
    config: Path, at: datetime, store: StateStore, report_dirs: list[str], tmp_path: Path
) -> None:
    with (
        MonitorProcess(config, "sched-a", tmp_path) as first,
        MonitorProcess(config, "sched-b", tmp_path) as second,
    ):
        monitors = (first, second)

        def logs() -> str:
            return "\n".join(f"--- {m.log_path.name}:\n{m.log()[-6000:]}" for m in monitors)

        def ended() -> Any:
            rows = DrillRepository(store).latest(5)
            report_dirs[:] = [r.report_dir for r in rows if r.report_dir]
            if rows and all(r.finished_at for r in rows):
                return rows
            said = "".join(m.log() for m in monitors)  # ended before its row was written
            failed = "scheduled drill 0 failed" in said or "scheduled drill 0 crashed" in said
            assert not failed, [r.summary() for r in rows]
            return None

        try:
            wait_until(lambda: all(m.status() for m in monitors), STARTUP_S, 0.5,
                       what="both monitors serving")  # fmt: skip
            assert datetime.now(UTC) < at, f"the monitors started after {at:%H:%M} UTC"
            wait = (at - datetime.now(UTC)).total_seconds() + 240
            rows = wait_until(ended, wait, 1.0, what="the scheduled drill stored, ended")

            # Stored once, at its minute, with its verdict: as `drkit drill list` and `show` say.
            listed = _drkit("drill", "list", "--config", str(config), "-o", "json")["drills"]
            assert [(d["name"], d["state"]) for d in listed] == [
                ("scheduled-switchover", "finished")
            ], [r.summary() for r in rows]
            drill = listed[0]
            assert drill["verdict"] == "PolicyMet", rows[0].summary()
            assert datetime.fromisoformat(drill["started_at"]) >= at
            shown = _drkit("drill", "show", str(drill["id"]), "--config", str(config), "-o", "json")
            assert shown["schema"] == "drkit.drill/v1" and shown["verdict"] == "PolicyMet"
            assert Path(shown["report_dir"], "report.html").is_file()
            # One monitor ran the slot, the other found it taken.  The runner logs the verdict
            # after the drill's row is stored (drkit.drills.schedule): waited for, not assumed.
            said = f"scheduled drill {drill['id']}: PolicyMet"
            ran = wait_until(lambda: [m for m in monitors if said in m.log()], 30, 0.5,
                             what=f"a monitor logging {said!r}")  # fmt: skip
            left = [m for m in monitors if "scheduled drill 0 runs elsewhere" in m.log()]
            assert len(ran) == 1 and len(left) == 1 and ran != left

            # Both monitors show it, whoever ran it: the status document and the gauges.
            finished = datetime.fromisoformat(drill["finished_at"]).timestamp()
            for monitor in monitors:
                view = wait_until(partial(_shown, monitor), 30, 0.5, what="the drill in status")
                assert (view["id"], view["verdict"], view["passed"]) == (
                    drill["id"], "PolicyMet", True
                )  # fmt: skip
                # The gauges follow the store every few seconds (status reads it per request).
                metrics = wait_until(partial(_passed, monitor), 30, 0.5, what="the drill gauges")
                stamp = metrics.value("drkit_drill_last_finished_timestamp_seconds", kind="drill")
                assert stamp == pytest.approx(finished, abs=1.0)
        except AssertionError as err:
            raise AssertionError(f"{err}\n{logs()}") from None
