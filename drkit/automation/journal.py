"""The automation's audit trail in the state store: operator events and decisions.

* Operator events (``automation_events``): ``pause`` and ``resume`` switch automatic failover
  off and on; ``ack`` acknowledges an automatic failover run, lifting the block it leaves.  Each
  records who and why.  The current pause is the latest pause or resume.
* Decisions (``automation_decisions``): an evaluation is stored when it acts or when the checks
  that failed, or what they say (clocks aside: "no answer for 12s" is the same reason as "for
  11s"), differ from the observer's previous stored one - every change of mind, not one row per
  probe interval; every evaluation is also logged.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import select

from drkit.automation.decision import Decision, Pause
from drkit.errors import ConfigError, Problem
from drkit.failover.model import Procedure, RunState
from drkit.store.db import StateStore
from drkit.store.models import AutomationDecision, AutomationEvent, FailoverRun

AUTOMATION = "automation"  # requested_by of runs the monitor started: "automation:<observer>"


class EventKind(StrEnum):
    PAUSE = "pause"
    RESUME = "resume"
    ACK = "ack"


@dataclass(frozen=True)
class StoredDecision:
    observer: str
    source: str
    target: str
    act: bool
    summary: str
    evidence: dict[str, Any]
    run_id: int | None
    at: datetime


def is_automatic(requested_by: str) -> bool:
    return requested_by == AUTOMATION or requested_by.startswith(AUTOMATION + ":")


class AutomationJournal:
    def __init__(self, store: StateStore) -> None:
        self.store = store

    # -- operator events ----------------------------------------------------------------------

    def pause(self, by: str, reason: str) -> None:
        self._event(EventKind.PAUSE, by, reason)

    def resume(self, by: str, reason: str) -> None:
        self._event(EventKind.RESUME, by, reason)

    def paused(self) -> Pause | None:
        """The pause in force, or None."""
        with self.store.session() as session:
            row = session.scalars(
                select(AutomationEvent)
                .where(AutomationEvent.kind.in_([EventKind.PAUSE.value, EventKind.RESUME.value]))
                .order_by(AutomationEvent.id.desc())
                .limit(1)
            ).one_or_none()
        if row is None or row.kind != EventKind.PAUSE.value:
            return None
        return Pause(row.by, row.reason, row.at.timestamp())

    def ack(self, run_id: int, by: str, reason: str) -> None:
        """Acknowledge automatic run ``run_id``; ConfigError when there is no such run."""
        with self.store.session() as session:
            run = session.get(FailoverRun, run_id)
            if run is None or not is_automatic(run.requested_by):
                raise ConfigError(
                    [Problem("RUN", f"no automatic failover run {run_id} (drkit failover list)")]
                )
            if RunState(run.state).in_progress:
                raise ConfigError(
                    [Problem("RUN", f"run {run_id} is still running; acknowledge it once it ends")]
                )
            session.add(
                AutomationEvent(kind=EventKind.ACK.value, run_id=run_id, by=by, reason=reason)
            )

    def unacknowledged(self) -> tuple[int, ...]:
        """Automatic failover runs that ended and nobody acknowledged, oldest first."""
        with self.store.session() as session:
            acked = set(
                session.scalars(
                    select(AutomationEvent.run_id).where(
                        AutomationEvent.kind == EventKind.ACK.value
                    )
                )
            )
            runs = session.scalars(
                select(FailoverRun)
                .where(FailoverRun.kind == Procedure.FAILOVER.value)
                .where(
                    FailoverRun.state.not_in([RunState.RUNNING.value, RunState.ROLLING_BACK.value])
                )
                .order_by(FailoverRun.id)
            ).all()
            return tuple(r.id for r in runs if is_automatic(r.requested_by) and r.id not in acked)

    def _event(self, kind: EventKind, by: str, reason: str) -> None:
        with self.store.session() as session:
            session.add(AutomationEvent(kind=kind.value, by=by, reason=reason))

    # -- decisions ----------------------------------------------------------------------------

    def record(self, observer: str, decision: Decision, run_id: int | None = None) -> bool:
        """Store ``decision`` when it acts or changed; True when stored."""
        summary = decision.summary()
        with self.store.session() as session:
            last = session.scalars(
                select(AutomationDecision)
                .where(AutomationDecision.source == decision.source)
                .where(AutomationDecision.target == decision.target)
                .where(AutomationDecision.observer == observer)
                .order_by(AutomationDecision.id.desc())
                .limit(1)
            ).one_or_none()
            if not decision.act and last is not None and _reasons(last) == _failed(decision):
                return False
            session.add(
                AutomationDecision(
                    observer=observer,
                    source=decision.source,
                    target=decision.target,
                    act=decision.act,
                    summary=summary,
                    evidence=decision.to_json(),
                    run_id=run_id,
                    at=datetime.fromtimestamp(decision.at, UTC),
                )
            )
        return True

    def decisions(self, limit: int = 20) -> list[StoredDecision]:
        """The latest stored decisions, newest first."""
        with self.store.session() as session:
            rows = session.scalars(
                select(AutomationDecision).order_by(AutomationDecision.id.desc()).limit(limit)
            ).all()
        return [
            StoredDecision(
                r.observer, r.source, r.target, r.act, r.summary, r.evidence, r.run_id, r.at
            )
            for r in rows
        ]


def _failed(decision: Decision) -> list[tuple[str, str]]:
    """A decision's change key: the checks that failed, with their details (minus clocks)."""
    return [(c.name.value, "" if c.ticking else c.detail) for c in decision.failed]


def _reasons(row: AutomationDecision) -> list[tuple[str, str]]:
    """The change key of a stored decision (see :func:`_failed`)."""
    return [
        (c["name"], "" if c.get("ticking") else c["detail"])
        for c in row.evidence.get("checks", [])
        if not c.get("passed")
    ]
