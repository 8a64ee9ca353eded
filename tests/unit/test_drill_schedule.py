"""Scheduled drills: the config is checked at load, one monitor runs each slot."""

from __future__ import annotations

from pathlib import Path

import pytest

from drkit.config.loader import load_config_text
from drkit.drills.schedule import DrillSchedule
from drkit.errors import ConfigError
from drkit.store import StateStore
from tests.fake_kafka import FakeClusters

CLUSTERS = """
clusters:
  dc1: {bootstrap_servers: "127.0.0.1:1"}
  dc2: {bootstrap_servers: "127.0.0.1:2"}
flows: [{source: dc1, target: dc2}]
"""


def _config(schedule: str):  # type: ignore[no-untyped-def]
    return load_config_text(CLUSTERS + "drills:\n  schedule:\n" + schedule, env={})


def test_a_readiness_check_and_a_full_drill_can_be_scheduled() -> None:
    config = _config(
        '    - {cron: "0 3 * * 1", source: dc1, target: dc2}\n'
        '    - {cron: "30 3 1 * *", scenario: planned-switchover}\n'
    )
    first, second = config.drills.schedule
    assert (first.source, first.target, first.scenario) == ("dc1", "dc2", None)
    assert second.scenario == "planned-switchover"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('{cron: "61 * * * *", source: dc1, target: dc2}', "not a crontab expression"),
        ('{cron: "0 3 * * 1", source: dc1}', "either scenario, or source and target"),
        ('{cron: "0 3 * * 1", scenario: x, source: dc1, target: dc2}', "either scenario"),
        ('{cron: "0 3 * * 1", source: dc1, target: dc9}', "unknown cluster 'dc9'"),
    ],
)
def test_a_bad_schedule_entry_is_refused_at_load(entry: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _config(f"    - {entry}\n")


def test_every_entry_becomes_a_cron_job_in_utc() -> None:
    from apscheduler.schedulers.background import BackgroundScheduler

    config = _config('    - {cron: "15 4 * * *", source: dc1, target: dc2}\n')
    scheduler = BackgroundScheduler(timezone="UTC")
    schedule = DrillSchedule(
        config, None, StateStore("sqlite://"), Path(), "m1", FakeClusters().connect
    )
    assert schedule.add_to(scheduler) == ["drill-0"]
    trigger = scheduler.get_job("drill-0").trigger
    assert str(trigger) == "cron[month='*', day='*', day_of_week='*', hour='4', minute='15']"


def test_two_monitors_firing_the_same_slot_run_it_once(tmp_path: Path) -> None:
    config = _config('    - {cron: "0 3 * * 1", source: dc1, target: dc2}\n')
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.ensure_current()
    ran: list[str] = []

    class Counting(DrillSchedule):
        def _run(self, entry, progress):  # type: ignore[no-untyped-def]
            ran.append(self.owner)
            return len(ran)

    first = Counting(config, None, store, tmp_path, "monitor-a", FakeClusters().connect)
    second = Counting(config, None, store, tmp_path, "monitor-b", FakeClusters().connect)
    assert first.run(0) == 1
    assert second.run(0) is None
    assert ran == ["monitor-a"]


def test_a_scheduled_readiness_of_a_flow_the_config_lacks_is_refused_at_load() -> None:
    """The third new-user trial: it validated, and every run at its time was refused."""
    with pytest.raises(
        ConfigError, match=r"drills.schedule\[0\]: readiness of dc2->dc1: no such flow"
    ):
        _config('    - {cron: "0 3 * * 1", source: dc2, target: dc1}\n')


def test_a_drill_due_while_the_monitors_pool_is_busy_runs_on_its_own_thread() -> None:
    """A drill lasts minutes and must not wait for the probes' threads: one queued behind a
    busy pool past the monitor's grace was dropped as missed, and never ran."""
    import threading
    from datetime import UTC, datetime

    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.schedulers.background import BackgroundScheduler

    config = _config('    - {cron: "0 3 * * 1", source: dc1, target: dc2}\n')
    scheduler = BackgroundScheduler(
        executors={"default": ThreadPoolExecutor(1)},
        job_defaults={"misfire_grace_time": 1},
        timezone="UTC",
    )
    probing, ran = threading.Event(), threading.Event()

    def probe() -> None:  # holds the pool's one thread for 2.5 s
        probing.set()
        threading.Event().wait(2.5)

    class Recording(DrillSchedule):
        def run(self, index: int) -> int | None:
            ran.set()
            return None

    scheduler.add_job(probe, next_run_time=datetime.now(UTC))
    Recording(config, None, StateStore("sqlite://"), Path(), "m1", FakeClusters().connect).add_to(
        scheduler
    )
    scheduler.start()
    try:
        assert probing.wait(5)
        scheduler.modify_job("drill-0", next_run_time=datetime.now(UTC))
        assert ran.wait(5), "the drill due while the pool was busy did not run"
    finally:
        scheduler.shutdown(wait=False)


def test_a_running_drill_ends_when_the_monitor_stops(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The scheduler's threads are joined at exit: a drill running on went on holding the
    monitor's exit for minutes.  It ends at its next progress report, as on Ctrl-C, and its
    clean-up (which reports progress too) is not cut short."""
    import threading
    from datetime import UTC, datetime

    from apscheduler.schedulers.background import BackgroundScheduler

    from drkit.drills.schedule import MonitorStopping

    config = _config('    - {cron: "0 3 * * 1", source: dc1, target: dc2}\n')
    started, ended = threading.Event(), threading.Event()
    cleaned: list[str] = []

    class Endless(DrillSchedule):
        def _run(self, entry, progress):  # type: ignore[no-untyped-def]
            started.set()
            try:
                while True:
                    progress("waiting", None)
                    threading.Event().wait(0.05)
            except MonitorStopping:
                progress("cleaning up", None)  # not raised again
                cleaned.append("done")
                raise
            finally:
                ended.set()

    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.ensure_current()
    scheduler = BackgroundScheduler(timezone="UTC")
    Endless(config, None, store, Path(), "m1", FakeClusters().connect).add_to(scheduler)
    scheduler.start()
    scheduler.modify_job("drill-0", next_run_time=datetime.now(UTC))
    assert started.wait(5)
    scheduler.shutdown(wait=False)
    assert ended.wait(5) and cleaned == ["done"]
    assert "ended as the monitor stops" in caplog.text
