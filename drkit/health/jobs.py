"""Scheduler glue: named, time-budgeted, isolated jobs.

APScheduler stores jobs in the state DB (one table per observer, so monitors sharing a store never
run each other's jobs).  A persisted job must be an importable function with picklable
arguments, so every job is ``run(monitor_key, job_name)`` and the live :class:`Monitor` is looked
up in ``_MONITORS``.

``run_with_budget`` runs the work in its own daemon thread and waits at most the budget: a hung
probe is abandoned (its thread finishes or dies later), counted as a failure, and the scheduler's
worker thread is free for the next job.
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


def run_with_budget(work: Callable[[], Any], budget_s: float, name: str) -> Any:
    """``work()``'s result, or BudgetExceeded after ``budget_s``; exceptions propagate."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = work()
        except BaseException as err:  # handed to the caller's thread
            outcome["error"] = err

    thread = threading.Thread(target=target, name=f"job {name}", daemon=True)
    thread.start()
    thread.join(budget_s)
    if thread.is_alive():
        raise BudgetExceeded(f"job {name} exceeded its {budget_s:.1f}s budget")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")
