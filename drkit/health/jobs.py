"""Scheduler glue: named, time-budgeted, isolated jobs.

APScheduler stores jobs in the state DB (one table per observer, so monitors sharing a store never
run each other's jobs).  A persisted job must be an importable function with picklable
arguments, so every job is ``run(monitor_key, job_name)`` and the live :class:`Monitor` is looked
up in ``_MONITORS``.

:class:`BudgetedRunner` runs the work in its own daemon thread and waits at most the budget: a
hung probe is abandoned (its thread finishes or dies later), counted as a failure, and the
scheduler's worker thread is free for the next job.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol


class BudgetExceeded(Exception):
    """The job did not finish within its time budget."""


class JobRunner(Protocol):
    def run_job(self, name: str) -> None: ...


_MONITORS: dict[str, JobRunner] = {}


def register(key: str, monitor: JobRunner) -> None:
    _MONITORS[key] = monitor


def unregister(key: str) -> None:
    _MONITORS.pop(key, None)


def run(monitor_key: str, job_name: str) -> None:
    """The function APScheduler calls (and persists by reference)."""
    monitor = _MONITORS.get(monitor_key)
    if monitor is not None:
        monitor.run_job(job_name)


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
