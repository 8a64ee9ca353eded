"""Scheduled drills: the monitor runs ``drills.schedule`` entries on their cron (UTC).

Every monitor sharing a store schedules them; a named store lease per entry makes one run it
(the lease is kept for ``HOLD_S`` so a monitor whose clock is a little late does not run the
same slot again).  Drills run on a thread of their own, one at a time (``EXECUTOR``): a drill
lasts minutes and must neither hold a probe's thread nor wait for one - a job that waited for
the monitor's busy pool longer than its grace was dropped as missed - and two drills at once
would break each other's clusters; a drill that waits for the one before it still runs.  Its
progress goes to the monitor's log.  Outcomes are stored like any drill (``drkit drill list``);
a failure is logged and stored, never raised into the scheduler.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drkit.config.model import DrkitConfig, ScheduledDrill
from drkit.errors import ConfigError, DrkitError, Problem
from drkit.failover.lease import LeaseHeld, LeaseRepository
from drkit.kafka.ports import AdminFactory
from drkit.store import StateStore

if TYPE_CHECKING:
    from drkit.failover.context import ProgressCallback

log = logging.getLogger(__name__)

HOLD_S = 600.0
EXECUTOR = "drills"  # the scheduler's executor for drills: one thread


def schedule_problems(config: DrkitConfig) -> list[Problem]:
    """One problem per ``drills.schedule`` entry whose scenario does not load (unknown name,
    unreadable file, invalid scenario) - found when the config is checked, not at 3 a.m."""
    from drkit.drills.scenario import load_scenario

    problems = []
    for index, entry in enumerate(config.drills.schedule):
        if entry.scenario is None:
            continue
        try:
            load_scenario(entry.scenario)
        except ConfigError as err:
            reasons = "; ".join(p.reason for p in err.problems)
            problems.append(Problem(f"drills.schedule[{index}].scenario", reasons))
    return problems


class DrillSchedule:
    def __init__(
        self,
        config: DrkitConfig,
        config_path: Path | None,
        store: StateStore,
        state_dir: Path,
        owner: str,
        connect: AdminFactory,
    ) -> None:
        """``connect``: how the drills reach their clusters (drkit.kafka.ports)."""
        self.config, self.config_path, self.store = config, config_path, store
        self.state_dir, self.owner, self.connect = state_dir, owner, connect
        self.leases = LeaseRepository(store)
        self.stopping = threading.Event()  # the monitor stops: a running drill ends

    def add_to(self, scheduler: Any) -> list[str]:
        """Add one cron job per entry; returns the job ids.  An entry whose scenario does not
        load is a :class:`ConfigError` now rather than a failed drill at its hour."""
        from apscheduler.events import EVENT_SCHEDULER_SHUTDOWN
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.triggers.cron import CronTrigger

        if problems := schedule_problems(self.config):
            raise ConfigError(problems)

        ids = []
        if self.config.drills.schedule:
            scheduler.add_executor(ThreadPoolExecutor(1), alias=EXECUTOR)
            scheduler.add_listener(lambda _event: self.stopping.set(), EVENT_SCHEDULER_SHUTDOWN)
        for index, entry in enumerate(self.config.drills.schedule):
            job = f"drill-{index}"
            trigger = CronTrigger.from_crontab(entry.cron, timezone="UTC")
            scheduler.add_job(
                self.run, trigger, args=[index], id=job, executor=EXECUTOR, max_instances=1,
                coalesce=True, misfire_grace_time=None,
            )  # fmt: skip
            ids.append(job)
        return ids

    def run(self, index: int) -> int | None:
        """Run entry ``index`` unless another monitor holds its slot; returns the drill id."""
        entry = self.config.drills.schedule[index]
        try:
            self.leases.acquire(self.owner, HOLD_S, name=f"drill-schedule-{index}")
        except LeaseHeld:
            log.info("scheduled drill %d runs elsewhere", index)
            return None
        log.info("drills.schedule[%d]: %s starts", index, _what(entry))
        try:
            return self._run(entry, _Progress(index, self.stopping))
        except MonitorStopping:
            log.warning("drills.schedule[%d]: ended as the monitor stops (stored as failed; "
                        "`drkit drill cleanup` removes what it left)", index)  # fmt: skip
        except DrkitError as err:
            log.error("scheduled drill %d failed: %s", index, err)
        except Exception:
            log.exception("scheduled drill %d crashed", index)
        return None

    def _run(self, entry: ScheduledDrill, progress: ProgressCallback) -> int:
        from drkit.drills.service import run_drill, run_readiness

        if entry.scenario is None:
            assert entry.source is not None and entry.target is not None
            outcome = run_readiness(
                self.config,
                self.store,
                self.state_dir,
                entry.source,
                entry.target,
                connect=self.connect,
            )
        else:
            from drkit.drills.scenario import load_scenario

            if self.config_path is None:
                raise DrkitError("a scheduled full drill needs the config file's path")
            outcome = run_drill(
                load_scenario(entry.scenario),
                self.config,
                self.config_path,
                self.store,
                self.state_dir,
                progress=progress,
                connect=self.connect,
            )
        report = outcome.report
        log.info(
            "scheduled drill %s: %s (%s)", outcome.drill_id, report.verdict.value,
            "; ".join(report.reasons) or "all checks passed",
        )  # fmt: skip
        return outcome.drill_id


def _what(entry: ScheduledDrill) -> str:
    if entry.scenario is None:
        return f"the readiness of {entry.source}->{entry.target}"
    return f"the drill {entry.scenario}"


class MonitorStopping(BaseException):
    """The monitor stops while its drill runs: the drill ends as on Ctrl-C (a BaseException,
    as KeyboardInterrupt is) - its clients and children stopped, its faults undone, its access
    revoked, stored as failed - instead of holding the monitor's exit for minutes (the
    scheduler's threads are joined at exit)."""


class _Progress:
    """A scheduled drill's progress as log lines, each step once (not a bar's every tick); on
    the drill's own thread, once the monitor stops, :class:`MonitorStopping` - raised once, so the
    drill's clean-up, which reports progress too, runs to its end."""

    def __init__(self, index: int, stopping: threading.Event) -> None:
        self.index, self.stopping, self.last = index, stopping, ""
        self.thread, self.raised = threading.get_ident(), False

    def __call__(self, message: str, _fraction: float | None) -> None:
        if message != self.last:
            self.last = message
            log.info("drills.schedule[%d]: %s", self.index, message)
        if self.stopping.is_set() and not self.raised and threading.get_ident() == self.thread:
            self.raised = True
            raise MonitorStopping("the monitor stopped")
