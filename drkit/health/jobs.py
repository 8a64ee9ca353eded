"""Scheduler glue: named, time-budgeted, isolated jobs.

The monitor's jobs live in APScheduler's in-memory job store: they are derived from the config
at every start, and they must keep running while the state store is down (a job store in the
state store would stop every job with it).

:class:`BudgetedRunner` runs the work in its own daemon thread and waits at most the budget: a
hung probe (or a hung state-store call) is abandoned (its thread finishes or dies later),
counted as a failure, and the scheduler's worker thread is free for the next job.  A run that
asks (``watch_cpu``) also learns whether the overrun was this process's own: how long its
threads waited for a CPU meanwhile (:mod:`drkit.health.cpu_wait`).  A stopping process
abandons the runner: every wait ends at once (the scheduler's threads are joined at exit, so a
wait that went on would hold a Ctrl-C for a whole budget).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from drkit.health import cpu_wait

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
    """The job did not finish within its time budget.

    ``elapsed_s``: since the overrunning run started (for "the previous run is still going",
    since *that* run started).  ``cpu_wait_s``: the longest any thread of this process waited
    for a CPU meanwhile (None: not watched, or the kernel does not say)."""

    def __init__(self, message: str, elapsed_s: float, cpu_wait_s: float | None) -> None:
        if cpu_wait_s is not None:
            message += f" (this process waited {cpu_wait_s:.1f}s of {elapsed_s:.1f}s for a CPU)"
        super().__init__(message)
        self.elapsed_s = elapsed_s
        self.cpu_wait_s = cpu_wait_s

    @property
    def starved(self) -> bool:
        """The overrun is this process's own: it was kept from running, not kept waiting."""
        return cpu_wait.starved(self.cpu_wait_s, self.elapsed_s)


class JobAbandoned(Exception):
    """The runner was abandoned (the process is stopping): nobody waits for the job."""


@dataclass(frozen=True)
class _Run:
    thread: threading.Thread
    started: float  # monotonic
    waits: Mapping[int, int] | None  # run_queue_waits() when it started, if watched


class BudgetedRunner:
    """Runs each named job in its own daemon thread and waits at most its budget.

    A job whose previous run is still alive (abandoned after overrunning) is not started again:
    the new run fails at once with BudgetExceeded.  So a hung probe never has company using
    the same Kafka client, and abandoned threads cannot pile up.

    ``cpu_waits``: how to read the threads' run-queue waits (tests pass their own).
    """

    def __init__(
        self, cpu_waits: Callable[[], Mapping[int, int] | None] = cpu_wait.run_queue_waits
    ) -> None:
        self._running: dict[str, _Run] = {}
        self._lock = threading.Lock()
        self._cpu_waits = cpu_waits
        self._changed = threading.Condition()  # a job ended, or the runner was abandoned
        self._abandoned = False

    def abandon(self) -> None:
        """Stop waiting for jobs, now and from now on: every run waiting raises JobAbandoned
        at once, a new one starts nothing.  The jobs' own threads end when their calls do
        (daemons: they never hold the process)."""
        with self._changed:
            self._abandoned = True
            self._changed.notify_all()

    def run(
        self, work: Callable[[], Any], budget_s: float, name: str, *, watch_cpu: bool = False
    ) -> Any:
        """``work()``'s result, or BudgetExceeded after ``budget_s``, or JobAbandoned once
        :meth:`abandon` was called; the work's exceptions propagate."""
        outcome: dict[str, Any] = {}

        def target() -> None:
            try:
                outcome["value"] = work()
            except BaseException as err:  # handed to the caller's thread
                outcome["error"] = err
            finally:
                with self._changed:
                    outcome["done"] = True
                    self._changed.notify_all()

        if self._abandoned:
            raise JobAbandoned(f"job {name}: not started, the process is stopping")
        with self._lock:
            previous = self._running.get(name)
            if previous is not None and previous.thread.is_alive():
                raise self._exceeded(previous, f"job {name}: the previous run is still going")
            run = _Run(
                threading.Thread(target=target, name=f"job {name}", daemon=True),
                time.monotonic(),
                self._cpu_waits() if watch_cpu else None,
            )
            self._running[name] = run
        run.thread.start()
        with self._changed:
            self._changed.wait_for(lambda: "done" in outcome or self._abandoned, budget_s)
        if "done" not in outcome:
            if self._abandoned:
                raise JobAbandoned(f"job {name}: abandoned, the process is stopping")
            raise self._exceeded(run, f"job {name} exceeded its {budget_s:.1f}s budget")
        # Taken out of ``outcome``: left there, the error's traceback (which holds ``target``'s
        # frame, which holds ``outcome``) would make a cycle keeping every frame of the failed
        # job alive - Kafka clients among them - until the cyclic collector frees them on
        # whichever thread it runs (drkit.kafka.lifetimes says why that matters).
        if "error" in outcome:
            raise outcome.pop("error")
        return outcome.pop("value", None)

    def _exceeded(self, run: _Run, message: str) -> BudgetExceeded:
        waited = None
        if run.waits is not None:
            now = self._cpu_waits()
            waited = None if now is None else cpu_wait.longest_wait_s(run.waits, now)
        return BudgetExceeded(message, time.monotonic() - run.started, waited)


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
