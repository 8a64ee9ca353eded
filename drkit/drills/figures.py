"""The latest drills as the monitor's metrics: did the last one of each kind pass, and when.

Kinds: ``drill`` (a full drill: verdict PolicyMet or PolicyBreached) and ``readiness`` (Ready or
NotReady). A drill that failed to run counts as not passed. A kind with no drill yet has no
series (never a 0 that would read as a failure). Read from the store every few seconds by the
monitor, whoever ran the drill (a scheduled one, or ``drkit drill`` by hand).
"""

from __future__ import annotations

import contextlib
import logging

from drkit.drills.repo import DrillRepository, DrillRow, DrillState
from drkit.drills.report import Verdict
from drkit.errors import DrkitError
from drkit.health.metrics import MonitorMetrics
from drkit.store import StateStore

log = logging.getLogger(__name__)

KINDS = ("drill", "readiness")
_READINESS = (Verdict.READY, Verdict.NOT_READY)
_PASSED = (Verdict.POLICY_MET, Verdict.READY)
_RECENT = 50  # the latest kind of each is among the last few drills in practice


def drill_kind(row: DrillRow) -> str:
    """``readiness`` or ``drill`` (a failed drill without a verdict: by its stored name)."""
    if row.verdict is not None:
        return "readiness" if row.verdict in _READINESS else "drill"
    return "readiness" if row.name.startswith("readiness") else "drill"


def latest_by_kind(rows: list[DrillRow]) -> dict[str, DrillRow]:
    """The newest ended drill of each kind among ``rows`` (newest first)."""
    out: dict[str, DrillRow] = {}
    for row in rows:
        if row.state == DrillState.RUNNING.value or row.finished_at is None:
            continue
        out.setdefault(drill_kind(row), row)
    return out


def latest_drills(store: StateStore) -> dict[str, DrillRow]:
    """The newest ended drill of each kind in ``store`` (what status and the gauges show)."""
    return latest_by_kind(DrillRepository(store).latest(_RECENT))


def passed(row: DrillRow) -> bool:
    """PolicyMet or Ready; a drill that did not run to its end did not pass."""
    return row.verdict in _PASSED


def publish_drill_figures(store: StateStore, metrics: MonitorMetrics) -> None:
    """Set the drill gauges from ``store``; a store that does not answer leaves them as they
    were; never raises."""
    try:
        latest = latest_drills(store)
    except DrkitError as err:
        log.warning("drill figures not refreshed", extra={"error": str(err)})
        return
    for kind in KINDS:
        row = latest.get(kind)
        if row is None or row.finished_at is None:
            for gauge in (metrics.drill_passed, metrics.drill_finished):
                with contextlib.suppress(KeyError):  # never set
                    gauge.remove(kind)
            continue
        metrics.drill_passed.labels(kind).set(1 if passed(row) else 0)
        metrics.drill_finished.labels(kind).set(row.finished_at.timestamp())
