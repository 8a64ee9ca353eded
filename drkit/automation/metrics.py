"""What the monitor exports about failover runs and automatic failover, read from the state
store on a schedule (a run may be executed by any process: the CLI, another monitor).

A figure drkit does not know is left out of the exposition - never exported as 0."""

from __future__ import annotations

import contextlib
import logging

from prometheus_client import Gauge

from drkit.automation.journal import AutomationJournal
from drkit.errors import DrkitError
from drkit.failover.model import Procedure, RunState
from drkit.failover.runs import RunRepository
from drkit.health.metrics import MonitorMetrics
from drkit.store import StateStore

log = logging.getLogger(__name__)


def publish_failover_figures(store: StateStore, metrics: MonitorMetrics) -> None:
    """Set the failover and automation gauges from ``store``.  A store that does not answer
    leaves them as they were (``drkit_state_store_up`` says why); never raises."""
    try:
        _publish(store, metrics)
    except DrkitError as err:
        log.warning("failover figures not refreshed", extra={"error": str(err)})


def _publish(store: StateStore, metrics: MonitorMetrics) -> None:
    runs = RunRepository(store)
    counts = runs.counts()
    for procedure in Procedure:  # every pair, so a run that changed state leaves its old one
        for state in RunState:
            metrics.failover_runs.labels(procedure.value, state.value).set(
                counts.get((procedure, state), 0)
            )
    for procedure in Procedure:
        duration, rpo = runs.latest_figures(procedure) or (None, None)
        _set_or_clear(metrics.failover_last_duration, procedure.value, duration)
        _set_or_clear(metrics.failover_last_rpo, procedure.value, rpo)
    metrics.automation_paused.set(1 if AutomationJournal(store).paused() is not None else 0)


def _set_or_clear(gauge: Gauge, label: str, value: float | None) -> None:
    if value is None:
        with contextlib.suppress(KeyError):  # never set
            gauge.remove(label)
    else:
        gauge.labels(label).set(value)
