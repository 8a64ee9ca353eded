"""Scheduler glue: named, time-budgeted, isolated jobs.

The monitor's jobs live in APScheduler's in-memory job store: they are derived from the config
at every start, and they must keep running while the state store is down (a job store in the
state store would stop every job with it).

:class:`BudgetedRunner` runs the work in its own daemon thread and waits at most the budget: a
hung probe (or a hung state-store call) is abandoned (its thread finishes or dies later),
counted as a failure, and the scheduler's worker thread is free for the next job.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from apscheduler.schedulers.background import BackgroundScheduler


class JobKind(StrEnum):
    """The monitor's jobs; a job's name is ``<kind>:<subject>`` (or just the kind)."""

    PROBE = "probe"  # subject: a cluster alias
    FLOW = "flow"  # subject: a flow name
    GROUPS = "groups"  # subject: a flow name
    QUORUM = "quorum"
    PRUNE = "prune"


def parse_job(name: str) -> tuple[JobKind, str]:
    """``"probe:dc1"`` -> (PROBE, "dc1"); ``"quorum"`` -> (QUORUM, "")."""
    kind, _, subject = name.partition(":")
    return JobKind(kind), subject


class BudgetExceeded(Exception):
    """The job did not finish within its time budget."""


class BudgetedRunner:
    """Runs each named job in its own daemon thread and waits at most its budget.

    A job whose previous run is still alive (abandoned after overrunning) is not started again:
    the new run fails at once with BudgetExceeded.  So a hung probe never has company using
    the same Kafka client, and abandoned threads cannot pile up.
    """

    def __init__(self) -> None:
        self._running: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()

    def run(self, work: Callable[[], Any], budget_s: float, name: str) -> Any:
        """``work()``'s result, or BudgetExceeded after ``budget_s``; exceptions propagate."""
        outcome: dict[str, Any] = {}

        def target() -> None:
            try:
                outcome["value"] = work()
            except BaseException as err:  # handed to the caller's thread
                outcome["error"] = err

        with self._lock:
            previous = self._running.get(name)
            if previous is not None and previous.is_alive():
                raise BudgetExceeded(f"job {name}: the previous run is still going")
            thread = threading.Thread(target=target, name=f"job {name}", daemon=True)
            self._running[name] = thread
        thread.start()
        thread.join(budget_s)
        if thread.is_alive():
            raise BudgetExceeded(f"job {name} exceeded its {budget_s:.1f}s budget")
        if "error" in outcome:
            raise outcome["error"]
        return outcome.get("value")


class Schedulable(Protocol):
    """What :func:`make_scheduler` needs of a monitor."""

    @property
    def interval_s(self) -> float: ...

    def job_names(self) -> list[str]: ...

    def run_job(self, name: str) -> None: ...


def make_scheduler(monitor: Schedulable) -> BackgroundScheduler:
    """An APScheduler running every job of ``monitor`` (not started).

    The in-memory job store: the jobs come from the config at every start, and they must keep
    running while the state store is down.  Every job but ``prune`` runs at once, then every
    probe interval.
    """
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.schedulers.background import BackgroundScheduler

    interval = monitor.interval_s
    scheduler = BackgroundScheduler(
        executors={"default": ThreadPoolExecutor(max(4, len(monitor.job_names())))},
        job_defaults={
            "coalesce": True,
            "max_instances": 1,
            "misfire_grace_time": int(interval * 2) + 1,
        },
        timezone="UTC",
    )
    now = datetime.now(UTC)
    for name in monitor.job_names():
        if name == JobKind.PRUNE.value:
            # First run one hour in (APScheduler pauses a job given next_run_time=None).
            scheduler.add_job(monitor.run_job, "interval", seconds=3600.0, args=[name], id=name)
        else:
            scheduler.add_job(
                monitor.run_job,
                "interval",
                seconds=interval,
                args=[name],
                id=name,
                next_run_time=now,
            )
    return scheduler
